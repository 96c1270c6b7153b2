-- What a user switches: on/off, snooze and resume, a filetype off or on, the log, and :FlintMenu, the
-- list of them all. Each switch tells the server (client.push_settings: `enable` false stops its
-- speculation too).
local client = require('flint.client')
local ghost = require('flint.ghost')
local picker = require('flint.picker')
local state = require('flint.state')
local status = require('flint.status')
local util = require('flint.util')

local M = {}

local snooze_timer = nil

--- Turn suggestions on (true), off (false) or flip them (nil).
function M.toggle(on)
  if on == nil then
    state.enabled = not state.enabled
  else
    state.enabled = on and true or false
  end
  state.config.settings.enable = state.enabled
  client.push_settings()
  vim.notify('Flint ' .. (state.enabled and 'enabled' or 'disabled'))
  return state.enabled
end

local function ask_minutes()
  vim.ui.select({ 5, 15, 30, 60 }, {
    prompt = 'Snooze Flint for',
    format_item = function(m)
      return m .. ' minutes'
    end,
  }, function(m)
    if m then
      M.snooze(m)
    end
  end)
end

--- Pause suggestions for `minutes` (asks with vim.ui.select when nil). The server stops speculating too.
function M.snooze(minutes)
  if minutes == nil then
    return ask_minutes()
  end
  minutes = tonumber(minutes)
  if not minutes or minutes < 1 or minutes > 1440 or minutes ~= math.floor(minutes) then
    vim.notify('Flint: snooze takes a whole number of minutes from 1 to 1440', vim.log.levels.ERROR)
    return
  end
  state.snoozed_until = os.time() + minutes * 60
  if snooze_timer then
    snooze_timer:stop()
  end
  snooze_timer = snooze_timer or util.uv.new_timer()
  snooze_timer:start(minutes * 60 * 1000, 0, vim.schedule_wrap(function()
    if not state.snoozed() then
      client.push_settings()
      vim.notify('Flint: snooze over')
    end
  end))
  client.push_settings()
  vim.notify(string.format('Flint snoozed for %d min', minutes))
end

function M.resume()
  state.snoozed_until = 0
  if snooze_timer then
    snooze_timer:stop()
  end
  client.push_settings()
end

function M.snoozed_until()
  return state.snoozed() and state.snoozed_until or nil
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
  local list = state.config.disabled_filetypes or {}
  local off = vim.tbl_contains(list, ft)
  if off then
    state.config.disabled_filetypes = vim.tbl_filter(function(x)
      return x ~= ft
    end, list)
  else
    table.insert(list, ft)
    state.config.disabled_filetypes = list
  end
  local c = state.client()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].filetype == ft then
      if off then
        client.attach(b)
      elseif c then
        ghost.dismiss()
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
    { state.enabled and 'Disable completions' or 'Enable completions', function() M.toggle() end },
    state.snoozed() and { 'Resume now (snoozed)', M.resume } or { 'Snooze…', function() M.snooze() end },
  }
  if ft ~= '' then
    local off = vim.tbl_contains(state.config.disabled_filetypes or {}, ft)
    items[#items + 1] = { (off and 'Enable' or 'Disable') .. ' for ' .. ft, function() M.toggle_filetype(ft) end }
  end
  items[#items + 1] = { 'Pick variant…', picker.pick_variant }
  items[#items + 1] = { 'Show stats', status.show_stats }
  items[#items + 1] = { 'Why this suggestion', status.why }
  items[#items + 1] = { 'Open log', M.open_log }
  items[#items + 1] = { 'Restart server', client.restart }
  vim.ui.select(items, {
    prompt = 'Flint (' .. status.statusline() .. ')',
    format_item = function(it)
      return it[1]
    end,
  }, function(it)
    if it then
      it[2]()
    end
  end)
end

return M
