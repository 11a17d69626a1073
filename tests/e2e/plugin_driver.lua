-- Drives the opencomposer Neovim plugin (extension-bridge/nvim) the way a user would: through
-- `:OpenComposer`, insert mode and the accept key. Run by test_nvim_plugin.py as
--   nvim --headless --clean -u NONE -n -c "luafile plugin_driver.lua"
-- with $OC_JOB naming a JSON file of {scenario, plugin, python, launcher, script, file,
-- result, ...}. The scenario runs in a coroutine that sleeps on timers, so that Neovim's main
-- loop (typeahead, insert mode, LSP messages) runs between its steps. Whatever happens, it
-- writes what it saw to `result` as JSON and quits; the test makes the assertions.

local job = vim.json.decode(table.concat(vim.fn.readfile(vim.env.OC_JOB), '\n'))
local result = { select_calls = {}, notices = {} }
local TIMEOUT_MS = 20000
local uv = vim.uv or vim.loop
local resume

local function sleep(ms)
  vim.defer_fn(resume, ms)
  coroutine.yield()
end

local function wait_for(what, predicate)
  local deadline = uv.hrtime() + TIMEOUT_MS * 1e6
  while not predicate() do
    if uv.hrtime() > deadline then
      error('timed out waiting for ' .. what)
    end
    sleep(20)
  end
end

