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
  FlintToggle = { function() flint().toggle() end, 'Enable/disable Flint suggestions' },
  FlintRestart = { function() flint().restart() end, 'Restart the Flint server' },
  FlintPick = { function() flint().pick_variant() end, 'Pick one of the variants at the cursor' },
  FlintNext = { function() flint().cycle(1) end, 'Next variant' },
  FlintPrev = { function() flint().cycle(-1) end, 'Previous variant' },
}
for name, def in pairs(cmds) do
  vim.api.nvim_create_user_command(name, def[1], { desc = def[2] })
end

if type(vim.g.flint) == 'table' then
  vim.schedule(function()
    flint().setup(vim.g.flint)
  end)
end
