-- Flint for Neovim: runs `flint serve` (LSP over stdio) and shows its inline completions as ghost text.
--
--   require('flint').setup({ ... })        -- see M.defaults below and docs/editors.md
--
-- Modes (opts.mode = 'auto' picks the first that applies):
--   'builtin'    Neovim 0.12+: vim.lsp.inline_completion draws and accepts the suggestions.
--   'ghost'      Neovim 0.11: this plugin requests textDocument/inlineCompletion and draws the
--                suggestion with extmarks (inline virtual text + virtual lines).
--   'completion' Neovim 0.7-0.10: Flint's textDocument/completion fallback item in the completion
--                menu (omnifunc <C-x><C-o>, or nvim-cmp / any LSP completion source).
local M = {}

M.defaults = {
  mode = 'auto',
  -- Interpreter that has Flint installed (`<python> -m lsp_server.cli serve`). nil: $VIRTUAL_ENV, then a
  -- .venv/venv in the project root, then `python3`.
  python = nil,
  cmd = nil, -- full command override, e.g. { 'flint', 'serve' }
  cmd_env = nil, -- extra environment for the server, e.g. { FLINT_HOME = '/path' }
  -- Server settings (docs/editors.md, "Settings"), sent as initializationOptions and as the `flint`
  -- settings section; unset ones take the server's defaults. E.g. { maxVariants = 5, routing = 'hybrid' }.
  settings = {},
  filetypes = nil, -- nil: every normal file buffer; or a list such as { 'python', 'lua' }
  disabled_filetypes = {}, -- filetypes Flint stays off in (their text never reaches the server)
  -- Files Flint stays off in: globs matched against the full path and the path relative to the root.
  exclude = { '**/.env', '**/.env.*', '**/*.pem', '**/*.key' },
  -- 'off' | 'messages' | 'verbose': the trace level sent in `initialize` (the client's own record of the
  -- traffic: vim.lsp.set_log_level('debug'), then :FlintLog)
  trace = 'off',
  auto_trigger = true, -- ask on every edit in insert mode ('ghost' mode)
  debounce_ms = 0, -- client-side wait before asking ('ghost' mode); Flint speculates, 0 is right
  keymaps = {
    accept = '<Tab>', -- falls back to a normal <Tab> when no suggestion is shown
    accept_word = '<M-Right>',
    accept_line = '<M-Down>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    trigger = '<M-\\>', -- ask now (also what 'completion' mode maps to omnifunc)
    -- next edits (lua/flint/nextedit.lua): normal mode, and insert mode's accept key when no ghost text
    next_edit = '<Tab>', -- jump to the edit shown, then apply it
    next_edit_dismiss = '<Esc>', -- normal mode, only while one is shown
  },
  hl_group = 'FlintGhost', -- linked to Comment unless defined
}

-- The parts, one concern each (this file keeps the defaults and the public functions, and wires them):
--   state.lua     what they share: options, mode, status, counters, switches, the client
--   util.lua      LSP columns <-> byte columns; client calls across Neovim versions
--   buffers.lua   which buffers Flint works in
--   client.lua    the mode, starting and attaching the server, its settings and notifications
--   inline.lua    asking for suggestions (textDocument/inlineCompletion), cycling variants
--   ghost.lua     the suggestion on screen: drawing it, accepting it whole or in part
--   picker.lua    Pick Variant (flint/variants)
--   status.lua    flint/status, the statusline, :FlintStats, :FlintWhy
--   cursor.lua    flint/didMoveCursor
--   switches.lua  on/off, snooze, filetypes, the log, :FlintMenu
--   nextedit.lua  next edits (flint/nextEdit); health.lua: :checkhealth flint
local buffers = require('flint.buffers')
local client = require('flint.client')
local cursor = require('flint.cursor')
local ghost = require('flint.ghost')
local inline = require('flint.inline')
local picker = require('flint.picker')
local state = require('flint.state')
local status = require('flint.status')
local switches = require('flint.switches')

