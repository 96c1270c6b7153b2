-- Small helpers every part of the plugin uses: LSP columns (in the negotiated position encoding) to byte
-- columns and back, and the client calls whose form changed in Neovim 0.11 (methods called with `:`).
-- Requires nothing else of Flint.
local M = {}

M.uv = vim.uv or vim.loop

--- Whether this Neovim is at least version `v` (e.g. '0.11').
function M.has(v)
  return vim.fn.has('nvim-' .. v) == 1
end

--- The client's position encoding ('utf-16' when it has none yet).
function M.encoding(client)
  return (client and client.offset_encoding) or 'utf-16'
end

--- Length of `s` (a byte string) in the position encoding's units.
function M.enc_len(s, enc)
  if enc == 'utf-8' then
    return #s
  end
  if M.has('0.11') then
    return vim.str_utfindex(s, enc)
  end
  local u32, u16 = vim.str_utfindex(s)
  return enc == 'utf-32' and u32 or u16
end

--- Byte column of an LSP `character` (in encoding `enc`) on `line` (a string); a character past the end
--- of the line gives the line's end.
function M.byte_col(line, character, enc)
  if enc == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if M.has('0.11') then
    ok, col = pcall(vim.str_byteindex, line, enc, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, enc == 'utf-16')
  end
  return ok and col or #line
end

--- Byte column of an LSP `character` on line `row` (0-based) of `bufnr`.
function M.buf_byte_col(bufnr, row, character, enc)
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  return M.byte_col(line, character, enc)
end

---------------------------------------------------------------------- client calls, 0.7 to 0.12

function M.request(client, method, params, handler, bufnr)
  if M.has('0.11') then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(client, method, params)
  if M.has('0.11') then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.cancel(client, id)
  if M.has('0.11') then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

function M.is_stopped(client)
  if M.has('0.11') then
    return client:is_stopped()
  end
  return client.is_stopped()
end

function M.stop(client)
  if M.has('0.11') then
    return client:stop()
  end
  return client.stop()
end

return M
