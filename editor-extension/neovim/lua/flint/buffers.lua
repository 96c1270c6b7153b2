-- Which buffers Flint works in: normal file buffers, not of a disabled filetype, not an excluded file, of
-- the `filetypes` listed (when listed). The text of any other buffer never reaches the server.
local state = require('flint.state')

local M = {}

local function glob_match(pattern, path)
  local ok, re = pcall(vim.regex, vim.fn.glob2regpat(pattern))
  return ok and re:match_str(path) ~= nil
end

--- Why Flint is off in `bufnr` ('<filetype>' or 'excluded file'), or nil when it works there.
function M.off_reason(bufnr)
  local ft = vim.bo[bufnr].filetype
  if ft ~= '' and vim.tbl_contains(state.config.disabled_filetypes or {}, ft) then
    return ft
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name ~= '' then
    local full = vim.fn.fnamemodify(name, ':p')
    local rel = vim.fn.fnamemodify(name, ':.')
    for _, pat in ipairs(state.config.exclude or {}) do
      if glob_match(pat, full) or glob_match(pat, rel) or glob_match(pat, vim.fn.fnamemodify(name, ':t')) then
        return 'excluded file'
      end
    end
  end
  return nil
end

--- Whether Flint attaches to `bufnr`.
function M.wanted(bufnr)
  if vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
    return false
  end
  if M.off_reason(bufnr) then
    return false
  end
  local fts = state.config.filetypes
  if not fts then
    return true
  end
  return vim.tbl_contains(fts, vim.bo[bufnr].filetype)
end

return M