state.config = vim.deepcopy(M.defaults)

-- require('flint').config, .mode, .status, .stats and .last_drop are the shared state's
local SHARED = { config = true, mode = true, status = true, stats = true, last_drop = true }
setmetatable(M, {
  __index = function(_, k)
    if SHARED[k] then
      return state[k]
    end
  end,
  __newindex = function(t, k, v)
    if SHARED[k] then
      state[k] = v
    else
      rawset(t, k, v)
    end
  end,
})

M.pick_mode = client.pick_mode
M.server_command = client.server_command
M.server_settings = client.server_settings
M.attach = client.attach
M.stop = client.stop
M.restart = client.restart
M.off_reason = buffers.off_reason

M.ghost_text = ghost.ghost_text
M.visible = ghost.visible
M.trigger = inline.trigger
M.accept = ghost.accept
M.accept_word = ghost.accept_word
M.accept_line = ghost.accept_line
M.cycle = inline.cycle
M.dismiss = ghost.dismiss
M.current = ghost.current

M.variant_timing = picker.variant_timing
M.variant_label = picker.variant_label
M.pick_variant = picker.pick_variant

M.statusline = status.statusline
M.why = status.why
M.show_stats = status.show_stats

M.toggle = switches.toggle
M.snooze = switches.snooze
M.resume = switches.resume
M.snoozed_until = switches.snoozed_until
M.open_log = switches.open_log
M.toggle_filetype = switches.toggle_filetype
M.menu = switches.menu

local function map(lhs, rhs, desc, expr)
  if lhs and lhs ~= '' then
    vim.keymap.set('i', lhs, rhs, { desc = desc, expr = expr, silent = true })
  end
end

--- Insert-mode keys ('ghost' and 'builtin' modes; 'completion' mode maps `trigger` to omnifunc).
local function keymaps(k)
  if state.mode ~= 'ghost' and state.mode ~= 'builtin' then
    map(k.trigger, '<C-x><C-o>', 'Flint: completion menu')
    return
  end
  map(k.accept, function()
    if state.mode == 'builtin' or ghost.visible() then
      return '<Cmd>lua require("flint").accept()<CR>'
    end
    if k.accept == k.next_edit and require('flint.nextedit').pending() then
      return '<Cmd>lua require("flint.nextedit").tab()<CR>' -- the ghost text, when shown, wins
    end
    return k.accept
  end, 'Flint: accept suggestion', true)
  map(k.accept_word, function() ghost.accept_word() end, 'Flint: accept next word')
  map(k.accept_line, function() ghost.accept_line() end, 'Flint: accept next line')
  map(k.next, function() inline.cycle(1) end, 'Flint: next variant')
  map(k.prev, function() inline.cycle(-1) end, 'Flint: previous variant')
  map(k.dismiss, function() ghost.dismiss() end, 'Flint: dismiss')
  map(k.trigger, function() inline.trigger(1) end, 'Flint: suggest now')
end

local function autocmds(group)
  vim.api.nvim_create_autocmd({ 'BufEnter', 'FileType' }, {
    group = group,
    callback = function(ev)
      client.attach(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorMoved', 'CursorMovedI' }, { group = group, callback = cursor.moved })
  if state.mode == 'ghost' then
    inline.autocmds(group)
  end
end

function M.setup(opts)
  state.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  state.mode = client.pick_mode()
  state.config.settings = state.config.settings or {}
  state.enabled = state.config.settings.enable ~= false
  pcall(vim.api.nvim_set_hl, 0, 'FlintGhost', { link = 'Comment', default = true })

  local group = vim.api.nvim_create_augroup('flint', { clear = true })
  autocmds(group)
  local k = state.config.keymaps or {}
  require('flint.nextedit').setup(function()
    return state.active() and state.client() or nil
  end, { tab = k.next_edit, dismiss = k.next_edit_dismiss }, group)
  keymaps(k)
  client.attach_all()
  return M
end

return M
