-- What Flint tells the user about itself: the server's flint/status, the statusline, :FlintStats and
-- :FlintWhy (the repository context in the last suggestion's prompt).
local buffers = require('flint.buffers')
local state = require('flint.state')

local M = {}

--- flint/status from the server: its state, model, last latency and source, repository context.
function M.on_status(_, result)
  if type(result) ~= 'table' then
    return
  end
  local st = state.status
  st.state = result.state or st.state
  st.model = result.model or st.model
  st.message = result.message or ''
  if type(result.lastLatencyMs) == 'number' then
    st.lastLatencyMs = result.lastLatencyMs
    st.source = result.source
  end
  if type(result.context) == 'table' then
    st.context = result.context
  end
  state.changed()
end

--- For a statusline: e.g. "⚡ Flint 38 ms", "Flint loading", "Flint off".
function M.statusline()
  if not state.enabled then
    return 'Flint off'
  end
  if state.snoozed() then
    return string.format('Flint snoozed %d min', math.ceil((state.snoozed_until - os.time()) / 60))
  end
  local b = vim.api.nvim_get_current_buf()
  if vim.api.nvim_buf_is_valid(b) and buffers.off_reason(b) then
    return 'Flint off (' .. buffers.off_reason(b) .. ')'
  end
  local st = state.status.state
  if st == 'ready' or st == 'busy' then
    local ms = state.status.lastLatencyMs
    return (st == 'busy' and '… ' or '⚡ ') .. 'Flint' .. (ms and string.format(' %d ms', math.floor(ms + 0.5)) or '')
  end
  return 'Flint ' .. st
end

--- "Why this suggestion": the repository context chunks (other files) in the last suggestion's prompt.
function M.why()
  local ctx = state.status.context or {}
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
  local stats, status = state.stats, state.status
  local sorted = vim.deepcopy(stats.latencies)
  table.sort(sorted)
  local function pct(p)
    if #sorted == 0 then
      return 0
    end
    return sorted[math.max(1, math.ceil(p / 100 * #sorted))]
  end
  local msg = string.format(
    'Flint %s (%s, mode %s): %d requests, %d suggestions, %d accepted, %d partial; round trip p50 %.0f ms, p95 %.0f ms; last %s ms (%s)',
    status.state, status.model ~= '' and status.model or state.config.settings.model, tostring(state.mode),
    stats.requests, stats.suggestions, stats.accepted, stats.partial, pct(50), pct(95),
    status.lastLatencyMs and string.format('%.0f', status.lastLatencyMs) or '-', status.source or '-'
  )
  vim.notify(msg, vim.log.levels.INFO)
  return msg
end

return M
