-- The LSP client: which mode this Neovim gets, the command that starts `flint serve`, starting and
-- attaching it buffer by buffer, the settings it is sent (initializationOptions and
-- workspace/didChangeConfiguration) and the server's notifications (flint/status, flint/refresh).
local buffers = require('flint.buffers')
local cursor = require('flint.cursor')
local ghost = require('flint.ghost')
local inline = require('flint.inline')
local picker = require('flint.picker')
local state = require('flint.state')
local status = require('flint.status')
local util = require('flint.util')

local M = {}

--- 'builtin' (0.12+), 'ghost' (0.11) or 'completion' (0.7-0.10), unless setup{} says which.
function M.pick_mode()
  local m = state.config.mode
  if m and m ~= 'auto' then
    return m
  end
  if vim.lsp.inline_completion and vim.lsp.inline_completion.enable then
    return 'builtin'
  end
  if util.has('0.11') then
    return 'ghost'
  end
  return 'completion'
end

local function find_python(root)
  if state.config.python then
    return vim.fn.expand(state.config.python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and vim.fn.executable(venv .. '/bin/python') == 1 then
    return venv .. '/bin/python'
  end
  for _, d in ipairs({ '.venv', 'venv' }) do
    local p = (root or vim.fn.getcwd()) .. '/' .. d .. '/bin/python'
    if vim.fn.executable(p) == 1 then
      return p
    end
  end
  return 'python3'
end

local function find_root(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.fs and vim.fs.find and name ~= '' then
    local found = vim.fs.find({ '.git', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod' }, {
      path = vim.fs.dirname(name),
      upward = true,
    })[1]
    if found then
      return vim.fs.dirname(found)
    end
  end
  return vim.fn.getcwd()
end

local function server_cmd(root)
  if state.config.cmd then
    return state.config.cmd
  end
  return { find_python(root), '-m', 'lsp_server.cli', 'serve' }
end

--- The command that starts the server for the current buffer (used by :checkhealth flint).
function M.server_command()
  return server_cmd(find_root(vim.api.nvim_get_current_buf()))
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  if state.mode ~= 'completion' then
    caps.textDocument = caps.textDocument or {}
    caps.textDocument.inlineCompletion = { dynamicRegistration = false }
  end
  return caps
end

--- The settings the server gets: the user's, with `enable` off while disabled or snoozed.
function M.server_settings()
  local s = vim.deepcopy(state.config.settings or {})
  if not state.active() then
    s.enable = false
  elseif s.enable == false then
    s.enable = nil -- re-enabled: back to the server's default (on)
  end
  return s
end

--- Send the server the settings as they are now (a switch changed), and follow them here.
function M.push_settings()
  local c = state.client()
  if c then
    -- what workspace/configuration answers (client.settings in 0.11+, client.config.settings before)
    c.config.settings = { flint = M.server_settings() }
    if type(c.settings) == 'table' then
      c.settings = { flint = M.server_settings() }
    end
    util.notify(c, 'workspace/didChangeConfiguration', { settings = { flint = M.server_settings() } })
  end
  if not state.active() then
    ghost.dismiss()
  end
  if state.mode == 'builtin' then
    pcall(vim.lsp.inline_completion.enable, state.active())
  end
  state.changed()
end

-- flint/refresh: an open Pick Variant asks again (the other variants are ready); else the suggestion on
-- screen is whole now, ask again where the cursor still is
local function on_refresh(_, result)
  if type(result) ~= 'table' or type(result.textDocument) ~= 'table' then
    return
  end
  vim.schedule(function()
    if not picker.refreshed(result.textDocument.uri) then
      inline.refreshed(result.textDocument.uri)
    end
  end)
end

local function on_attach(client, bufnr)
  state.client_id = client.id
  cursor.forget()
  if bufnr == vim.api.nvim_get_current_buf() then
    cursor.moved() -- the buffer is open on the server now: where the user is in it
  end
  if state.mode == 'builtin' then
    pcall(vim.lsp.inline_completion.enable, true, { bufnr = bufnr })
  elseif state.mode == 'completion' then
    vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  end
end

local function on_exit()
  state.status.state = 'stopped'
  state.client_id = nil
  vim.schedule(ghost.clear)
end

--- Start (or reuse) the server for `bufnr` and attach it.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not buffers.wanted(bufnr) then
    return nil
  end
  local root = find_root(bufnr)
  local config = {
    name = 'flint',
    cmd = server_cmd(root),
    cmd_env = state.config.cmd_env,
    root_dir = root,
    init_options = M.server_settings(),
    settings = { flint = M.server_settings() },
    trace = state.config.trace,
    capabilities = capabilities(),
    handlers = { ['flint/status'] = status.on_status, ['flint/refresh'] = on_refresh },
    on_attach = on_attach,
    on_exit = on_exit,
  }
  if vim.lsp.start then
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  -- Neovim 0.7: one client, attached buffer by buffer.
  local c = state.client()
  local id = c and c.id or vim.lsp.start_client(config)
  if id then
    state.client_id = id
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

--- Attach every loaded buffer Flint works in.
function M.attach_all()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) then
      M.attach(b)
    end
  end
end

function M.stop()
  ghost.dismiss()
  local c = state.client()
  if c then
    util.stop(c)
  end
  state.client_id = nil
end

function M.restart()
  M.stop()
  vim.defer_fn(M.attach_all, 300)
end

return M
