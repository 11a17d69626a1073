-- Starting the language server for file buffers, finding it again, and talking to it in a way
-- that works on Neovim 0.9 to 0.11 (methods became `client:method()` in 0.11,
-- `get_active_clients` became `get_clients` in 0.10).

local M = {}

local NAME = 'opencomposer'
local has_011 = vim.fn.has('nvim-0.11') == 1
local uv = vim.uv or vim.loop

function M.clients(filter)
  filter = vim.tbl_extend('force', { name = NAME }, filter or {})
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

function M.by_id(id)
  local client = id and vim.lsp.get_client_by_id(id)
  return client and client.name == NAME and client or nil
end

--- The workspace root of a client: the folder the server treats as the editor's.
function M.root(client)
  return client.config.root_dir
end

--- Sends a request; `on_result(result)` runs on success, errors go to `on_error(err)` (by
--- default, shown). Returns the request id, or nil when it could not be sent.
function M.request(client, method, params, on_result, bufnr, on_error)
  local function handler(err, result)
    if err and on_error then
      on_error(err)
    elseif err then
      local message = err.message or vim.inspect(err)
      vim.notify(('opencomposer: %s failed: %s'):format(method, message), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end
  local ok, id
  if has_011 then
    ok, id = client:request(method, params, handler, bufnr)
  else
    ok, id = client.request(method, params, handler, bufnr)
  end
  return ok and id or nil
end

function M.cancel(client, id)
  if has_011 then
    client:cancel_request(id)
  else
    client.cancel_request(id)
  end
end

--- Runs a server command (an LSP `Command`) through `workspace/executeCommand`.
function M.execute(client, command, bufnr, on_result)
  return M.request(client, 'workspace/executeCommand', {
    command = command.command,
    arguments = command.arguments,
  }, on_result, bufnr)
end

--- Absolute path with symbolic links resolved, as the server compares paths.
function M.realpath(path)
  return uv.fs_realpath(path) or vim.fs.normalize(path)
end

local function root_for(path, markers)
  local found = vim.fs.find(markers, { path = vim.fs.dirname(path), upward = true })[1]
  return M.realpath(found and vim.fs.dirname(found) or vim.fn.getcwd())
end

local function config(root, hooks)
  local options = require('opencomposer').options
  local cmd = vim.list_extend({}, options.cmd)
  if options.engine then
    vim.list_extend(cmd, { '--engine', options.engine })
  end
  if options.approval then
    vim.list_extend(cmd, { '--approval', options.approval })
  end
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.experimental = { opencomposer = true }
  if options.completion.enabled then
    -- Declared so that the server leaves `textDocument/completion` to the other sources:
    -- this plugin shows its completions as ghost text.
    capabilities.textDocument.inlineCompletion = { dynamicRegistration = false }
  end
  return {
    name = NAME,
    cmd = cmd,
    root_dir = root,
    capabilities = capabilities,
    init_options = vim.tbl_deep_extend('force', {
      completion = { enabled = options.completion.enabled },
    }, options.settings),
    handlers = {}, -- on_init adds the server's own methods
    on_init = hooks.on_init,
    on_attach = hooks.on_attach,
  }
end

local warned = false

--- Starts (or reuses) the server for a file buffer's root and attaches the buffer to it.
--- `hooks`: the client's { on_init, on_attach }.
function M.attach(bufnr, hooks)
  if vim.bo[bufnr].buftype ~= '' then
    return
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or name:match('^%a[%w+.-]*://') or #M.clients({ bufnr = bufnr }) > 0 then
    return
  end
  local cmd = require('opencomposer').options.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    if not warned then
      warned = true
      local message = ('opencomposer: %s is not an executable; set `cmd` in setup()'):format(cmd[1])
      vim.notify(message, vim.log.levels.WARN)
    end
    return
  end
  local root = root_for(name, require('opencomposer').options.root_markers)
  return vim.lsp.start(config(root, hooks), { bufnr = bufnr })
end

return M
