-- :checkhealth flint — interpreter, Flint version, model built, server starts.
local M = {}

local h = vim.health or {}
local start = h.start or h.report_start
local ok = h.ok or h.report_ok
local warn = h.warn or h.report_warn
local err = h.error or h.report_error
local info = h.info or h.report_info

-- Runs in the interpreter the plugin would use: version, importability, the model's directory.
local PROBE = [[
import json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import importlib.metadata as md
    for dist in ("flint-lsp", "flint"):
        try:
            out["version"], out["dist"] = md.version(dist), dist
            break
        except md.PackageNotFoundError:
            pass
    import lsp_server.cli  # noqa: F401
    out["importable"] = True
    from engine.engine import resolve_model_dir
    try:
        out["model_dir"] = str(resolve_model_dir(sys.argv[1] or None))
    except Exception as e:
        out["model_error"] = str(e)
except Exception as e:
    out["import_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
]]

local function run(cmd, env)
  if vim.system then
    local r = vim.system(cmd, { text = true, env = env }):wait(60000)
    return r.code, r.stdout or '', r.stderr or ''
  end
  local out = vim.fn.system(cmd)
  return vim.v.shell_error, out, ''
end

--- Start the server the plugin would start, send `initialize`, wait for the answer, shut it down.
local function server_starts(cmd, env)
  local got, stderr = '', {}
  local job = vim.fn.jobstart(cmd, {
    env = env,
    on_stdout = function(_, data)
      got = got .. table.concat(data, '\n')
    end,
    on_stderr = function(_, data)
      vim.list_extend(stderr, data)
    end,
  })
  if job <= 0 then
    return false, 'could not run ' .. table.concat(cmd, ' ')
  end
  local function send(msg)
    local body = vim.json.encode(msg)
    vim.fn.chansend(job, string.format('Content-Length: %d\r\n\r\n%s', #body, body))
  end
  send({ jsonrpc = '2.0', id = 1, method = 'initialize',
         params = { processId = vim.NIL, rootUri = vim.NIL, capabilities = vim.empty_dict() } })
  local t0 = vim.loop.hrtime()
  local done = vim.wait(30000, function()
    return got:find('"id":%s*1') ~= nil and got:find('"capabilities"') ~= nil
  end, 50)
  local ms = (vim.loop.hrtime() - t0) / 1e6
  if done then
    send({ jsonrpc = '2.0', id = 2, method = 'shutdown' })
    vim.wait(3000, function()
      return got:find('"id":%s*2') ~= nil
    end, 50)
    send({ jsonrpc = '2.0', method = 'exit' })
  end
  vim.wait(2000, function()
    return vim.fn.jobwait({ job }, 0)[1] ~= -1
  end, 50)
  pcall(vim.fn.jobstop, job)
  if not done then
    local tail = table.concat(vim.list_slice(stderr, math.max(1, #stderr - 5)), '\n')
    return false, 'no answer to initialize within 30 s' .. (tail ~= '' and (':\n' .. tail) or '')
  end
  local info = got:match('"serverInfo":%s*(%b{})')
  local okj, si = pcall(vim.json.decode, info or '')
  local who = (okj and type(si) == 'table') and string.format(' (%s %s)', si.name or '?', si.version or '') or ''
  return true, string.format('answered initialize in %d ms%s', ms, who)
end

function M.check()
  local flint = require('flint')
  start('Flint: interpreter')
  local cmd = flint.server_command()
  local python = cmd[1]
  local uses_python = cmd[2] == '-m' and cmd[3] == 'lsp_server.cli'
  if vim.fn.executable(python) ~= 1 then
    err('not executable: ' .. python, { 'set `python` in require("flint").setup{}', 'or activate the virtualenv with Flint' })
    return
  end
  ok('server command: ' .. table.concat(cmd, ' '))
  local env = flint.config.cmd_env
  if uses_python then
    local model = (flint.config.settings or {}).model or ''
    local code, out, stderr = run({ python, '-c', PROBE, model }, env)
    local okj, probe = pcall(vim.json.decode, vim.trim(out))
    if code ~= 0 or not okj or type(probe) ~= 'table' then
      err('could not run the interpreter: ' .. vim.trim(stderr ~= '' and stderr or out))
      return
    end
    ok(string.format('Python %s (%s)', probe.python, probe.executable))
    start('Flint: version')
    if probe.import_error then
      err('Flint is not importable in this interpreter: ' .. probe.import_error,
        { 'pip install -e /path/to/flint   (the distribution is flint-lsp; `pip install flint` is another tool)' })
      return
    end
    if probe.dist == 'flint-lsp' then
      ok('flint-lsp ' .. probe.version)
    elseif probe.dist then
      warn(probe.dist .. ' ' .. probe.version .. ' (an old install under the name `flint`)', { 'pip install -e /path/to/flint' })
    else
      warn('lsp_server imports, but no installed distribution (running from a source tree?)')
    end
    start('Flint: model')
    if probe.model_dir then
      ok('built: ' .. probe.model_dir)
    else
      err(probe.model_error or 'model not found', { 'flint model build' })
    end
  else
    info('custom `cmd`: interpreter, version and model checks skipped')
  end
  start('Flint: server')
  local started, msg = server_starts(cmd, env)
  if started then
    ok(msg)
  else
    err(msg)
  end
  local c = (vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = 'flint' })[1]
  if c then
    ok(string.format('running in this session (client %d, mode %s, %s)', c.id, tostring(flint.mode), flint.statusline()))
  else
    info('not attached in this session (it starts on the first file buffer after setup{})')
  end
end

return M
