-- Ghost text ('ghost' mode, Neovim 0.11): the suggestion on screen, drawn at the cursor with extmarks
-- (inline virtual text + virtual lines), kept while the user types through it, accepted whole, by word or
-- by line, its variants stepped through. inline.lua asks the server and hands the answer here. In
-- 'builtin' mode (0.12+) accept goes to vim.lsp.inline_completion instead.
local state = require('flint.state')
local util = require('flint.util')

local M = {}

local ns = vim.api.nvim_create_namespace('flint_ghost')
local pending = nil -- the request whose answer would replace what is shown: { client, id }
-- the suggestion on screen: { bufnr, row, col (its anchor), items = { { text, tail, id, index } }, index,
-- accepted, encoding, client, invoked, shown_rest }
local shown = nil

function M.clear()
  if shown and vim.api.nvim_buf_is_valid(shown.bufnr) then
    vim.api.nvim_buf_clear_namespace(shown.bufnr, ns, 0, -1)
  end
  shown = nil
end

--- A request for a new suggestion is on its way (an older one is cancelled first: cancel_pending).
function M.asking(client, id)
  pending = { client = client, id = id }
end

--- The request `id` was answered.
function M.answered(id)
  if pending and pending.id == id then
    pending = nil
  end
end

function M.cancel_pending()
  if pending then
    pcall(util.cancel, pending.client, pending.id)
    pending = nil
  end
end

--- The cursor as (0-based row, byte column).
function M.cursor()
  local cur = vim.api.nvim_win_get_cursor(0)
  return cur[1] - 1, cur[2]
end

--- The text between the suggestion's anchor and the cursor (what was typed or accepted since).
local function typed_since_anchor(s)
  local row, col = M.cursor()
  if row < s.row or (row == s.row and col < s.col) then
    return nil
  end
  local ok, lines = pcall(vim.api.nvim_buf_get_text, s.bufnr, s.row, s.col, row, col, {})
  if not ok then
    return nil
  end
  return table.concat(lines, '\n')
end

