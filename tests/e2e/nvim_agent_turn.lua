-- Neovim's own LSP client against the opencomposer server: one agent turn and one inline
-- completion. Run by test_neovim.py as
--   nvim --headless --clean -n -c "luafile nvim_agent_turn.lua"
-- with $OC_JOB naming a JSON file of {python, launcher, script, workspace, file, request,
-- completion_position, result}. Whatever happens, it writes what it saw to `result` as JSON
-- and quits; the test makes the assertions.

local job = vim.json.decode(table.concat(vim.fn.readfile(vim.env.OC_JOB), '\n'))
local result = { events = {}, approvals = {} }
local TIMEOUT_MS = 30000

local function wait_for(what, predicate)
  if not vim.wait(TIMEOUT_MS, predicate, 20) then
    error('timed out waiting for ' .. what)
  end
end

-- The client object's own request: no check of server capabilities can drop a method.
local function request(client, bufnr, method, params)
  local response
  local sent = client:request(method, params, function(err, res)
    response = { err = err, result = res }
  end, bufnr)
  if not sent then
    error(method .. ': the request was not sent')
  end
  wait_for('the answer to ' .. method, function() return response ~= nil end)
  if response.err then
    error(method .. ' failed: ' .. vim.inspect(response.err))
  end
  return response.result
end

local function buffer_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') .. '\n'
end

local function disk_text(path)
  return table.concat(vim.fn.readfile(path), '\n') .. '\n'
end

local function run()
  vim.lsp.log.set_level('debug')
  vim.cmd.edit(vim.fn.fnameescape(job.file))
  local bufnr = vim.api.nvim_get_current_buf()

  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.experimental = { opencomposer = true }
  local id = vim.lsp.start({
    name = 'opencomposer',
    cmd = { job.python, job.launcher, job.script },
    root_dir = job.workspace,
    capabilities = capabilities,
    handlers = {
      ['opencomposer/event'] = function(_, event)
        local subject = event.turn or event.item or {}
        table.insert(result.events, {
          type = event.type,
          seq = event.seq,
          item = event.item and event.item.type or nil,
          status = subject.status,
          decision = subject.decision,
        })
      end,
      ['opencomposer/approval/request'] = function(_, params)
        table.insert(result.approvals, { thread_id = params.thread_id, tool = params.item.tool })
        return { decision = 'approve' }
      end,
    },
  }, { bufnr = bufnr })
  if not id then
    error('vim.lsp.start returned no client')
  end
  wait_for('initialize', function()
    local c = vim.lsp.get_client_by_id(id)
    return c == nil or c.initialized
  end)
  local client = vim.lsp.get_client_by_id(id)
  if client == nil then
    error('the server exited before initialize finished (see the LSP log)')
  end
  result.attached = vim.lsp.buf_is_attached(bufnr, id)
  result.offset_encoding = client.offset_encoding

  local started = request(client, bufnr, 'opencomposer/thread/start',
    { workspace = job.workspace })
  result.thread_id = started.thread.id
  request(client, bufnr, 'opencomposer/turn/start', {
    thread_id = started.thread.id,
    input = { { type = 'text', text = job.request } },
  })
  wait_for('turn.completed', function()
    for _, event in ipairs(result.events) do
      if event.type == 'turn.completed' then
        return true
      end
    end
    return false
  end)

  -- The edit is in the buffer (Neovim's default workspace/applyEdit handler), not yet on disk.
  result.buffer_after_turn = buffer_text(bufnr)
  result.modified_after_turn = vim.bo[bufnr].modified
  result.disk_before_write = disk_text(job.file)
  vim.api.nvim_buf_call(bufnr, function() vim.cmd.write() end)
  result.disk_after_write = disk_text(job.file)

  local position = job.completion_position
  local completion = request(client, bufnr, 'textDocument/inlineCompletion', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = position[1], character = position[2] },
    context = { triggerKind = 1 },
  })
  result.completion = completion

  client:stop()
  wait_for('the server to stop', function() return client:is_stopped() end)
  result.stopped = true
end

local ok, err = xpcall(run, debug.traceback)
if not ok then
  result.error = tostring(err)
end
result.messages = vim.api.nvim_exec2('messages', { output = true }).output
result.lsp_log = vim.lsp.log.get_filename()
vim.fn.writefile({ vim.json.encode(result) }, job.result)
vim.cmd('qall!')
