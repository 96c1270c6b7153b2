-- Neovim config for tests/editors/test_neovim.py: the Flint plugin from this repo, nothing else.
-- FLINT_TEST_PLUGIN: editor-extension/neovim; FLINT_TEST_CMD: the server command as a JSON array.
vim.opt.runtimepath:prepend(vim.env.FLINT_TEST_PLUGIN)
vim.opt.swapfile = false
vim.opt.shada = ''
vim.cmd('filetype plugin indent on')
vim.cmd('runtime plugin/flint.lua')
local flint = require('flint')
-- FLINT_TEST_OPTS: more setup{} options as JSON (a test's switches); FLINT_TEST_CMD "null": the default
-- command from `python`.
local opts = {
  cmd = vim.json.decode(vim.env.FLINT_TEST_CMD),
  mode = vim.env.FLINT_TEST_MODE ~= '' and vim.env.FLINT_TEST_MODE or nil,
  settings = { maxVariants = 3, maxLines = 4, multiline = 'auto' },
}
if vim.env.FLINT_TEST_OPTS and vim.env.FLINT_TEST_OPTS ~= '' then
  opts = vim.tbl_deep_extend('force', opts, vim.json.decode(vim.env.FLINT_TEST_OPTS))
end
if opts.cmd == vim.NIL then
  opts.cmd = nil
end
flint.setup(opts)

-- One JSON snapshot of what the test looks at.
function _G.flint_probe()
  local clients = (vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = 'flint' })
  local c = clients[1]
  local ready = c ~= nil and next(c.server_capabilities or {}) ~= nil
  local cur = vim.api.nvim_win_get_cursor(0)
  return vim.json.encode({
    version = tostring(vim.version()),
    mode = vim.fn.mode(),
    plugin_mode = flint.mode,
    ready = ready,
    encoding = c and c.offset_encoding or vim.NIL,
    ghost = flint.ghost_text() or vim.NIL,
    current = flint.current() or vim.NIL,
    status = flint.status,
    statusline = flint.statusline(),
    stats = { requests = flint.stats.requests, suggestions = flint.stats.suggestions,
              accepted = flint.stats.accepted, partial = flint.stats.partial },
    lines = vim.api.nvim_buf_get_lines(0, 0, -1, false),
    cursor = cur,
    last_drop = flint.last_drop or vim.NIL,
    off_reason = flint.off_reason(0) or vim.NIL,
    buffer = vim.fn.expand('%:t'),
    attached = c ~= nil and (vim.lsp.buf_is_attached(0, c.id)) or false,
    next_edit = require('flint.nextedit').pending() or vim.NIL,
  })
end

-- vim.ui.select as the tests see it (flint_record_select() installs it): each call's prompt and rows are
-- kept for flint_selects(); flint_choose(i) answers the last one with its i-th item.
local selects, choose = {}, nil
function _G.flint_record_select()
  vim.ui.select = function(items, opts, on_choice)
    local rows = vim.tbl_map(opts.format_item or tostring, items)
    selects[#selects + 1] = { prompt = opts.prompt, rows = rows }
    choose = function(i)
      on_choice(items[i], i)
    end
  end
  return 0
end
function _G.flint_selects()
  return vim.json.encode(selects)
end
function _G.flint_choose(i)
  choose(i)
  return 0
end

-- The protocol stub does not say `complete` or `note` in flint/variants (docs/protocol.md): a test that
-- needs them has the client answer flint/variants from `answers` (JSON, one per request, the last one
-- repeated), as the real server would, and flint_refresh() delivers flint/refresh for the current buffer.
function _G.flint_fake_variants(answers)
  answers = vim.json.decode(answers)
  local c = (vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = 'flint' })[1]
  local request, n = c.request, 0
  c.request = function(self, method, params, handler, bufnr)
    if method ~= 'flint/variants' then
      return request(self, method, params, handler, bufnr)
    end
    n = math.min(n + 1, #answers)
    local res = answers[n]
    vim.schedule(function()
      handler(nil, res, { method = method, client_id = c.id, bufnr = bufnr })
    end)
    return true, 1000000 + n
  end
  return 0
end
function _G.flint_refresh()
  local c = (vim.lsp.get_clients or vim.lsp.get_active_clients)({ name = 'flint' })[1]
  c.handlers['flint/refresh'](nil, { textDocument = { uri = vim.uri_from_bufnr(0) } }, { client_id = c.id })
  return 0
end
