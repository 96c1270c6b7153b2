-- Asking for suggestions ('ghost' mode): textDocument/inlineCompletion at the cursor on every edit in
-- insert mode (and when asked), its answer turned into the variants ghost.lua shows; cycling, which asks
-- again for all the variants when only the automatic one is there; flint/refresh for the suggestion.
local ghost = require('flint.ghost')
local state = require('flint.state')
local util = require('flint.util')

local M = {}

local timer = nil -- debounce_ms

--- Why an answer cannot be shown any more (the buffer changed, insert mode left), or nil.
local function stale(bufnr, tick)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then
    return 'buffer changed'
  end
  if vim.api.nvim_buf_get_changedtick(bufnr) ~= tick or not vim.fn.mode():match('^[iR]') then
    return 'stale (buffer edited or insert mode left)'
  end
  return nil
end

--- One InlineCompletionItem as the text to show from the cursor on, and the text right of the cursor it
--- replaces (`tail`).
local function item_at_cursor(bufnr, it, i, enc)
  local row, col = ghost.cursor()
  local text = type(it.insertText) == 'table' and it.insertText.value or it.insertText or ''
  local tail = ''
  if it.range then
    local srow = it.range.start.line
    local scol = util.buf_byte_col(bufnr, srow, it.range.start.character, enc)
    local erow = it.range['end'].line
    local ecol = util.buf_byte_col(bufnr, erow, it.range['end'].character, enc)
    if erow == row and ecol > col then
      tail = vim.api.nvim_buf_get_text(bufnr, row, col, erow, ecol, {})[1] or ''
    end
    -- Keep only the part of the text beyond what already sits between range start and the cursor.
    if srow == row and scol < col then
      local before = vim.api.nvim_buf_get_text(bufnr, row, scol, row, col, {})[1] or ''
      if text:sub(1, #before) == before then
        text = text:sub(#before + 1)
      end
    end
  end
  local arg = (it.command and it.command.arguments and it.command.arguments[1]) or {}
  return { text = text, tail = tail, id = arg.id, index = arg.index or (i - 1) }
end

local function count_suggestion(t0)
  local ms = (util.uv.hrtime() - t0) / 1e6
  state.stats.suggestions = state.stats.suggestions + 1
  table.insert(state.stats.latencies, ms)
  if state.status.lastLatencyMs == nil then
    state.status.lastLatencyMs = ms
  end
end

local function on_result(req, err, result)
  if err or not result then
    state.last_drop = err and ('error: ' .. vim.inspect(err)) or 'empty result'
    return
  end
  state.last_drop = stale(req.bufnr, req.tick)
  if state.last_drop then
    return
  end
  local raw = result.items or result
  if type(raw) ~= 'table' or #raw == 0 then
    ghost.clear()
    return
  end
  local enc = util.encoding(req.client)
  local row, col = ghost.cursor()
  local items = {}
  for i, it in ipairs(raw) do
    items[#items + 1] = item_at_cursor(req.bufnr, it, i, enc)
  end
  count_suggestion(req.t0)
  ghost.show({ bufnr = req.bufnr, row = row, col = col, items = items, index = 1, accepted = 0, encoding = enc,
               client = req.client, invoked = req.invoked }, req.after ~= nil)
  if req.after then
    return req.after()
  end
end

local function ask(kind, after, invoked)
  local client = state.client()
  if not client or not state.active() then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  ghost.cancel_pending()
  local params = vim.lsp.util.make_position_params(0, util.encoding(client))
  params.context = { triggerKind = kind or 2 }
  local req = { bufnr = bufnr, tick = vim.api.nvim_buf_get_changedtick(bufnr), client = client,
                t0 = util.uv.hrtime(), invoked = invoked, after = after }
  state.stats.requests = state.stats.requests + 1
  local ok, id = util.request(client, 'textDocument/inlineCompletion', params, function(err, result)
    ghost.answered(id)
    on_result(req, err, result)
  end, bufnr)
  if ok and id then
    ghost.asking(client, id)
  end
end

--- Ask the server for a suggestion at the cursor now. kind: 1 = invoked (all variants), 2 = automatic
--- (the server answers with its fastest single variant). `after` runs instead of drawing the result.
function M.trigger(kind, after)
  ask(kind, after, kind == 1)
end

local function schedule_trigger()
  local ms = state.config.debounce_ms
  if ms and ms > 0 then
    timer = timer or util.uv.new_timer()
    timer:stop()
    timer:start(ms, 0, vim.schedule_wrap(function()
      M.trigger(2)
    end))
  else
    M.trigger(2)
  end
end

--- Show the next (count=1) or previous (count=-1) variant.
function M.cycle(count)
  if state.mode == 'builtin' then
    return vim.lsp.inline_completion.select({ count = count })
  end
  if ghost.has_all() then
    return ghost.step(count)
  end
  -- ask again as invoked (all the variants), then move on from the one that was on screen
  local was = ghost.rest()
  M.trigger(1, function()
    ghost.select(was)
    M.cycle(count)
  end)
end

--- flint/refresh for the current buffer: the server has more there than what is shown (the other
--- variants of an explicit request; the rest of a line; the line of the whole window). Ask
--- again as an explicit request, as VS Code does: the server answers the re-ask of an automatic
--- suggestion as automatic, and counts the user's next explicit request (<M-]>) as a real one. The
--- variant on screen stays.
function M.refreshed(uri)
  if vim.uri_from_bufnr(vim.api.nvim_get_current_buf()) ~= uri then
    return
  end
  local was = ghost.rest()
  ask(1, function()
    ghost.select(was)
    ghost.step(0)
  end, ghost.invoked())
end

local function on_text_changed()
  ghost.follow()
  if state.config.auto_trigger and state.active() then
    schedule_trigger()
  end
end

--- The autocommands of 'ghost' mode: ask on every edit, keep or drop what is shown.
function M.autocmds(group)
  vim.api.nvim_create_autocmd({ 'TextChangedI', 'TextChangedP' }, { group = group, callback = on_text_changed })
  vim.api.nvim_create_autocmd('InsertEnter', {
    group = group,
    callback = function()
      if state.config.auto_trigger and state.active() then
        vim.schedule(schedule_trigger) -- after `o`/`cc` put the indentation in
      end
    end,
  })
  vim.api.nvim_create_autocmd('CursorMovedI', { group = group, callback = ghost.drop_if_diverged })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, { group = group, callback = ghost.dismiss })
end

return M
