-- flint/didMoveCursor (docs/protocol.md): tell the server where the cursor settled after a move that was
-- not an edit (a buffer entered, a jump, a click), so it starts that spot's work before the first
-- keystroke. Typing moves the cursor too; the server ignores a spot its edits already told it about.
local buffers = require('flint.buffers')
local state = require('flint.state')
local util = require('flint.util')

local M = {}

-- the cursor settled this long after a move: tell the server
local SETTLE_MS = 100
local timer = nil
local last = nil -- the spot last reported

local function report()
  local client = state.client()
  local bufnr = vim.api.nvim_get_current_buf()
  if not client or not state.active() or not buffers.wanted(bufnr) or not vim.lsp.buf_is_attached(bufnr, client.id) then
    return
  end
  local params = vim.lsp.util.make_position_params(0, util.encoding(client))
  -- the text the position is in; the client sends the edits it holds back before this notification
  params.textDocument.version = vim.lsp.util.buf_versions[bufnr]
  local p = params.position
  local key = table.concat({ params.textDocument.uri, tostring(params.textDocument.version), p.line, p.character }, ':')
  if key ~= last then
    last = key
    util.notify(client, 'flint/didMoveCursor', params)
  end
end

--- The cursor moved (or a buffer was entered): report where it is once it settles.
function M.moved()
  timer = timer or util.uv.new_timer()
  timer:stop()
  timer:start(SETTLE_MS, 0, vim.schedule_wrap(report))
end

--- A (re)attached server knows no spot yet.
function M.forget()
  last = nil
end

return M
