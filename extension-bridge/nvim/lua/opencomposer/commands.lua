-- `:OpenComposer ask|fix|explain|tests|undo|stop|threads`. Each finds the server of the
-- current buffer (or of the chat shown in it) and sends one request; what a turn does arrives
-- as events.
--
-- `ask` works in the thread of the chat buffer it is run from, else in the current thread of
-- the buffer's workspace root (started on first use); while that thread's turn runs, the text
-- steers it instead. `fix`, `explain` and `tests` run the server's own `opencomposer.fix`,
-- `.explain` and `.tests` commands, which word the request, in the root's current thread too,
-- so they show in the same chat. `undo` puts back the files of the thread's last turn with
-- edits.

local client_mod = require('opencomposer.client')
local state_mod = require('opencomposer.state')
local chat = require('opencomposer.chat')

local M = {}

M.current = {} -- workspace root -> id of the thread `ask` continues

local function oc()
  return require('opencomposer')
end

local function fail(message)
  vim.notify('opencomposer: ' .. message, vim.log.levels.WARN)
end

--- The server to talk to from the current buffer, the chat's thread (if run from a chat), and
--- the file buffer (if run from one).
local function context()
  local buf = vim.api.nvim_get_current_buf()
  local thread_id = vim.b[buf].opencomposer_thread
  if thread_id then
    local thread = oc().state.threads[thread_id]
    return client_mod.by_id(thread and thread.client_id), thread_id, nil
  end
  return client_mod.clients({ bufnr = buf })[1], nil, buf
end

