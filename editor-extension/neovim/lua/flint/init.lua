-- Flint for Neovim: runs `flint serve` (LSP over stdio) and shows its inline completions as ghost text.
--
--   require('flint').setup({ ... })        -- see M.defaults below and docs/editors.md
--
-- Modes (opts.mode = 'auto' picks the first that applies):
--   'builtin'    Neovim 0.12+: vim.lsp.inline_completion draws and accepts the suggestions.
--   'ghost'      Neovim 0.11: this plugin requests textDocument/inlineCompletion and draws the
--                suggestion with extmarks (inline virtual text + virtual lines).
--   'completion' Neovim 0.7-0.10: Flint's textDocument/completion fallback item in the completion
--                menu (omnifunc <C-x><C-o>, or nvim-cmp / any LSP completion source).
local M = {}

M.defaults = {
  mode = 'auto',
  -- Interpreter that has Flint installed (`<python> -m lsp_server.cli serve`). nil: $VIRTUAL_ENV, then a
  -- .venv/venv in the project root, then `python3`.
  python = nil,
  cmd = nil, -- full command override, e.g. { 'flint', 'serve' }
  cmd_env = nil, -- extra environment for the server, e.g. { FLINT_HOME = '/path' }
  -- Server settings (docs/editors.md, "Settings"), sent as initializationOptions and as the `flint`
  -- settings section; unset ones take the server's defaults. E.g. { maxVariants = 5, routing = 'hybrid' }.
  settings = {},
  filetypes = nil, -- nil: every normal file buffer; or a list such as { 'python', 'lua' }
  disabled_filetypes = {}, -- filetypes Flint stays off in (their text never reaches the server)
  -- Files Flint stays off in: globs matched against the full path and the path relative to the root.
  exclude = { '**/.env', '**/.env.*', '**/*.pem', '**/*.key' },
  -- 'off' | 'messages' | 'verbose': the trace level sent in `initialize` (the client's own record of the
  -- traffic: vim.lsp.set_log_level('debug'), then :FlintLog)
  trace = 'off',
  auto_trigger = true, -- ask on every edit in insert mode ('ghost' mode)
  debounce_ms = 0, -- client-side wait before asking ('ghost' mode); Flint speculates, 0 is right
  keymaps = {
    accept = '<Tab>', -- falls back to a normal <Tab> when no suggestion is shown
    accept_word = '<M-Right>',
    accept_line = '<M-Down>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    trigger = '<M-\\>', -- ask now (also what 'completion' mode maps to omnifunc)
    -- next edits (lua/flint/nextedit.lua): normal mode, and insert mode's accept key when no ghost text
    next_edit = '<Tab>', -- jump to the edit shown, then apply it
    next_edit_dismiss = '<Esc>', -- normal mode, only while one is shown
  },
  hl_group = 'FlintGhost', -- linked to Comment unless defined
}

M.config = vim.deepcopy(M.defaults)
M.mode = nil
M.status = { state = 'stopped', model = '', lastLatencyMs = nil, source = nil, message = '' }
M.stats = { requests = 0, suggestions = 0, accepted = 0, partial = 0, latencies = {} }

local ns = vim.api.nvim_create_namespace('flint_ghost')
local has = function(v)
  return vim.fn.has('nvim-' .. v) == 1
end
local uv = vim.uv or vim.loop
local augroup = nil
local enabled = true
local client_id = nil
local pending = nil -- { client, id }
local timer = nil
local state = nil -- the suggestion on screen (ghost mode)
local snoozed_until = 0 -- os.time() when a snooze ends
local snooze_timer = nil
local cursor_timer = nil
local last_cursor = nil -- the spot last reported with flint/didMoveCursor
-- the cursor settled this long after a move: tell the server (flint/didMoveCursor) so it starts that spot
local CURSOR_SETTLE_MS = 100

---------------------------------------------------------------------- compat helpers

local function c_request(client, method, params, handler, bufnr)
  if has('0.11') then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function c_notify(client, method, params)
  if has('0.11') then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function c_cancel(client, id)
  if has('0.11') then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

local function get_client()
  if not client_id then
    return nil
  end
  local c = vim.lsp.get_client_by_id(client_id)
  if not c then
    return nil
  end
  local stopped
  if has('0.11') then
    stopped = c:is_stopped()
  else
    stopped = c.is_stopped()
  end
  return (not stopped) and c or nil