--- The part of the current variant still to be shown at the cursor, or nil if the buffer diverged.
local function remaining(s)
  local item = s.items[s.index]
  if not item then
    return nil
  end
  local typed = typed_since_anchor(s)
  if typed == nil or item.text:sub(1, #typed) ~= typed then
    return nil
  end
  local rest = item.text:sub(#typed + 1)
  if rest == '' then
    return nil
  end
  return rest
end

--- The extmark that draws `rest` (its first line inline, the others as virtual lines).
local function mark_opts(rest, tail)
  local hl = state.config.hl_group
  local lines = vim.split(rest, '\n', { plain = true })
  -- Text the item replaces to the right of the cursor (auto-closed brackets): do not draw it twice.
  local first = lines[1]
  if #lines == 1 and tail ~= '' and first:sub(-#tail) == tail then
    first = first:sub(1, #first - #tail)
  end
  local opts = { virt_text = { { first, hl } }, virt_text_pos = 'inline', hl_mode = 'combine', priority = 65535 }
  if #lines > 1 then
    local vl = {}
    for i = 2, #lines do
      vl[#vl + 1] = { { lines[i], hl } }
    end
    opts.virt_lines = vl
  end
  return opts
end

local function render()
  local s = shown
  if not s or not vim.api.nvim_buf_is_valid(s.bufnr) then
    return
  end
  vim.api.nvim_buf_clear_namespace(s.bufnr, ns, 0, -1)
  local rest = remaining(s)
  if not rest then
    return
  end
  local row, col = M.cursor()
  s.extmark = vim.api.nvim_buf_set_extmark(s.bufnr, ns, row, col, mark_opts(rest, s.items[s.index].tail or ''))
  s.shown_rest = rest
end

local function did_show(s)
  local item = s.items[s.index]
  if item and item.id then
    util.notify(s.client, 'flint/didShow', { id = item.id, index = item.index })
  end
end

--- A new suggestion `s` (see `shown`); drawn and reported unless `quiet`.
function M.show(s, quiet)
  shown = s
  if not quiet then
    render()
    did_show(s)
  end
end

--- After an edit: typed (or accepted) through the suggestion, keep showing the rest at once; else drop it.
function M.follow()
  if shown and shown.bufnr == vim.api.nvim_get_current_buf() and remaining(shown) then
    render()
  else
    M.clear()
  end
end

--- After a cursor move in insert mode: drop the suggestion where the buffer no longer matches it.
function M.drop_if_diverged()
  if shown and not remaining(shown) then
    M.clear()
  end
end

local function chunks_text(chunks)
  local parts = {}
  for _, chunk in ipairs(chunks or {}) do
    parts[#parts + 1] = chunk[1]
  end
  return table.concat(parts)
end

--- The ghost text on screen, as one string (virtual text + virtual lines joined by newlines), or nil.
function M.ghost_text(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })
  if #marks == 0 then
    return nil
  end
  local d = marks[1][4]
  local out = { chunks_text(d.virt_text) }
  for _, vl in ipairs(d.virt_lines or {}) do
    out[#out + 1] = chunks_text(vl)
  end
  return table.concat(out, '\n')
end

function M.visible()
  return shown ~= nil and shown.shown_rest ~= nil and #vim.api.nvim_buf_get_extmarks(shown.bufnr, ns, 0, -1, {}) > 0
end

local function insert_at_cursor(text)
  local row, col = M.cursor()
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(0, row, col, row, col, lines)
  local erow = row + #lines - 1
  local ecol = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { erow + 1, ecol })
end

--- Accept the whole suggestion (also replaces auto-closed characters the server's range covers).
function M.accept()
  local s = shown
  if state.mode == 'builtin' then
    return vim.lsp.inline_completion.get()
  end
  if not s then
    return false
  end
  local rest = remaining(s)
  local item = s.items[s.index]
  if not rest or not item then
    return false
  end
  M.cancel_pending()
  M.clear()
  local row, col = M.cursor()
  local tail = item.tail or ''
  if tail ~= '' and rest:find('\n', 1, true) == nil and rest:sub(-#tail) == tail then
    -- Replace the auto-closed characters the suggestion re-types.
    vim.api.nvim_buf_set_text(0, row, col, row, col + #tail, { '' })
  end
  insert_at_cursor(rest)
  state.stats.accepted = state.stats.accepted + 1
  if item.id then
    util.notify(s.client, 'flint/didAccept', { id = item.id, index = item.index })
  end
  return true
end

local function partial(pattern_fn)
  local s = shown
  if not s then
    return false
  end
  local rest = remaining(s)
  local item = s.items[s.index]
  if not rest or not item then
    return false
  end
  local piece = pattern_fn(rest)
  if not piece or piece == '' then
    return false
  end
  M.cancel_pending()
  insert_at_cursor(piece)
  s.accepted = s.accepted + util.enc_len(piece, s.encoding)
  state.stats.partial = state.stats.partial + 1
  if item.id then
    util.notify(s.client, 'flint/didPartiallyAccept', { id = item.id, index = item.index, acceptedLength = s.accepted })
  end
  render()
  return true
end

--- Accept the next word of the suggestion (leading whitespace + a word, or a run of punctuation).
function M.accept_word()
  return partial(function(rest)
    return rest:match('^%s*[%w_]+') or rest:match('^%s*[^%w_%s]+') or rest:match('^%s+')
  end)
end

--- Accept up to the end of the suggestion's current line (with its newline when more lines follow).
function M.accept_line()
  return partial(function(rest)
    local nl = rest:find('\n', 1, true)
    if nl == 1 then
      local nl2 = rest:find('\n', 2, true)
      return nl2 and rest:sub(1, nl2 - 1) or rest
    end
    return nl and rest:sub(1, nl - 1) or rest
  end)
end

--- Whether the suggestion on screen holds every variant there is to cycle through: automatic requests
--- carry one variant; an invoked request brings all of them (one batched pass).
function M.has_all()
  return shown ~= nil and #shown.items > 0 and (#shown.items >= 2 or shown.invoked)
end

--- Whether the suggestion on screen came from an explicit request.
function M.invoked()
  return shown ~= nil and shown.invoked == true
end

--- What is left of the variant on screen, or nil.
function M.rest()
  return shown and remaining(shown)
end

--- Make the variant whose rest is `was` the current one (so that "next" after asking again moves on).
function M.select(was)
  if not shown or not was then
    return
  end
  for i, it in ipairs(shown.items) do
    if remaining({ bufnr = shown.bufnr, row = shown.row, col = shown.col, items = { it }, index = 1 }) == was then
      shown.index = i
      return
    end
  end
end

--- Show the next (count=1) or previous (count=-1) of the variants on screen (0: the current one again),
--- skipping those that do not match what was typed since the anchor.
function M.step(count)
  local s = shown
  for _ = 1, #s.items do
    s.index = (s.index - 1 + count) % #s.items + 1
    if remaining(s) then
      break
    end
  end
  s.accepted = 0
  render()
  did_show(s)
end

function M.dismiss()
  M.cancel_pending()
  M.clear()
end

--- The current suggestion's variants: { index = i, count = n, text = ... } (for tests and statuslines).
function M.current()
  if not shown then
    return nil
  end
  local item = shown.items[shown.index]
  return { index = shown.index, count = #shown.items, text = item and item.text, id = item and item.id }
end

return M