local function relative(path, root)
  path = client_mod.realpath(path)
  if path:sub(1, #root + 1) == root .. '/' then
    return path:sub(#root + 2)
  end
  return path
end

local function lines_text(buf, first, last)
  return table.concat(vim.api.nvim_buf_get_lines(buf, first - 1, last, false), '\n') .. '\n'
end

local MAX_REFERENCE_CHARS = 20000 -- longer selections are sent as their line range only, as the server does

--- The file (the selected lines, with a range) a request is about.
local function reference(buf, root, opts)
  if buf == nil or vim.bo[buf].buftype ~= '' or vim.api.nvim_buf_get_name(buf) == '' then
    return nil
  end
  local ref = { type = 'file', path = relative(vim.api.nvim_buf_get_name(buf), root) }
  if opts.range and opts.range > 0 then
    ref.range = { start = opts.line1, ['end'] = opts.line2 }
    local text = lines_text(buf, opts.line1, opts.line2)
    ref.text = #text <= MAX_REFERENCE_CHARS and text or nil
  end
  return ref
end

--- Shows the thread the server started a turn in, and makes it the root's current thread.
local function started(client, thread_id, turn)
  M.current[client_mod.root(client)] = thread_id
  local thread = state_mod.note_turn(oc().state, thread_id, turn)
  thread.client_id = client.id
  chat.open(thread_id)
end

local function with_thread(client, thread_id, callback)
  if thread_id then
    return callback(thread_id)
  end
  local root = client_mod.root(client)
  client_mod.request(client, 'opencomposer/thread/start', { workspace = root }, function(result)
    local thread = state_mod.thread(oc().state, result.thread.id)
    thread.thread, thread.client_id = result.thread, client.id
    M.current[root] = result.thread.id
    callback(result.thread.id)
  end)
end

function M.ask(text, opts)
  if vim.trim(text) == '' then
    return vim.ui.input({ prompt = 'Ask opencomposer: ' }, function(input)
      if input and vim.trim(input) ~= '' then
        M.ask(input, opts)
      end
    end)
  end
  local client, thread_id, buf = context()
  if client == nil then
    return fail('no server for this buffer: open a file first')
  end
  local input = { { type = 'text', text = text } }
  local ref = reference(buf, client_mod.root(client), opts)
  if ref then
    table.insert(input, ref)
  end
  with_thread(client, thread_id or M.current[client_mod.root(client)], function(id)
    local running = state_mod.running(state_mod.thread(oc().state, id))
    if running then
      return client_mod.request(client, 'opencomposer/turn/steer', {
        thread_id = id,
        turn_id = running.id,
        input = input,
      }, function(result)
        state_mod.note_steer(oc().state, id, running.id, result.item_id, input)
        chat.open(id)
      end)
    end
    client_mod.request(client, 'opencomposer/turn/start', { thread_id = id, input = input }, function(result)
      started(client, id, result.turn)
    end)
  end)
end

--- The diagnostic as the server wants it: LSP's own, or one made from vim.diagnostic's.
local function lsp_diagnostic(d)
  if d.user_data and d.user_data.lsp then
    return d.user_data.lsp
  end
  return {
    range = {
      start = { line = d.lnum, character = d.col },
      ['end'] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
    },
    severity = d.severity,
    message = d.message,
    source = d.source,
    code = d.code,
  }
end

--- Runs a server command in the root's current thread (started on first use).
local function run_action(command, argument, client, buf)
  with_thread(client, M.current[client_mod.root(client)], function(id)
    argument.thread_id = id
    client_mod.execute(client, { command = command, arguments = { argument } }, buf, function(result)
      started(client, id, { id = result.turn_id, thread_id = id })
    end)
  end)
end

function M.fix()
  local client, _, buf = context()
  if client == nil or buf == nil then
    return fail('run fix from a file the server is attached to')
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local diagnostics = vim.tbl_map(lsp_diagnostic, vim.diagnostic.get(buf, { lnum = row }))
  if #diagnostics == 0 then
    return fail('no diagnostic on this line')
  end
  run_action('opencomposer.fix', {
    uri = vim.uri_from_bufnr(buf),
    range = { start = { line = row, character = 0 }, ['end'] = { line = row + 1, character = 0 } },
    diagnostics = diagnostics,
  }, client, buf)
end

--- A command about the selected lines (the whole file without a range).
local function on_lines(name, command, opts)
  local client, _, buf = context()
  if client == nil or buf == nil then
    return fail(('run %s from a file the server is attached to'):format(name))
  end
  local first, last = 1, vim.api.nvim_buf_line_count(buf)
  if opts.range and opts.range > 0 then
    first, last = opts.line1, opts.line2
  end
  run_action(command, {
    uri = vim.uri_from_bufnr(buf),
    range = { start = { line = first - 1, character = 0 }, ['end'] = { line = last, character = 0 } },
  }, client, buf)
end

function M.explain(_, opts)
  on_lines('explain', 'opencomposer.explain', opts)
end

function M.tests(_, opts)
  on_lines('tests', 'opencomposer.tests', opts)
end

local function undone(result)
  local paths = vim.tbl_map(function(change)
    return change.path
  end, result.restored)
  local unkept = result.unrestorable or {}
  if #unkept > 0 then
    vim.notify(('opencomposer: not put back (secret files are never kept in checkpoints): %s'):format(
      table.concat(unkept, ', ')
    ), vim.log.levels.WARN)
  end
  if #paths == 0 and #result.conflicts == 0 then
    return vim.notify('opencomposer: nothing to undo')
  end
  local message = 'opencomposer: put back ' .. table.concat(paths, ', ')
  if #result.conflicts == 0 then
    return vim.notify(message)
  end
  vim.notify(('%s; left as they are (changed since the agent wrote them): %s'):format(
    #paths > 0 and message or 'opencomposer: nothing put back',
    table.concat(result.conflicts, ', ')
  ), vim.log.levels.WARN)
end

--- Puts back the files the last turn (with edits) of the thread changed, through the same
--- path as its edits: in the buffers of open files, on disk for the others.
function M.undo()
  local client, thread_id = context()
  if client == nil then
    return fail('no server for this buffer')
  end
  thread_id = thread_id or M.current[client_mod.root(client)]
  if thread_id == nil then
    return fail('no thread to undo: ask first')
  end
  client_mod.request(client, 'opencomposer/thread/undo', { thread_id = thread_id, scope = 'turn' },
    undone, nil, function(err)
      -- `conflict`: a turn is running, or every file changed since the agent wrote it.
      fail('undo: ' .. (err.message or vim.inspect(err)))
    end)
end

function M.stop()
  local client, thread_id = context()
  if client == nil then
    return fail('no server for this buffer')
  end
  local threads = oc().state.threads
  local candidates = { thread_id or M.current[client_mod.root(client)] }
  for id, thread in pairs(threads) do
    if thread.client_id == client.id then
      table.insert(candidates, id)
    end
  end
  for _, id in ipairs(candidates) do
    local turn = threads[id] and state_mod.running(threads[id])
    if turn then
      return client_mod.request(client, 'opencomposer/turn/interrupt', { thread_id = id, turn_id = turn.id })
    end
  end
  fail('no turn is running')
end

local function describe_thread(thread)
  local when = (thread.updated_at or ''):gsub('T', ' '):sub(1, 16)
  return ('%s  ·  %s'):format(thread.title or thread.id, when)
end

--- The threads of the root of the current buffer (or chat); the one picked is read into a
--- chat and followed from the snapshot on.
function M.threads()
  local client = context()
  client = client or client_mod.clients()[1]
  if client == nil then
    return fail('no server is running: open a file first')
  end
  local root = client_mod.root(client)
  client_mod.request(client, 'opencomposer/thread/list', { workspace = root }, function(result)
    if #result.data == 0 then
      return fail('no threads in ' .. vim.fn.fnamemodify(root, ':~') .. ' yet')
    end
    vim.ui.select(result.data, {
      prompt = 'opencomposer threads in ' .. vim.fn.fnamemodify(root, ':~'),
      kind = 'opencomposer.threads',
      format_item = describe_thread,
    }, function(choice)
      if choice == nil then
        return
      end
      client_mod.request(client, 'opencomposer/thread/read', { thread_id = choice.id }, function(read)
        local thread = state_mod.load(oc().state, read)
        thread.client_id = client.id
        M.current[read.thread.workspace] = read.thread.id
        chat.open(read.thread.id, true)
        -- Follow it from there: a turn may be running in it (started elsewhere).
        client_mod.request(client, 'opencomposer/thread/subscribe', {
          thread_id = thread.id,
          after_seq = thread.last_seq,
        }, nil, nil, function() end)
      end)
    end)
  end)
end

local SUBCOMMANDS = {
  ask = M.ask,
  fix = M.fix,
  explain = M.explain,
  tests = M.tests,
  undo = M.undo,
  stop = M.stop,
  threads = M.threads,
}
M.names = vim.tbl_keys(SUBCOMMANDS)
table.sort(M.names)

--- Runs `:OpenComposer {args}`; `opts` is the user command's.
function M.run(opts)
  local name, rest = opts.args:match('^%s*(%S*)%s*(.-)%s*$')
  local subcommand = SUBCOMMANDS[name]
  if subcommand == nil then
    return fail(('unknown subcommand %q; one of: %s'):format(name, table.concat(M.names, ', ')))
  end
  subcommand(rest, opts)
end

function M.complete(arglead, cmdline)
  if cmdline:match('^%S+%s+%S*$') == nil then
    return {}
  end
  return vim.tbl_filter(function(name)
    return name:sub(1, #arglead) == arglead
  end, M.names)
end

--- Keys of a chat buffer: ask in its thread, stop its turn, close it.
function M.chat_keymaps(buf)
  local keys = oc().options.keymaps
  local maps = {
    { keys.chat_ask, function() M.ask('', {}) end, 'ask in this thread' },
    { keys.chat_stop, M.stop, 'stop the running turn' },
    { keys.chat_close, '<Cmd>close<CR>', 'close the chat' },
  }
  for _, map in ipairs(maps) do
    if map[1] then
      vim.keymap.set('n', map[1], map[2], { buffer = buf, desc = 'opencomposer: ' .. map[3] })
    end
  end
end

return M
