-- Flint commands. The server starts once you call require('flint').setup({...}) (see docs/editors.md),
-- or set vim.g.flint = { ... } (options table) before this file loads to set up automatically.
if vim.g.loaded_flint then
  return
end
vim.g.loaded_flint = true

local function flint()
  return require('flint')
end

local cmds = {
  FlintStatus = { function() print(flint().statusline()) end, 'Show Flint status and last latency' },
  FlintStats = { function() flint().show_stats() end, 'Show Flint stats' },
  FlintWhy = { function() flint().why() end, 'Show which files and chunks fed the last Flint suggestion' },
  FlintToggle = { function() flint().toggle() end, 'Enable/disable Flint suggestions' },
  FlintRestart = { function() flint().restart() end, 'Restart the Flint server' },
  FlintPick = { function() flint().pick_variant() end, 'Pick one of the variants at the cursor' },
  FlintNext = { function() flint().cycle(1) end, 'Next variant' },
  FlintPrev = { function() flint().cycle(-1) end, 'Previous variant' },
  FlintEnable = { function() flint().toggle(true) end, 'Enable Flint suggestions' },
  FlintDisable = { function() flint().toggle(false) end, 'Disable Flint suggestions' },
  FlintSnooze = {
    function(o) flint().snooze(o.args ~= '' and o.args or nil) end,
    'Pause Flint suggestions for N minutes (asks when N is left out)', '?',
  },
  FlintResume = { function() flint().resume() end, 'End a snooze' },
  FlintToggleFiletype = {
    function(o) flint().toggle_filetype(o.args) end, 'Turn Flint off/on for a filetype (default: this buffer\'s)', '?',
  },
  FlintMenu = { function() flint().menu() end, 'Flint menu: toggle, snooze, filetype, pick, stats, log' },
  FlintLog = { function() flint().open_log() end, 'Open the LSP log (server messages at vim.lsp log level)' },
}
for name, def in pairs(cmds) do
  vim.api.nvim_create_user_command(name, def[1], { desc = def[2], nargs = def[3] or 0 })
end

if type(vim.g.flint) == 'table' then
  vim.schedule(function()
    flint().setup(vim.g.flint)
  end)
end
