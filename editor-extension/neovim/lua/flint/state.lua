-- What the parts of the plugin share, in one place: the options, the mode, the server's status, the
-- counters, the switches (enabled, snoozed) and the client. require('flint') shows `config`, `mode`,
-- `status`, `stats` and `last_drop` from here; every other module reads and writes them here.
local util = require('flint.util')

local M = {
  config = {}, -- setup{} options over require('flint').defaults
  mode = nil, -- 'builtin' | 'ghost' | 'completion' (init.pick_mode)
  status = { state = 'stopped', model = '', lastLatencyMs = nil, source = nil, message = '' },
  stats = { requests = 0, suggestions = 0, accepted = 0, partial = 0, latencies = {} },
  last_drop = nil, -- why the last inline answer was not shown (tests, debugging)
  enabled = true,
  snoozed_until = 0, -- os.time() when a snooze ends
  client_id = nil,
}

function M.snoozed()
  return M.snoozed_until > os.time()
end

--- Whether suggestions are wanted now (enabled and not snoozed).
function M.active()
  return M.enabled and not M.snoozed()
end

--- Flint's running client, or nil.
function M.client()
  if not M.client_id then
    return nil
  end
  local c = vim.lsp.get_client_by_id(M.client_id)
  if not c or util.is_stopped(c) then
    return nil
  end
  return c
end

--- Tell statuslines (User FlintStatus autocommands) that something they show changed.
function M.changed()
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'FlintStatus', modeline = false })
end

return M