end

local function snoozed()
  return snoozed_until > os.time()
end

--- Whether suggestions are wanted now (enabled and not snoozed).
local function active()
  return enabled and not snoozed()
end

local function encoding(client)
  return (client and client.offset_encoding) or 'utf-16'
end

--- Length of `s` in the given position encoding's units.
local function enc_len(s, enc)
  if enc == 'utf-8' then
    return #s
  end
  if has('0.11') then
    return vim.str_utfindex(s, enc)
  end
  local u32, u16 = vim.str_utfindex(s)
  return enc == 'utf-32' and u32 or u16
end

--- Byte column of an LSP `character` on line `row` (0-based) of `bufnr`.
local function byte_col(bufnr, row, character, enc)
  if enc == 'utf-8' then
    return character
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local ok, col
  if has('0.11') then
    ok, col = pcall(vim.str_byteindex, line, enc, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, enc == 'utf-16')
  end
  return ok and col or #line
end

local function find_python(root)
  if M.config.python then
    return vim.fn.expand(M.config.python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and vim.fn.executable(venv .. '/bin/python') == 1 then
    return venv .. '/bin/python'
  end
  for _, d in ipairs({ '.venv', 'venv' }) do
    local p = (root or vim.fn.getcwd()) .. '/' .. d .. '/bin/python'
    if vim.fn.executable(p) == 1 then
      return p
    end
  end
  return 'python3'
end

local function find_root(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.fs and vim.fs.find and name ~= '' then
    local found = vim.fs.find({ '.git', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod' }, {
      path = vim.fs.dirname(name),
      upward = true,
    })[1]
    if found then
      return vim.fs.dirname(found)
    end
  end
  return vim.fn.getcwd()
end

function M.pick_mode()
  local m = M.config.mode
  if m and m ~= 'auto' then
    return m
  end
  if vim.lsp.inline_completion and vim.lsp.inline_completion.enable then
    return 'builtin'
  end
  if has('0.11') then
    return 'ghost'
  end
  return 'completion'
end

---------------------------------------------------------------------- ghost text (0.11)

local function clear()
  if state and vim.api.nvim_buf_is_valid(state.bufnr) then
    vim.api.nvim_buf_clear_namespace(state.bufnr, ns, 0, -1)
  end
  state = nil
end

local function cancel_pending()
  if pending then
    pcall(c_cancel, pending.client, pending.id)
    pending = nil
  end
end

--- The text between the suggestion's anchor and the cursor (what was typed or accepted since).
local function typed_since_anchor(s)
  local cur = vim.api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
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

local function render()
  local s = state
  if not s or not vim.api.nvim_buf_is_valid(s.bufnr) then
    return
  end
  vim.api.nvim_buf_clear_namespace(s.bufnr, ns, 0, -1)
  local rest = remaining(s)
  if not rest then
    return
  end
  local cur = vim.api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local lines = vim.split(rest, '\n', { plain = true })
  -- Text the item replaces to the right of the cursor (auto-closed brackets): do not draw it twice.
  local tail = s.items[s.index].tail or ''
  local first = lines[1]
  if #lines == 1 and tail ~= '' and first:sub(-#tail) == tail then
    first = first:sub(1, #first - #tail)
  end
  local opts = {
    virt_text = { { first, M.config.hl_group } },
    virt_text_pos = 'inline',
    hl_mode = 'combine',
    priority = 65535,
  }
  if #lines > 1 then
    local vl = {}
    for i = 2, #lines do
      vl[#vl + 1] = { { lines[i], M.config.hl_group } }
    end
    opts.virt_lines = vl
  end
  s.extmark = vim.api.nvim_buf_set_extmark(s.bufnr, ns, row, col, opts)
  s.shown_rest = rest
end

--- The ghost text on screen, as one string (virtual text + virtual lines joined by newlines), or nil.
function M.ghost_text(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })
  if #marks == 0 then
    return nil
  end
  local d = marks[1][4]
  local parts = {}
  for _, chunk in ipairs(d.virt_text or {}) do
    parts[#parts + 1] = chunk[1]
  end
  local out = { table.concat(parts) }
  for _, vl in ipairs(d.virt_lines or {}) do
    local p = {}
    for _, chunk in ipairs(vl) do
      p[#p + 1] = chunk[1]
    end
    out[#out + 1] = table.concat(p)
  end
  return table.concat(out, '\n')
end

function M.visible()
  return state ~= nil and state.shown_rest ~= nil and #vim.api.nvim_buf_get_extmarks(state.bufnr, ns, 0, -1, {}) > 0
end

local function on_result(bufnr, tick, client, t0, err, result, kind, after)
  if err or not result then
    M.last_drop = err and ('error: ' .. vim.inspect(err)) or 'empty result'
    return
  end
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then
    M.last_drop = 'buffer changed'
    return
  end
  if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick or not vim.fn.mode():match('^[iR]') then
    M.last_drop = 'stale (buffer edited or insert mode left)'
    return
  end
  M.last_drop = nil
  local raw = result.items or result
  if type(raw) ~= 'table' or #raw == 0 then
    clear()
    return
  end
  local enc = encoding(client)
  local cur = vim.api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local items = {}
  local arow, acol = row, col
  for i, it in ipairs(raw) do
    local text = type(it.insertText) == 'table' and it.insertText.value or it.insertText or ''
    local srow, scol, tail = row, col, ''
    if it.range then
      srow = it.range.start.line
      scol = byte_col(bufnr, srow, it.range.start.character, enc)
      local erow = it.range['end'].line
      local ecol = byte_col(bufnr, erow, it.range['end'].character, enc)
      if erow == row and ecol > col then
        tail = vim.api.nvim_buf_get_text(bufnr, row, col, erow, ecol, {})[1] or ''
      end
      -- Keep only the part of the text beyond what already sits between range start and the cursor.
      if srow == row and scol < col then
        local before = vim.api.nvim_buf_get_text(bufnr, row, scol, row, col, {})[1] or ''
        if text:sub(1, #before) == before then
          text = text:sub(#before + 1)
        end
      end
    end
    local arg = (it.command and it.command.arguments and it.command.arguments[1]) or {}
    items[#items + 1] = { text = text, tail = tail, id = arg.id, index = arg.index or (i - 1) }
  end
  local ms = (uv.hrtime() - t0) / 1e6
  M.stats.suggestions = M.stats.suggestions + 1
  table.insert(M.stats.latencies, ms)
  if M.status.lastLatencyMs == nil then
    M.status.lastLatencyMs = ms
  end
  state = {
    bufnr = bufnr,
    row = arow,
    col = acol,
    items = items,
    index = 1,
    accepted = 0,
    encoding = enc,
    client = client,
    invoked = kind == 1,
  }
  if after then
    return after()
  end
  render()
  local first = items[1]
  if first and first.id then
    c_notify(client, 'flint/didShow', { id = first.id, index = first.index })
  end
end

--- Ask the server for a suggestion at the cursor now. kind: 1 = invoked (all variants), 2 = automatic
--- (the server answers with its fastest single variant). `after` runs instead of drawing the result.
function M.trigger(kind, after)
  local client = get_client()
  if not client or not active() then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  cancel_pending()
  local params = vim.lsp.util.make_position_params(0, encoding(client))
  params.context = { triggerKind = kind or 2 }
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local t0 = uv.hrtime()
  M.stats.requests = M.stats.requests + 1
  local ok, id = c_request(client, 'textDocument/inlineCompletion', params, function(err, result)
    if pending and pending.id == id then
      pending = nil
    end
    on_result(bufnr, tick, client, t0, err, result, kind, after)
  end, bufnr)
  if ok and id then
    pending = { client = client, id = id }
  end
end

local function schedule_trigger()
  if M.config.debounce_ms and M.config.debounce_ms > 0 then
    timer = timer or uv.new_timer()
    timer:stop()
    timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
      M.trigger(2)
    end))
  else
    M.trigger(2)
  end
end

local function on_text_changed()
  if state and state.bufnr == vim.api.nvim_get_current_buf() and remaining(state) then
    render() -- typed (or accepted) through the suggestion: keep showing the rest at once
  else
    clear()
  end
  if M.config.auto_trigger and active() then
    schedule_trigger()
  end
end

local function insert_at_cursor(text)
  local cur = vim.api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(0, row, col, row, col, lines)
  local erow = row + #lines - 1
  local ecol = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { erow + 1, ecol })
end

--- Accept the whole suggestion (also replaces auto-closed characters the server's range covers).
function M.accept()
  local s = state
  if M.mode == 'builtin' then
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
  cancel_pending()
  clear()
  local cur = vim.api.nvim_win_get_cursor(0)
  local row, col = cur[1] - 1, cur[2]
  local tail = item.tail or ''
  if tail ~= '' and rest:find('\n', 1, true) == nil and rest:sub(-#tail) == tail then
    -- Replace the auto-closed characters the suggestion re-types.
    vim.api.nvim_buf_set_text(0, row, col, row, col + #tail, { '' })
  end
  insert_at_cursor(rest)
  M.stats.accepted = M.stats.accepted + 1
  if item.id then
    c_notify(s.client, 'flint/didAccept', { id = item.id, index = item.index })
  end
  return true
end

local function partial(pattern_fn)
  local s = state
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
  cancel_pending()
  insert_at_cursor(piece)
  s.accepted = s.accepted + enc_len(piece, s.encoding)
  M.stats.partial = M.stats.partial + 1
  if item.id then
    c_notify(s.client, 'flint/didPartiallyAccept', { id = item.id, index = item.index, acceptedLength = s.accepted })
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

--- Show the next (count=1) or previous (count=-1) variant.
function M.cycle(count)
  if M.mode == 'builtin' then
    return vim.lsp.inline_completion.select({ count = count })
  end
  local s = state
  if not s or #s.items == 0 or (#s.items < 2 and not s.invoked) then
    -- Automatic requests carry one variant; an invoked request brings all of them (one batched pass).
    local shown = s and remaining(s)
    M.trigger(1, function()
      local n = state and #state.items or 0
      if n == 0 then
        return
      end
      -- Start from the variant that was on screen, so "next" really moves on.
      if shown then
        for i, it in ipairs(state.items) do
          local r = remaining({ bufnr = state.bufnr, row = state.row, col = state.col, items = { it }, index = 1 })
          if r == shown then
            state.index = i
            break
          end
        end
      end
      M.cycle(count)
    end)
    return
  end
  -- Only variants consistent with what was typed since the anchor can be shown.
  for _ = 1, #s.items do
    s.index = (s.index - 1 + count) % #s.items + 1
    if remaining(s) then
      break
    end
  end
  s.accepted = 0
  render()
  local item = s.items[s.index]
  if item and item.id then
    c_notify(s.client, 'flint/didShow', { id = item.id, index = item.index })
  end
end

function M.dismiss()
  cancel_pending()
  clear()
end

--- The current suggestion's variants: { index = i, count = n, text = ... } (for tests and statuslines).
function M.current()
  if not state then
    return nil
  end
  local item = state.items[state.index]
  return { index = state.index, count = #state.items, text = item and item.text, id = item and item.id }
end

---------------------------------------------------------------------- Pick Variant (flint/variants)

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

-- an open Pick Variant that got item 1 alone, waiting for flint/refresh (the other variants are ready)
local pending_pick = nil
local PICK_WAIT_MS = 3000 -- then the list shows what there is

function M.pick_variant()
  local client = get_client()
  if not client then
    return
  end
  local win = vim.api.nvim_get_current_win()
  local bufnr = vim.api.nvim_get_current_buf()
  local params = vim.lsp.util.make_position_params(0, encoding(client))
  local function ask(then_)
    c_request(client, 'flint/variants', { textDocument = params.textDocument, position = params.position }, then_, bufnr)
  end
  local function show(res)
    vim.ui.select(res.items, {
      prompt = 'Flint variants',
      format_item = M.variant_label,
    }, function(v)
      if not v or not vim.api.nvim_win_is_valid(win) then
        return
      end
      vim.api.nvim_set_current_win(win)
      clear()
      local enc = encoding(client)
      local cur = vim.api.nvim_win_get_cursor(win)
      local srow, scol, erow, ecol = cur[1] - 1, cur[2], cur[1] - 1, cur[2]
      if v.range then
        srow = v.range.start.line
        scol = byte_col(bufnr, srow, v.range.start.character, enc)
        erow = v.range['end'].line
        ecol = byte_col(bufnr, erow, v.range['end'].character, enc)
      end
      local lines = vim.split(v.insertText, '\n', { plain = true })
      vim.api.nvim_buf_set_text(bufnr, srow, scol, erow, ecol, lines)
      local last = srow + #lines - 1
      vim.api.nvim_win_set_cursor(win, { last + 1, (#lines == 1 and scol or 0) + #lines[#lines] })
      M.stats.accepted = M.stats.accepted + 1
      c_notify(client, 'flint/didAccept', { id = res.id, index = v.index })
    end)
  end
  ask(function(err, res)
    if err or not res or not res.items or #res.items == 0 then
      vim.notify('Flint: no variants here', vim.log.levels.INFO)
      return
    end
    if #res.items > 1 then
      show(res)
      return
    end
    -- item 1 comes first; the server sends flint/refresh once the other variants are there (asking again
    -- returns them all). A list cannot grow once shown, so wait a moment for them.
    local done = false
    local function finish(r)
      if done then
        return
      end
      done = true
      pending_pick = nil
      show(r)
    end
    pending_pick = {
      uri = vim.uri_from_bufnr(bufnr),
      again = function()
        ask(function(e2, r2)
          finish((not e2 and r2 and r2.items and #r2.items > #res.items) and r2 or res)
        end)
      end,
    }
    vim.defer_fn(function()
      finish(res)
    end, PICK_WAIT_MS)
  end)
end

---------------------------------------------------------------------- status / stats

local function on_status(_, result)
  if type(result) ~= 'table' then
    return
  end
  M.status.state = result.state or M.status.state
  M.status.model = result.model or M.status.model
  M.status.message = result.message or ''
  if type(result.lastLatencyMs) == 'number' then
    M.status.lastLatencyMs = result.lastLatencyMs
    M.status.source = result.source
  end
  if type(result.context) == 'table' then
    M.status.context = result.context
  end
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'FlintStatus', modeline = false })
end

-- routing `race`: a capable answer replaced the suggestion on screen; ask again where the cursor still is
local function on_refresh(_, result)
  if type(result) ~= 'table' or type(result.textDocument) ~= 'table' then
    return
  end
  vim.schedule(function()
    if pending_pick and pending_pick.uri == result.textDocument.uri then
      pending_pick.again()
      return
    end
    local bufnr = vim.api.nvim_get_current_buf()
    if vim.uri_from_bufnr(bufnr) == result.textDocument.uri then
      M.trigger(2)
    end
  end)
end

--- For a statusline: e.g. "⚡ Flint 38 ms", "Flint loading", "Flint off".
function M.statusline()
  if not enabled then
    return 'Flint off'
  end
  if snoozed() then
    return string.format('Flint snoozed %d min', math.ceil((snoozed_until - os.time()) / 60))
  end
  local b = vim.api.nvim_get_current_buf()
  if vim.api.nvim_buf_is_valid(b) and M.off_reason(b) then
    return 'Flint off (' .. M.off_reason(b) .. ')'
  end
  local st = M.status.state
  if st == 'ready' or st == 'busy' then
    local ms = M.status.lastLatencyMs
    return (st == 'busy' and '… ' or '⚡ ') .. 'Flint' .. (ms and string.format(' %d ms', math.floor(ms + 0.5)) or '')
  end
  return 'Flint ' .. st
end

--- "Why this suggestion": the repository context chunks (other files) in the last suggestion's prompt.
function M.why()
  local ctx = M.status.context or {}
  local chunks = type(ctx.chunks) == 'table' and ctx.chunks or {}
  local msg
  if #chunks == 0 then
    msg = 'Flint: the last suggestion used only the current file (no repository context)'
  else
    local files = type(ctx.files) == 'table' and ctx.files or {}
    msg = string.format('Flint: the last suggestion\'s prompt held %d chunk(s) from %d file(s):\n  %s',
      #chunks, #files, table.concat(chunks, '\n  '))
  end
  vim.notify(msg, vim.log.levels.INFO)
  return msg
end

function M.show_stats()
  local l = M.stats.latencies
  local sorted = vim.deepcopy(l)
  table.sort(sorted)
  local function pct(p)
    if #sorted == 0 then
      return 0
    end
    return sorted[math.max(1, math.ceil(p / 100 * #sorted))]
  end
  local msg = string.format(
    'Flint %s (%s, mode %s): %d requests, %d suggestions, %d accepted, %d partial; round trip p50 %.0f ms, p95 %.0f ms; last %s ms (%s)',
    M.status.state, M.status.model ~= '' and M.status.model or M.config.settings.model, tostring(M.mode),
    M.stats.requests, M.stats.suggestions, M.stats.accepted, M.stats.partial, pct(50), pct(95),
    M.status.lastLatencyMs and string.format('%.0f', M.status.lastLatencyMs) or '-', M.status.source or '-'
  )
  vim.notify(msg, vim.log.levels.INFO)
  return msg
end

--- The settings the server gets: the user's, with `enable` off while disabled or snoozed.
function M.server_settings()
  local s = vim.deepcopy(M.config.settings or {})
  if not active() then
    s.enable = false
  elseif s.enable == false then
    s.enable = nil -- re-enabled: back to the server's default (on)
  end
  return s
end

local function push_settings()
  local c = get_client()
  if c then
    -- what workspace/configuration answers (client.settings in 0.11+, client.config.settings before)
    c.config.settings = { flint = M.server_settings() }
    if type(c.settings) == 'table' then
      c.settings = { flint = M.server_settings() }
    end
    c_notify(c, 'workspace/didChangeConfiguration', { settings = { flint = M.server_settings() } })
  end
  if not active() then
    M.dismiss()
  end
  if M.mode == 'builtin' then
    pcall(vim.lsp.inline_completion.enable, active())
  end
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'FlintStatus', modeline = false })
end

--- Turn suggestions on (true), off (false) or flip them (nil).
function M.toggle(on)
  if on == nil then
    enabled = not enabled
  else
    enabled = on and true or false
  end
  M.config.settings.enable = enabled
  push_settings()
  vim.notify('Flint ' .. (enabled and 'enabled' or 'disabled'))
  return enabled
end

--- Pause suggestions for `minutes` (asks with vim.ui.select when nil). The server stops speculating too.
function M.snooze(minutes)
  if minutes == nil then
    local choices = { 5, 15, 30, 60 }
    vim.ui.select(choices, {
      prompt = 'Snooze Flint for',
      format_item = function(m)
        return m .. ' minutes'
      end,
    }, function(m)
      if m then
        M.snooze(m)
      end
    end)
    return
  end
  minutes = tonumber(minutes)
  if not minutes or minutes < 1 or minutes > 1440 or minutes ~= math.floor(minutes) then
    vim.notify('Flint: snooze takes a whole number of minutes from 1 to 1440', vim.log.levels.ERROR)
    return
  end
  snoozed_until = os.time() + minutes * 60
  if snooze_timer then
    snooze_timer:stop()
  end
  snooze_timer = snooze_timer or uv.new_timer()
  snooze_timer:start(minutes * 60 * 1000, 0, vim.schedule_wrap(function()
    if not snoozed() then
      push_settings()
      vim.notify('Flint: snooze over')
    end
  end))
  push_settings()
  vim.notify(string.format('Flint snoozed for %d min', minutes))
end

function M.resume()
  snoozed_until = 0
  if snooze_timer then
    snooze_timer:stop()
  end
  push_settings()
end

function M.snoozed_until()
  return snoozed() and snoozed_until or nil
end

--- Open the LSP log: the server's window/logMessage lines at or above vim.lsp's log level (WARN unless set).
function M.open_log()
  vim.cmd('tab split ' .. vim.fn.fnameescape(vim.lsp.get_log_path()))
end

--- Turn Flint off (or back on) for a filetype (default: the current buffer's).
function M.toggle_filetype(ft)
  ft = (ft and ft ~= '') and ft or vim.bo.filetype
  if ft == '' then
    return
  end
  local list = M.config.disabled_filetypes or {}
  local off = vim.tbl_contains(list, ft)
  if off then
    M.config.disabled_filetypes = vim.tbl_filter(function(x)
      return x ~= ft
    end, list)
  else
    table.insert(list, ft)
    M.config.disabled_filetypes = list
  end
  local c = get_client()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].filetype == ft then
      if off then
        M.attach(b)
      elseif c then
        M.dismiss()
        pcall(vim.lsp.buf_detach_client, b, c.id)
      end
    end
  end
  vim.notify(string.format('Flint %s for %s', off and 'enabled' or 'disabled', ft))
end

--- Everything a user switches, in one list (vim.ui.select).
function M.menu()
  local ft = vim.bo.filetype
  local items = {
    { enabled and 'Disable completions' or 'Enable completions', function() M.toggle() end },
    snoozed() and { 'Resume now (snoozed)', M.resume } or { 'Snooze…', function() M.snooze() end },
  }
  if ft ~= '' then
    local off = vim.tbl_contains(M.config.disabled_filetypes or {}, ft)
    items[#items + 1] = { (off and 'Enable' or 'Disable') .. ' for ' .. ft, function() M.toggle_filetype(ft) end }
  end
  items[#items + 1] = { 'Pick variant…', M.pick_variant }
  items[#items + 1] = { 'Show stats', M.show_stats }
  items[#items + 1] = { 'Why this suggestion', M.why }
  items[#items + 1] = { 'Open log', M.open_log }
  items[#items + 1] = { 'Restart server', M.restart }
  vim.ui.select(items, {
    prompt = 'Flint (' .. M.statusline() .. ')',
    format_item = function(it)
      return it[1]
    end,
  }, function(it)
    if it then
      it[2]()
    end
  end)
end

---------------------------------------------------------------------- server lifecycle

local function server_cmd(root)
  if M.config.cmd then
    return M.config.cmd
  end
  return { find_python(root), '-m', 'lsp_server.cli', 'serve' }
end

--- The command that starts the server for the current buffer (used by :checkhealth flint).
function M.server_command()
  return server_cmd(find_root(vim.api.nvim_get_current_buf()))
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  if M.mode ~= 'completion' then
    caps.textDocument = caps.textDocument or {}
    caps.textDocument.inlineCompletion = { dynamicRegistration = false }
  end
  return caps
end

local function glob_match(pattern, path)
  local ok, re = pcall(vim.regex, vim.fn.glob2regpat(pattern))
  return ok and re:match_str(path) ~= nil
end

--- Why Flint is off in `bufnr` ('<filetype>' or 'excluded file'), or nil when it works there.
function M.off_reason(bufnr)
  local ft = vim.bo[bufnr].filetype
  if ft ~= '' and vim.tbl_contains(M.config.disabled_filetypes or {}, ft) then
    return ft
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name ~= '' then
    local full = vim.fn.fnamemodify(name, ':p')
    local rel = vim.fn.fnamemodify(name, ':.')
    for _, pat in ipairs(M.config.exclude or {}) do
      if glob_match(pat, full) or glob_match(pat, rel) or glob_match(pat, vim.fn.fnamemodify(name, ':t')) then
        return 'excluded file'
      end
    end
  end
  return nil
end

local function wanted(bufnr)
  if vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
    return false
  end
  if M.off_reason(bufnr) then
    return false
  end
  local fts = M.config.filetypes
  if not fts then
    return true
  end
  return vim.tbl_contains(fts, vim.bo[bufnr].filetype)
end

--- Tell the server where the cursor settled after a move that was not an edit (a buffer entered, a jump,
--- a click): it starts that spot's work before the first keystroke. Typing moves the cursor too; the
--- server ignores a spot its edits already told it about.
local function cursor_moved()
  cursor_timer = cursor_timer or uv.new_timer()
  cursor_timer:stop()
  cursor_timer:start(CURSOR_SETTLE_MS, 0, vim.schedule_wrap(function()
    local client = get_client()
    local bufnr = vim.api.nvim_get_current_buf()
    if not client or not active() or not wanted(bufnr) or not vim.lsp.buf_is_attached(bufnr, client.id) then
      return
    end
    local params = vim.lsp.util.make_position_params(0, encoding(client))
    -- the text the position is in; the client sends the edits it holds back before this notification
    params.textDocument.version = vim.lsp.util.buf_versions[bufnr]
    local p = params.position
    local key = table.concat({ params.textDocument.uri, tostring(params.textDocument.version), p.line, p.character },
      ':')
    if key ~= last_cursor then
      last_cursor = key
      c_notify(client, 'flint/didMoveCursor', params)
    end
  end))
end

local function on_attach(client, bufnr)
  client_id = client.id
  last_cursor = nil
  if bufnr == vim.api.nvim_get_current_buf() then
    cursor_moved() -- the buffer is open on the server now: where the user is in it
  end
  if M.mode == 'builtin' then
    pcall(vim.lsp.inline_completion.enable, true, { bufnr = bufnr })
  elseif M.mode == 'completion' then
    vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  end
end

--- Start (or reuse) the server for `bufnr` and attach it.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not wanted(bufnr) then
    return nil
  end
  local root = find_root(bufnr)
  local env = M.config.cmd_env
  local config = {
    name = 'flint',
    cmd = server_cmd(root),
    cmd_env = env,
    root_dir = root,
    init_options = M.server_settings(),
    settings = { flint = M.server_settings() },
    trace = M.config.trace,
    capabilities = capabilities(),
    handlers = { ['flint/status'] = on_status, ['flint/refresh'] = on_refresh },
    on_attach = on_attach,
    on_exit = function()
      M.status.state = 'stopped'
      client_id = nil
      vim.schedule(clear)
    end,
  }
  if vim.lsp.start then
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  -- Neovim 0.7: one client, attached buffer by buffer.
  local c = get_client()
  local id = c and c.id or vim.lsp.start_client(config)
  if id then
    client_id = id
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

function M.stop()
  M.dismiss()
  local c = get_client()
  if c then
    if has('0.11') then
      c:stop()
    else
      c.stop()
    end
  end
  client_id = nil
end

function M.restart()
  M.stop()
  vim.defer_fn(function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(b) then
        M.attach(b)
      end
    end
  end, 300)
end

local function map(lhs, rhs, desc, expr)
  if lhs and lhs ~= '' then
    vim.keymap.set('i', lhs, rhs, { desc = desc, expr = expr, silent = true })
  end
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  M.mode = M.pick_mode()
  M.config.settings = M.config.settings or {}
  enabled = M.config.settings.enable ~= false
  pcall(vim.api.nvim_set_hl, 0, 'FlintGhost', { link = 'Comment', default = true })

  augroup = vim.api.nvim_create_augroup('flint', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'FileType' }, {
    group = augroup,
    callback = function(ev)
      M.attach(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorMoved', 'CursorMovedI' }, {
    group = augroup,
    callback = cursor_moved,
  })
  if M.mode == 'ghost' then
    vim.api.nvim_create_autocmd('TextChangedI', { group = augroup, callback = on_text_changed })
    vim.api.nvim_create_autocmd('TextChangedP', { group = augroup, callback = on_text_changed })
    vim.api.nvim_create_autocmd('InsertEnter', {
      group = augroup,
      callback = function()
        if M.config.auto_trigger and active() then
          vim.schedule(schedule_trigger) -- after `o`/`cc` put the indentation in
        end
      end,
    })
    vim.api.nvim_create_autocmd('CursorMovedI', {
      group = augroup,
      callback = function()
        if state and not remaining(state) then
          clear()
        end
      end,
    })
    vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, { group = augroup, callback = M.dismiss })
  end

  local k = M.config.keymaps or {}
  require('flint.nextedit').setup(function()
    return active() and get_client() or nil
  end, { tab = k.next_edit, dismiss = k.next_edit_dismiss }, augroup)
  if M.mode == 'ghost' or M.mode == 'builtin' then
    map(k.accept, function()
      if M.mode == 'builtin' or M.visible() then
        return '<Cmd>lua require("flint").accept()<CR>'
      end
      if k.accept == k.next_edit and require('flint.nextedit').pending() then
        return '<Cmd>lua require("flint.nextedit").tab()<CR>' -- the ghost text, when shown, wins
      end
      return k.accept
    end, 'Flint: accept suggestion', true)
    map(k.accept_word, function()
      M.accept_word()
    end, 'Flint: accept next word')
    map(k.accept_line, function()
      M.accept_line()
    end, 'Flint: accept next line')
    map(k.next, function()
      M.cycle(1)
    end, 'Flint: next variant')
    map(k.prev, function()
      M.cycle(-1)
    end, 'Flint: previous variant')
    map(k.dismiss, function()
      M.dismiss()
    end, 'Flint: dismiss')
    map(k.trigger, function()
      M.trigger(1)
    end, 'Flint: suggest now')
  else
    map(k.trigger, '<C-x><C-o>', 'Flint: completion menu')
  end

  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) then
      M.attach(b)
    end
  end
  return M
end

return M
