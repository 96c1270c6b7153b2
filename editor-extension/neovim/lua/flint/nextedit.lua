-- Flint next edits in Neovim (issue 37, docs/protocol.md `flint/nextEdit`): after the user stops editing,
-- ask the server for the edit that follows elsewhere (the other references of a renamed name, the other
-- occurrences of a replaced literal) and show the first at its place with extmarks: the old text struck
-- through, the new text inline after it, a sign in the gutter. <Tab> (normal mode; insert mode when no
-- ghost text is shown) jumps there, <Tab> again applies it and asks for the next at once; <Esc> in normal
-- mode dismisses. Any edit drops what is shown; an edit is applied only to the buffer version it was made
-- for, and only where the buffer still holds the text it replaces.
local M = {}

local ns = vim.api.nvim_create_namespace('flint_next_edit')
local PAUSE_MS = 200 -- ask this long after the last change (the server has it ready by then)
local pending = nil -- { bufnr, version, row, col, end_col, new_text, old_text, source, jumped }
local timer = nil
local asked = 0
local get_client = nil

local function buf_version(bufnr)
  return vim.lsp.util.buf_versions[bufnr]
end

--- Byte column of an LSP `character` on `line` (a string) in encoding `enc`.
local function byte_col(line, character, enc)
  if enc == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if vim.fn.has('nvim-0.11') == 1 then
    ok, col = pcall(vim.str_byteindex, line, enc, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, enc == 'utf-16')
  end
  return ok and col or #line
end

function M.clear()
  if pending and vim.api.nvim_buf_is_valid(pending.bufnr) then
    vim.api.nvim_buf_clear_namespace(pending.bufnr, ns, 0, -1)
  end
  pending = nil
  asked = asked + 1 -- an answer on its way is not shown
end

--- What is shown (tests and statuslines), or nil.
function M.pending()
  if not pending then
    return nil
  end
  return { row = pending.row, col = pending.col, end_col = pending.end_col, new_text = pending.new_text,
           old_text = pending.old_text, source = pending.source, jumped = pending.jumped,
           marks = #vim.api.nvim_buf_get_extmarks(pending.bufnr, ns, 0, -1, {}) }
end

local function show(p)
  pending = p
  vim.api.nvim_buf_set_extmark(p.bufnr, ns, p.row, p.col, {
    end_row = p.row, end_col = p.end_col, hl_group = 'FlintNextEditOld',
    sign_text = '»', sign_hl_group = 'FlintNextEditSign',
  })
  vim.api.nvim_buf_set_extmark(p.bufnr, ns, p.row, p.end_col, {
    virt_text = { { p.new_text, 'FlintNextEditNew' } }, virt_text_pos = 'inline',
  })
end

local function on_result(bufnr, version, seq, client, result)
  if seq ~= asked or not result or result.stale or result.version ~= version then
    return
  end
  if not vim.api.nvim_buf_is_valid(bufnr) or buf_version(bufnr) ~= version then
    return
  end
  if bufnr ~= vim.api.nvim_get_current_buf() then
    return
  end
  local e = (result.edits or {})[1]
  if not e or e.range.start.line ~= e.range['end'].line then
    return -- one-line edits only (what rename and repeat make)
  end
  local row = e.range.start.line
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local enc = client.offset_encoding or 'utf-16'
  local col = byte_col(line, e.range.start.character, enc)
  local end_col = byte_col(line, e.range['end'].character, enc)
  if line:sub(col + 1, end_col) ~= e.oldText then
    return -- not the text it was made for: never guess
  end
  show({ bufnr = bufnr, version = version, row = row, col = col, end_col = end_col, new_text = e.newText,
         old_text = e.oldText, source = e.source, jumped = false })
end

--- Ask the server now for the current buffer's next edit.
function M.ask()
  local client = get_client and get_client()
  local bufnr = vim.api.nvim_get_current_buf()
  if not client or not vim.lsp.buf_is_attached(bufnr, client.id) then
    return
  end
  asked = asked + 1
  local seq, version = asked, buf_version(bufnr)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding or 'utf-16')
  params.textDocument.version = version
  local handler = function(err, result)
    if not err then
      on_result(bufnr, version, seq, client, result)
    end
  end
  if vim.fn.has('nvim-0.11') == 1 then
    client:request('flint/nextEdit', params, handler, bufnr)
  else
    client.request('flint/nextEdit', params, handler, bufnr)
  end
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
    return
  end
  if not vim.api.nvim_buf_is_valid(p.bufnr) or buf_version(p.bufnr) ~= p.version then
    M.clear()
    return
  end
  local cur = vim.api.nvim_win_get_cursor(0)
  local at = cur[1] - 1 == p.row and cur[2] >= p.col and cur[2] <= p.end_col
  if not p.jumped and not at then
    p.jumped = true
    vim.api.nvim_win_set_cursor(0, { p.row + 1, p.col })
    return
  end
  M.clear()
  vim.api.nvim_buf_set_text(p.bufnr, p.row, p.col, p.row, p.end_col, { p.new_text })
  -- on the new text's last character in normal mode, after it in insert mode
  local insert = vim.api.nvim_get_mode().mode:sub(1, 1) == 'i'
  vim.api.nvim_win_set_cursor(0, { p.row + 1, p.col + (insert and #p.new_text or math.max(#p.new_text - 1, 0)) })
  M.changed(0)
end

--- Wire it up (Neovim 0.10+): `client_fn` returns Flint's client (or nil); `keys`: { tab = '<Tab>',
--- dismiss = '<Esc>' }.
function M.setup(client_fn, keys, augroup)
  if vim.fn.has('nvim-0.10') == 0 then
    return -- inline virtual text (the new text at its place) needs Neovim 0.10
  end
  get_client = client_fn
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditOld', { link = 'DiffDelete', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditNew', { link = 'DiffAdd', default = true })
  pcall(vim.api.nvim_set_hl, 0, 'FlintNextEditSign', { link = 'DiagnosticHint', default = true })
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = augroup,
    callback = function()
      M.changed()
    end,
  })
  vim.api.nvim_create_autocmd('BufLeave', { group = augroup, callback = M.clear })
  if keys.tab and keys.tab ~= '' then
    vim.keymap.set('n', keys.tab, function()
      return pending and '<Cmd>lua require("flint.nextedit").tab()<CR>' or keys.tab
    end, { expr = true, silent = true, desc = 'Flint: jump to / apply the next edit' })
  end
  if keys.dismiss and keys.dismiss ~= '' then
    vim.keymap.set('n', keys.dismiss, function()
      return pending and '<Cmd>lua require("flint.nextedit").clear()<CR>' or keys.dismiss
    end, { expr = true, silent = true, desc = 'Flint: dismiss the next edit' })
  end
end

return M
