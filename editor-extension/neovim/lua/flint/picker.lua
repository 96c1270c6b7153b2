-- Pick Variant (:FlintPick, docs/protocol.md `flint/variants`): every ranked variant at the cursor with its
-- own latency and source, in vim.ui.select; the chosen one is inserted and reported (flint/didAccept).
-- The server answers with item 1 as soon as it is ready (`complete` false) and sends flint/refresh once the
-- other variants are there. A vim.ui.select list cannot grow once shown, so while more are coming the pick
-- waits for them (asking again on each flint/refresh, at most PICK_WAIT_MS) with the server's note in the
-- message area; the list's prompt carries the note of the answer it shows (the model's variants agree, or
-- alternatives still on their way when the wait ran out), as VS Code's list does.
local ghost = require('flint.ghost')
local state = require('flint.state')
local util = require('flint.util')

local M = {}

local PICK_WAIT_MS = 3000 -- then the list shows what there is
-- the pick waiting for more variants: { ctx = what pick_variant saw, res = the longest answer yet }
local waiting = nil

local function fmt_ms(ms)
  return ms < 10 and string.format('%.1f ms', ms) or string.format('%d ms', math.floor(ms + 0.5))
end

--- How long a variant took, as the user should read it (docs/protocol.md `flint/variants`): a model
--- answer shows its generation time and first-token time; one that cost no generation says where it
--- came from instead.
function M.variant_timing(v)
  if v.source == 'memory' or v.source == 'disk' then
    return 'from cache (' .. v.source .. ')'
  elseif v.source == 'type-through' then
    return 'typed through'
  end
  local parts = {}
  parts[#parts + 1] = (type(v.totalMs) == 'number' and v.totalMs > 0) and fmt_ms(v.totalMs) or 'latency not reported'
  if type(v.ttftMs) == 'number' and v.ttftMs > 0 then
    parts[#parts + 1] = 'first token ' .. fmt_ms(v.ttftMs)
  end
  parts[#parts + 1] = v.source or 'unknown source'
  return table.concat(parts, ', ')
end

--- One row of :FlintPick: the first non-blank line, then the timing and (when not local) the backend.
function M.variant_label(v)
  local first = ((v.insertText or ''):match('[^\n]*%S[^\n]*') or ''):gsub('^%s+', '')
  local extra = (v.backend and v.backend ~= vim.NIL and v.backend ~= 'local') and (', ' .. v.backend) or ''
  return string.format('%s   (%s%s)', first, M.variant_timing(v), extra)
end

local function note(res)
  return type(res.note) == 'string' and res.note or ''
end

--- The list's prompt, with the server's note on the answer when it sent one.
function M.prompt(res)
  local n = note(res)
  return n ~= '' and ('Flint variants · ' .. n) or 'Flint variants'
end

--- Whether more variants are on their way: the server says so (`complete` false); a server that does not
--- say (an older one) sends item 1 alone first.
local function more_coming(res)
  if type(res.complete) == 'boolean' then
    return not res.complete
  end
  return #res.items == 1
end

--- Insert the chosen variant `v` of `res` over its range and report it.
local function apply(ctx, res, v)
  if not v or not vim.api.nvim_win_is_valid(ctx.win) then
    return
  end
  vim.api.nvim_set_current_win(ctx.win)
  ghost.clear()
  local enc = util.encoding(ctx.client)
  local cur = vim.api.nvim_win_get_cursor(ctx.win)
  local srow, scol, erow, ecol = cur[1] - 1, cur[2], cur[1] - 1, cur[2]
  if v.range then
    srow = v.range.start.line
    scol = util.buf_byte_col(ctx.bufnr, srow, v.range.start.character, enc)
    erow = v.range['end'].line
    ecol = util.buf_byte_col(ctx.bufnr, erow, v.range['end'].character, enc)
  end
  local lines = vim.split(v.insertText, '\n', { plain = true })
  vim.api.nvim_buf_set_text(ctx.bufnr, srow, scol, erow, ecol, lines)
  local last = srow + #lines - 1
  vim.api.nvim_win_set_cursor(ctx.win, { last + 1, (#lines == 1 and scol or 0) + #lines[#lines] })
  state.stats.accepted = state.stats.accepted + 1
  util.notify(ctx.client, 'flint/didAccept', { id = res.id, index = v.index })
end

local function show(ctx, res)
  vim.ui.select(res.items, { prompt = M.prompt(res), format_item = M.variant_label }, function(v)
    apply(ctx, res, v)
  end)
end

local function ask(ctx, handler)
  local p = ctx.params
  util.request(ctx.client, 'flint/variants', { textDocument = p.textDocument, position = p.position }, handler,
    ctx.bufnr)
end

--- Show the longest answer a wait got (once; a newer pick replaces the wait).
local function finish(w)
  if waiting ~= w then
    return
  end
  waiting = nil
  show(w.ctx, w.res)
end

local function wait(ctx, res)
  local w = { ctx = ctx, res = res }
  waiting = w
  if note(res) ~= '' then
    vim.api.nvim_echo({ { 'Flint: ' .. note(res) .. '…' } }, false, {})
  end
  vim.defer_fn(function()
    finish(w)
  end, PICK_WAIT_MS)
end

--- flint/refresh for `uri`: a pick waiting there asks again and shows the answer once nothing more is
--- coming. Returns whether the refresh was the pick's.
function M.refreshed(uri)
  local w = waiting
  if not w or w.ctx.uri ~= uri then
    return false
  end
  ask(w.ctx, function(err, r)
    local got = not err and r and r.items
    if got and #r.items >= #w.res.items then
      w.res = r
    end
    -- an older server's answer after flint/refresh is all there is (it does not say `complete`)
    if not got or r.complete ~= false then
      finish(w)
    end
  end)
  return true
end

--- :FlintPick: ask for the variants at the cursor, wait while more are coming, let the user choose.
function M.pick_variant()
  local client = state.client()
  if not client then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local ctx = { client = client, win = vim.api.nvim_get_current_win(), bufnr = bufnr,
                uri = vim.uri_from_bufnr(bufnr), params = vim.lsp.util.make_position_params(0, util.encoding(client)) }
  ask(ctx, function(err, res)
    if err or not res or not res.items or #res.items == 0 then
      vim.notify('Flint: no variants here', vim.log.levels.INFO)
      return
    end
    if more_coming(res) then
      wait(ctx, res)
    else
      show(ctx, res)
    end
  end)
end

return M