local function lines_of(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

-- vim.ui.select as a UI plugin would do it (answering later), picking `job.select[kind]`
-- (a label) or else the first item, and recording what it was shown.
vim.ui.select = function(items, opts, on_choice)
  local labels = {}
  for i, item in ipairs(items) do
    labels[i] = opts.format_item and opts.format_item(item) or item
  end
  table.insert(result.select_calls, { kind = opts.kind, prompt = opts.prompt, items = labels })
  local index = 1
  for i, label in ipairs(labels) do
    if label == (job.select or {})[opts.kind] then
      index = i
    end
  end
  vim.defer_fn(function()
    on_choice(items[index], index)
  end, 10)
end

-- vim.notify, recorded.
vim.notify = function(message, level)
  local names = { [vim.log.levels.WARN] = 'WARN', [vim.log.levels.ERROR] = 'ERROR' }
  table.insert(result.notices, { message = message, level = names[level] or 'INFO' })
end

local function notices_after(count, what)
  wait_for(what, function()
    return #result.notices > count
  end)
  return vim.list_slice(result.notices, count + 1)
end

local function start()
  vim.lsp.log.set_level('debug')
  vim.opt.runtimepath:prepend(job.plugin) -- after startup: setup() defines :OpenComposer
  require('opencomposer').setup({
    cmd = { job.python, job.launcher, job.script },
    completion = { debounce_ms = 20 },
  })
  vim.cmd.edit(vim.fn.fnameescape(job.file))
  local buf = vim.api.nvim_get_current_buf()
  wait_for('the server to initialize', function()
    local client = require('opencomposer.client').clients({ bufnr = buf })[1]
    return client ~= nil and client.initialized
  end)
  return buf, require('opencomposer.client').clients({ bufnr = buf })[1]
end

local function chat_lines(thread_id)
  return lines_of(require('opencomposer.chat').buffer(thread_id))
end

-- Waits for the thread's turn `turn_id` to end and for its chat to show that.
local function wait_turn_end(thread_id, turn_id)
  local state = require('opencomposer').state
  wait_for('the end of turn ' .. turn_id, function()
    local thread = state.threads[thread_id]
    local turn = thread and thread.turn_by_id[turn_id]
    return turn ~= nil and turn.status ~= 'in_progress'
  end)
  wait_for('the chat to show the end of the turn', function()
    local lines = chat_lines(thread_id)
    return lines[#lines]:match('^── ') ~= nil or (lines[#lines - 1] or ''):match('^── ') ~= nil
  end)
end

local function last_turn(thread_id)
  local thread = require('opencomposer').state.threads[thread_id]
  return thread.turns[#thread.turns]
end

local scenarios = {}

-- ask (with an approved edit), threads, undo, fix, explain, tests, and steer and stop, in one
-- editor, one server and one thread.
function scenarios.agent()
  local buf = start()
  local file_win = vim.api.nvim_get_current_win()
  local commands = require('opencomposer.commands')
  local state = require('opencomposer').state
  local root = require('opencomposer.client').realpath(job.workspace)
  result.workspace = root

  vim.cmd('OpenComposer ask ' .. job.request)
  wait_for('a thread', function()
    return commands.current[root] ~= nil
  end)
  local thread_id = commands.current[root]
  wait_for('the turn to start', function()
    return last_turn(thread_id) ~= nil
  end)
  wait_turn_end(thread_id, last_turn(thread_id).id)
  result.ask = {
    chat = chat_lines(thread_id),
    chat_windows = #vim.fn.win_findbuf(require('opencomposer.chat').buffer(thread_id)),
    focus_stayed = vim.api.nvim_get_current_win() == file_win,
    buffer = lines_of(buf),
    modified = vim.bo[buf].modified,
    disk = vim.fn.readfile(job.file),
  }

  vim.cmd('OpenComposer threads')
  wait_for('the thread read back', function()
    return vim.b.opencomposer_thread == thread_id
  end)
  result.threads = { chat = chat_lines(thread_id) }

  -- Undo from the chat, then again from the file: nothing is left to undo.
  local before = #result.notices
  vim.cmd('OpenComposer undo')
  result.undo = { notices = notices_after(before, 'the undo') }
  result.undo.buffer = lines_of(buf)
  result.undo.disk = vim.fn.readfile(job.file)
  vim.api.nvim_set_current_win(file_win)
  before = #result.notices
  vim.cmd('OpenComposer undo')
  result.undo.again = notices_after(before, 'the second undo')

  local ns = vim.api.nvim_create_namespace('plugin_driver')
  vim.diagnostic.set(ns, buf, {
    { lnum = 1, col = 0, message = 'y is never used', severity = vim.diagnostic.severity.WARN,
      source = 'lint' },
  })
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.cmd('OpenComposer fix')
  wait_for('the fix turn', function()
    return #state.threads[thread_id].turns == 2
  end)
  wait_turn_end(thread_id, last_turn(thread_id).id)
  result.fix = { chat = chat_lines(thread_id), current = commands.current[root] == thread_id, folded = {} }
  local chat_win = vim.fn.win_findbuf(require('opencomposer.chat').buffer(thread_id))[1]
  vim.api.nvim_win_call(chat_win, function()
    for lnum, line in ipairs(result.fix.chat) do
      if vim.fn.foldlevel(lnum) > 0 then
        local closed = vim.fn.foldclosed(lnum) ~= -1
        table.insert(result.fix.folded, { line = line, level = vim.fn.foldlevel(lnum), closed = closed })
      end
    end
  end)

  vim.api.nvim_set_current_win(file_win)
  vim.cmd('1,2OpenComposer explain')
  wait_for('the explain turn', function()
    return #state.threads[thread_id].turns == 3
  end)
  wait_turn_end(thread_id, last_turn(thread_id).id)
  result.explain = { chat = chat_lines(thread_id) }

  vim.cmd('1OpenComposer tests')
  wait_for('the tests turn', function()
    return #state.threads[thread_id].turns == 4
  end)
  wait_turn_end(thread_id, last_turn(thread_id).id)
  result.tests = { chat = chat_lines(thread_id) }

  vim.cmd('OpenComposer ask take your time')
  wait_for('the agent to start answering in another turn', function()
    local turns = state.threads[thread_id].turns
    return #turns == 5 and #turns[5].items >= 2
  end)
  vim.cmd('OpenComposer ask and check y')
  wait_for('the steering message in the chat', function()
    return vim.tbl_contains(chat_lines(thread_id), '(the agent sees this at its next step)')
  end)
  before = #result.notices
  vim.cmd('OpenComposer undo')
  local refused = notices_after(before, 'the undo to be refused')
  vim.cmd('OpenComposer stop')
  wait_turn_end(thread_id, last_turn(thread_id).id)
  result.stop = { chat = chat_lines(thread_id), status = last_turn(thread_id).status, undo = refused }
end

-- Ghost text in insert mode, accepted with the accept key.
function scenarios.completion()
  local buf, client = start()
  local ns = vim.api.nvim_get_namespaces()['opencomposer.completion']
  vim.api.nvim_win_set_cursor(0, job.cursor)
  vim.api.nvim_feedkeys('A', 'n', false)
  local marks
  wait_for('the ghost text', function()
    marks = vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
    return #marks > 0
  end)
  local row, col, details = marks[1][2], marks[1][3], marks[1][4]
  result.ghost = {
    mode = vim.api.nvim_get_mode().mode,
    position = { row, col },
    virt_text = details.virt_text,
    virt_text_pos = details.virt_text_pos,
    buffer = lines_of(buf),
  }

  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(job.accept_key, true, false, true), 'm', false)
  wait_for('the accepted text', function()
    return vim.api.nvim_buf_get_lines(buf, row, row + 1, true)[1] ~= result.ghost.buffer[row + 1]
  end)
  result.accepted = {
    mode = vim.api.nvim_get_mode().mode,
    buffer = lines_of(buf),
    cursor = vim.api.nvim_win_get_cursor(0),
  }
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<Esc>', true, false, true), 'n', false)
  wait_for('normal mode without ghost text', function()
    return vim.api.nvim_get_mode().mode == 'n' and #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}) == 0
  end)
  wait_for('the acceptance to reach the server', function()
    return next(client.requests) == nil
  end)
end

-- :helptags on a copy of the doc folder, then :help for each tag the test names.
function scenarios.help()
  vim.opt.runtimepath:prepend(job.plugin)
  local ok, err = pcall(vim.cmd, 'helptags ' .. vim.fn.fnameescape(job.plugin .. '/doc'))
  result.helptags = ok and 'ok' or tostring(err)
  result.help = {}
  for _, tag in ipairs(job.tags) do
    local found, why = pcall(vim.cmd, 'help ' .. tag)
    result.help[tag] = found and vim.fn.expand('%:t') or tostring(why)
    if found then
      vim.cmd('close')
    end
  end
end

local function stop_servers()
  local clients = vim.lsp.get_clients({ name = 'opencomposer' })
  for _, client in ipairs(clients) do
    client:stop()
  end
  vim.wait(5000, function()
    for _, client in ipairs(clients) do
      if not client:is_stopped() then
        return false
      end
    end
    return true
  end, 20)
end

local function finish(err)
  result.error = err
  local stopped, why = pcall(stop_servers)
  if not stopped then
    result.error = (err or '') .. '\nstopping the servers failed: ' .. tostring(why)
  end
  result.messages = vim.api.nvim_exec2('messages', { output = true }).output
  result.lsp_log = vim.lsp.log.get_filename()
  vim.fn.writefile({ vim.json.encode(result) }, job.result)
  vim.cmd('qall!')
end

local co = coroutine.create(function()
  local ok, err = xpcall(scenarios[job.scenario], debug.traceback)
  finish(not ok and tostring(err) or nil)
end)

resume = function()
  local ok, err = coroutine.resume(co)
  if not ok then
    pcall(finish, 'driver crashed: ' .. tostring(err))
  end
end

vim.schedule(resume)
