-- Flint next edits in Neovim (issue 37, docs/protocol.md `flint/nextEdit`): after the user stops editing,
-- ask the server for the edit that follows elsewhere (the other references of a renamed name, the other
-- occurrences of a replaced literal) and show the first at its place with extmarks: the old text struck
-- through, the new text inline after it, a sign in the gutter. <Tab> (normal mode; insert mode when no
-- ghost text is shown) jumps there, <Tab> again applies it and asks for the next at once; <Esc> in normal
-- mode dismisses. Any edit drops what is shown; an edit is applied only to the buffer version it was made
-- for, and only where the buffer still holds the text it replaces.
-- Other buffers (the answer's `elsewhere`: a rename's references, a changed function's call sites, in other
-- files, open or only on disk): when nothing is left here, a message names the file; <Tab> opens that buffer
-- at the edit (shown there), <Tab> again applies it, and the server then answers for that buffer. A jump
-- target there (`note`), or anything in a file that was not open (`version` null), is shown by asking the
-- server in that buffer once it is open (the model's argument comes with the jump then).
-- Jump targets (the answer's `jumps`: where a call needs the argument of a parameter added without a
-- default): when no edit is offered, the first is marked at its place (`‸name`, or the model's argument as
-- ghost text when the server sent one); <Tab> moves the cursor there, <Tab> again writes the argument (a
-- jump without one is done once the cursor is there: the user writes). Edits spanning lines (an argument
-- removed where they stand one a line) are shown struck through across the lines and applied whole.
-- An answer that says `pending` (other documents still searched, or the model still writing the first jump
-- target's argument) is asked for again, a little later each time for up to 4 s, while the buffer, its
-- version and the cursor stay as they were: what it finds is shown as any answer is when nothing is shown
-- yet; what is shown stays as it is, except that a jump target shown alone gets its argument when it comes
-- (and <Tab> to such a target asks there again, so an argument written later is shown at it).
local util = require('flint.util')

local M = {}

local ns = vim.api.nvim_create_namespace('flint_next_edit')
local PAUSE_MS = 200 -- ask this long after the last change (the server has it ready by then)
-- while an answer is pending, ask again after 120 ms, each wait half as long again (at most 400 ms), until
-- 4 s after the first such answer: the server has searched the workspace's files on disk and the model has
-- written a jump target's argument by then (its budget: lsp_server/nextedit/fills.py FILL_BUDGET_S)
local AGAIN_MS, AGAIN_MAX_MS, AGAIN_FOR_MS = 120, 400, 4000
-- { bufnr, version, row, col, end_row, end_col, new_text, old_text, source, jumped, note (a jump target) }
local pending = nil
local away = nil -- an `elsewhere` edit offered by name: { uri, version, range, oldText, newText, source }
local timer = nil
local again = nil -- the one re-ask while an answer is pending
local asked = 0
local get_client = nil

local function buf_version(bufnr)
  return vim.lsp.util.buf_versions[bufnr]
end

local function stop_again()
  if again then
    again:stop()
    again = nil
  end
end

function M.clear()
  stop_again()
  if pending and vim.api.nvim_buf_is_valid(pending.bufnr) then
    vim.api.nvim_buf_clear_namespace(pending.bufnr, ns, 0, -1)
  end
  pending = nil
  away = nil
  asked = asked + 1 -- an answer on its way is not shown
end

--- What is shown (tests and statuslines), or nil; only `away` (the other file's URI and line) when the
--- edit offered is in another buffer.
function M.pending()
  if not pending then
    return away and { away = { uri = away.uri, row = away.range.start.line } } or nil
  end
  return { row = pending.row, col = pending.col, end_row = pending.end_row, end_col = pending.end_col,
           new_text = pending.new_text, old_text = pending.old_text, source = pending.source,
           jumped = pending.jumped, note = pending.note,
           marks = #vim.api.nvim_buf_get_extmarks(pending.bufnr, ns, 0, -1, {}) }
end

local function show(p)
  pending = p
  if p.note then -- a jump target: the argument as ghost text, or the parameter's name
    local virt = p.new_text ~= '' and { { p.new_text, 'FlintNextEditGhost' } } or { { '‸' .. p.note, 'FlintNextEditNote' } }
    vim.api.nvim_buf_set_extmark(p.bufnr, ns, p.row, p.col, {
      virt_text = virt, virt_text_pos = 'inline', sign_text = '»', sign_hl_group = 'FlintNextEditSign',
    })
    return
  end
  vim.api.nvim_buf_set_extmark(p.bufnr, ns, p.row, p.col, {
    end_row = p.end_row, end_col = p.end_col, hl_group = 'FlintNextEditOld',
    sign_text = '»', sign_hl_group = 'FlintNextEditSign',
  })
  local lines = vim.split(p.new_text, '\n', { plain = true })
  vim.api.nvim_buf_set_extmark(p.bufnr, ns, p.end_row, p.end_col, {
    virt_text = { { lines[1], 'FlintNextEditNew' } }, virt_text_pos = 'inline',
    virt_lines = #lines > 1 and vim.tbl_map(function(l)
      return { { l, 'FlintNextEditNew' } }
    end, vim.list_slice(lines, 2)) or nil,
  })
end

--- The byte span of an LSP range in a buffer, and the text it holds ("\n" between lines).
local function span(bufnr, range, enc)
  local row, end_row = range.start.line, range['end'].line
  local first = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local last = end_row == row and first or (vim.api.nvim_buf_get_lines(bufnr, end_row, end_row + 1, false)[1] or '')
  local col = util.byte_col(first, range.start.character, enc)
  local end_col = util.byte_col(last, range['end'].character, enc)
  local ok, held = pcall(vim.api.nvim_buf_get_text, bufnr, row, col, end_row, end_col, {})
  return row, col, end_row, end_col, ok and table.concat(held, '\n') or nil
end

local ask_again -- (below: it asks through M.ask's request)

local function on_result(bufnr, version, seq, client, result, cursor, last)
  if seq ~= asked or not result or result.stale or result.version ~= version then
    return
  end
  if not vim.api.nvim_buf_is_valid(bufnr) or buf_version(bufnr) ~= version then
    return
  end
  if bufnr ~= vim.api.nvim_get_current_buf() then
    return
  end
  if result.pending and result.completeMs == nil then
    ask_again(bufnr, version, cursor, last)
  end
  if last and (pending or away) then
    -- something is shown: it stays, except that a jump target shown alone gets the model's argument once it
    -- is written; a newer first edit in the same other file is what <Tab> opens
    local j = #(result.edits or {}) == 0 and (result.jumps or {})[1] or nil
    if pending and pending.note and pending.new_text == '' and j and j.newText and pending.bufnr == bufnr
        and pending.version == version then
      local row, col = span(bufnr, j.range, util.encoding(client))
      if row == pending.row and col == pending.col then
        local p = vim.tbl_extend('force', pending, { new_text = j.newText })
        vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
        show(p)
        return
      end
    end
    local x = (result.elsewhere or {})[1]
    if not pending and x and x.uri == away.uri then
      away = x
    end
    return
  end
  local e = (result.edits or {})[1]
  local j = (result.jumps or {})[1]
  if not e and j then
    local row, col = span(bufnr, j.range, util.encoding(client))
    show({ bufnr = bufnr, version = version, row = row, col = col, end_row = row, end_col = col,
           new_text = j.newText or '', old_text = '', source = j.source, jumped = false, note = j.note or '' })
    return
  end
  if not e then
    local x = (result.elsewhere or {})[1]
    if x then
      away = x
      local name = vim.fn.fnamemodify(vim.uri_to_fname(x.uri), ':t')
      vim.api.nvim_echo({ { ('Flint: next edit in %s (<Tab>)'):format(name), 'FlintNextEditSign' } }, false, {})
    end
    return
  end
  local row, col, end_row, end_col, held = span(bufnr, e.range, util.encoding(client))
  if held ~= e.oldText then
    return -- not the text it was made for: never guess
  end
  show({ bufnr = bufnr, version = version, row = row, col = col, end_row = end_row, end_col = end_col,
         new_text = e.newText, old_text = e.oldText, source = e.source, jumped = false })
end

--- Ask the server now for the current buffer's next edit (`last`: a pending answer's re-ask, { t0, delay }).
function M.ask(last)
  local client = get_client and get_client()
  local bufnr = vim.api.nvim_get_current_buf()
  if not client or not vim.lsp.buf_is_attached(bufnr, client.id) then
    return
  end
  asked = asked + 1
  local seq, version, cursor = asked, buf_version(bufnr), vim.api.nvim_win_get_cursor(0)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding or 'utf-16')
  params.textDocument.version = version
  util.request(client, 'flint/nextEdit', params, function(err, result)
    if not err then
      on_result(bufnr, version, seq, client, result, cursor, last)
    end
  end, bufnr)
end

--- Ask again a little later (AGAIN_*), once, while the buffer, its version, the cursor and the ask are the
--- pending answer's: an edit, a move, <Esc> or a newer ask ends it.
ask_again = function(bufnr, version, cursor, last)
  local now = vim.uv.now()
  local t0 = last and last.t0 or now
  local delay = last and math.min(math.floor(last.delay * 1.5), AGAIN_MAX_MS) or AGAIN_MS
  if now + delay - t0 > AGAIN_FOR_MS then
    return
  end
  stop_again()
  local seq = asked
  again = vim.defer_fn(function()
    again = nil
    local cur = vim.api.nvim_win_get_cursor(0)
    if seq ~= asked or vim.api.nvim_get_current_buf() ~= bufnr or not vim.api.nvim_buf_is_valid(bufnr)
        or buf_version(bufnr) ~= version or cur[1] ~= cursor[1] or cur[2] ~= cursor[2] then
      return
    end
    M.ask({ t0 = t0, delay = delay })
  end, delay)
end

--- A jump target in another file, or a file that was not open: open it at the place and ask there (once
--- Flint's client is attached to it: its didOpen carries the text the server matches).
local function open_and_ask(x, client)
  if not pcall(vim.cmd.edit, vim.fn.fnameescape(vim.uri_to_fname(x.uri))) then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local row, col = span(bufnr, x.range, util.encoding(client))
  pcall(vim.api.nvim_win_set_cursor, 0, { row + 1, col })
  local tries = 0
  local function go()
    if vim.api.nvim_get_current_buf() ~= bufnr then
      return
    end
    if vim.lsp.buf_is_attached(bufnr, client.id) then
      M.ask()
    elseif tries < 40 then
      tries = tries + 1
      vim.defer_fn(go, 50)
    end
  end
  go()
end

--- <Tab> with an edit in another buffer: open it at the edit, shown (<Tab> again applies it).
local function jump_away()
  local x, client = away, get_client and get_client()
  M.clear()
  if not x or not client then
    return
  end
  if x.note or x.version == nil or x.version == vim.NIL then
    open_and_ask(x, client)
    return
  end
  local bufnr = vim.uri_to_bufnr(x.uri)
  if not vim.api.nvim_buf_is_loaded(bufnr) or buf_version(bufnr) ~= x.version then
    return -- changed since (or not Flint's any more): never guess
  end
  local row, col, end_row, end_col, held = span(bufnr, x.range, util.encoding(client))
  if held ~= x.oldText then
    return
  end
  vim.api.nvim_set_current_buf(bufnr)
  vim.api.nvim_win_set_cursor(0, { row + 1, col })
  show({ bufnr = bufnr, version = x.version, row = row, col = col, end_row = end_row, end_col = end_col,
         new_text = x.newText, old_text = x.oldText, source = x.source, jumped = true })
end

--- A change in a buffer: drop what is shown; ask again once the user pauses.
function M.changed(delay)
  M.clear()
  if timer then
    timer:stop()
  end
  timer = vim.defer_fn(function()
    timer = nil
    M.ask()
  end, delay or PAUSE_MS)
end

--- <Tab>: jump to the pending edit; at it, apply it (then ask for the next at once).
function M.tab()
  local p = pending
  if not p then
    if away then
      jump_away()
    end
    return
  end
  if not vim.api.nvim_buf_is_valid(p.bufnr) or buf_version(p.bufnr) ~= p.version then
    M.clear()
    return
  end
  local cur = vim.api.nvim_win_get_cursor(0)
  local at = cur[1] - 1 == p.row and cur[2] >= p.col and (cur[2] <= p.end_col or p.end_row > p.row)
  if not p.jumped and not at then
    p.jumped = true
    vim.api.nvim_win_set_cursor(0, { p.row + 1, p.col })
    if p.note and p.new_text == '' then
      -- no argument yet: ask at the target (the model's, once written, is shown there; else the user writes)
      M.clear()
      M.ask()
    end
    return
  end
  M.clear()
  if p.note and p.new_text == '' then
    return
  end
  local lines = vim.split(p.new_text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(p.bufnr, p.row, p.col, p.end_row, p.end_col, lines)
  -- on the new text's last character in normal mode, after it in insert mode
  local insert = vim.api.nvim_get_mode().mode:sub(1, 1) == 'i'
  local last_row = p.row + #lines - 1
  local base = #lines > 1 and 0 or p.col
  local len = #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { last_row + 1, base + (insert and len or math.max(len - 1, 0)) })
  M.changed(0)
end

--- Wire it up (Neovim 0.10+): `client_fn` returns Flint's client (or nil); `keys`: { tab = '<Tab>',
--- dismiss = '<Esc>' }.
function M.setup(client_fn, keys, augroup)
  if not util.has('0.10') then
    return -- inline virtual text (the new text at its place) needs Neovim 0.10
  end
  get_client = client_fn
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditOld', { link = 'DiffDelete', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditNew', { link = 'DiffAdd', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditSign', { link = 'DiagnosticHint', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditGhost', { link = 'Comment', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditNote', { link = 'NonText', default = true })
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = augroup,
    callback = function()
      M.changed()
    end,
  })
  vim.api.nvim_create_autocmd('BufLeave', { group = augroup, callback = M.clear })
  if keys.tab and keys.tab ~= '' then
    vim.keymap.set('n', keys.tab, function()
      return (pending or away) and '<Cmd>lua require("flint.nextedit").tab()<CR>' or keys.tab
    end, { expr = true, silent = true, desc = 'Flint: jump to / apply the next edit' })
  end
  if keys.dismiss and keys.dismiss ~= '' then
    vim.keymap.set('n', keys.dismiss, function()
      return (pending or away) and '<Cmd>lua require("flint.nextedit").clear()<CR>' or keys.dismiss
    end, { expr = true, silent = true, desc = 'Flint: dismiss the next edit' })
  end
end

return M
