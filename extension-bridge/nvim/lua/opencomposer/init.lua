-- opencomposer for Neovim: a thin client of the opencomposer language server (`opencomposer
-- lsp`). The agent runs in the server; this plugin starts the server for file buffers, sends
-- requests (`:OpenComposer`), shows the events of a thread in a chat buffer, asks the user
-- the server's approval questions, and shows inline completions as ghost text. The agent's
-- edits arrive as standard `workspace/applyEdit`, which Neovim applies to the buffers.
--
-- Modules: client (server lifecycle, requests), state (events -> threads, pure), render
-- (thread -> lines), chat (its buffer and window), approval, completion, commands. See
-- `:help opencomposer`.

local M = {}

local defaults = {
  cmd = { 'opencomposer', 'lsp' },
  engine = nil, -- `--engine` for the server, e.g. 'openai:http://127.0.0.1:30000/v1'
  approval = nil, -- `--approval`: 'auto', 'ask' or 'deny'
  root_markers = { '.git' },
  settings = {}, -- sent as initializationOptions: completion.max_tokens, applyEdits, ...
  completion = { enabled = true, debounce_ms = 100 },
  chat = { position = 'right', width = 80, height = 20, output_lines = 5 },
  keymaps = { accept = '<C-l>', chat_ask = 'i', chat_stop = '<C-c>', chat_close = 'q' },
}

M.options = vim.deepcopy(defaults)
M.state = require('opencomposer.state').new()

local HIGHLIGHTS = {
  OpenComposerSuggestion = 'Comment',
  OpenComposerTitle = 'Title',
  OpenComposerUser = 'Special',
  OpenComposerAgent = 'Function',
  OpenComposerTool = 'Identifier',
  OpenComposerApproval = 'WarningMsg',
  OpenComposerAdded = 'DiffAdd',
  OpenComposerRemoved = 'DiffDelete',
  OpenComposerError = 'ErrorMsg',
  OpenComposerDim = 'Comment',
}

local function on_event(_, event, ctx)
  local thread = require('opencomposer.state').apply(M.state, event)
  if thread == nil then
    return
  end
  thread.client_id = ctx.client_id
  local chat = require('opencomposer.chat')
  chat.refresh(thread.id)
  if event.type == 'turn.completed' and not chat.visible(thread.id) then
    vim.notify(('opencomposer: the turn %s (:OpenComposer threads shows it)'):format(event.turn.status))
  end
end

local function on_approval(...)
  return require('opencomposer.approval').handler(...)
end

local hooks = {
  --- Handles events and approvals under the names the server advertises for them
  --- (`capabilities.experimental.opencomposer`).
  on_init = function(client, result)
    local advertised = vim.tbl_get(result, 'capabilities', 'experimental', 'opencomposer') or {}
    if advertised.events then
      client.handlers[advertised.events] = on_event
    end
    if advertised.approvals then
      client.handlers[advertised.approvals] = on_approval
    end
  end,
  on_attach = function(_, bufnr)
    require('opencomposer.completion').attach(bufnr)
  end,
}

--- Starts the server for a file buffer (once per workspace root) and attaches it.
function M.attach(bufnr)
  return require('opencomposer.client').attach(bufnr or vim.api.nvim_get_current_buf(), hooks)
end

function M.setup(opts)
  opts = opts or {}
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts)
  -- Lists replace the defaults rather than merge with them index by index.
  M.options.cmd = opts.cmd or defaults.cmd
  M.options.root_markers = opts.root_markers or defaults.root_markers
  -- Plugin managers that add a subfolder of the repository (extension-bridge/nvim) to
  -- 'runtimepath' do it after startup, when plugin/ files are no longer sourced.
  if not vim.g.loaded_opencomposer then
    vim.cmd.runtime('plugin/opencomposer.lua')
  end
  for group, link in pairs(HIGHLIGHTS) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
  local group = vim.api.nvim_create_augroup('opencomposer', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'FileType' }, {
    group = group,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      M.attach(buf)
    end
  end
end

return M
