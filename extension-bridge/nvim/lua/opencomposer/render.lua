-- A thread as the chat buffer shows it: lines, their highlight groups and fold levels, from
-- the thread's state (state.lua). No editor state is read or changed here.
--
-- Each user request and agent answer is a block under a `▌You` / `▌opencomposer` header; a
-- tool call is one line (what it does, its status) with its approval, its error and a few
-- lines of output, a file change's diff or a to-do list under it; reasoning and the context
-- attached to a request are at fold level 1; a turn ends with a line saying how it ended.

local M = {}

local ICONS =
  { in_progress = '…', completed = '✓', failed = '✗', interrupted = '■', declined = '⊘' }
local DECISIONS = {
  approve = 'approved',
  approve_for_thread = 'approved for this thread',
  deny = 'denied',
  abort = 'denied, turn stopped',
}
local TODO = { pending = '[ ]', in_progress = '[~]', completed = '[x]' }

local Out = {}
Out.__index = Out

--- Adds `text` (split at newlines), each line highlighted with `hl` and at fold `level`.
function Out:add(text, hl, level, prefix)
  for _, line in ipairs(vim.split(text or '', '\n', { plain = true })) do
    table.insert(self.lines, (prefix or '') .. line)
    if hl then
      table.insert(self.highlights, { #self.lines - 1, hl })
    end
    self.folds[#self.lines] = level or 0
  end
end

function Out:blank()
  if #self.lines > 0 and self.lines[#self.lines] ~= '' then
    self:add('')
  end
end

local function trim(text)
  return (((text or ''):gsub('^%s+', '')):gsub('%s+$', ''))
end

local function first_line(text, limit)
  local line = (text or ''):match('^[^\n]*')
  if #line > limit then
    line = line:sub(1, limit - 1) .. '…'
  end
  return line
end

--- `:12` or `:12-20` for a line range, '' for none.
local function lines_of(range)
  if range == nil then
    return ''
  elseif range.start == range['end'] then
    return ':' .. range.start
  end
  return (':%d-%d'):format(range.start, range['end'])
end

--- One line saying what a tool call does (as the server's `describe_call`).
local function describe(item)
  local args = item.arguments or {}
  if item.type == 'command_execution' then
    return '$ ' .. item.command
  elseif item.type == 'file_read' then
    return 'read ' .. item.path .. lines_of(item.range)
  elseif item.type == 'search' then
    local found = item.match_count and (' — %d matches'):format(item.match_count) or ''
    return ('%s %q%s'):format(item.tool, item.query, found)
  elseif item.type == 'file_change' then
    return item.tool .. ' ' .. (args.path or first_line(args.patch, 60))
  end
  return item.tool .. ' ' .. first_line(item.arguments_text, 100)
end

--- At most `count` lines of `text`: its last ones for a command, else its first ones.
local function some_lines(text, count, tail)
  local lines = vim.split(trim(text), '\n', { plain = true })
  if #lines <= count then
    return lines, 0
  end
  if tail then
    return vim.list_slice(lines, #lines - count + 1, #lines), #lines - count
  end
  return vim.list_slice(lines, 1, count), #lines - count
end

local function render_output(out, item, output_lines)
  local output = item.output or item.live_output
  if output == nil or trim(output) == '' then
    return
  end
  local tail = item.type == 'command_execution'
  local lines, hidden = some_lines(output, output_lines, tail)
  if hidden > 0 and tail then
    out:add(('… %d more lines'):format(hidden), 'OpenComposerDim', 0, '  │ ')
  end
  for _, line in ipairs(lines) do
    out:add(line, 'OpenComposerDim', 0, '  │ ')
  end
  if hidden > 0 and not tail then
    out:add(('… %d more lines'):format(hidden), 'OpenComposerDim', 0, '  │ ')
  end
end

local function approval_line(approval)
  local answer = approval.decision and DECISIONS[approval.decision] or 'waiting for your answer'
  if approval.decided_by == 'policy' then
    answer = answer .. ' by a rule of this thread'
  elseif approval.decided_by == 'no_client' then
    answer = answer .. ': nobody could be asked'
  end
  return ('%s (%s)'):format(answer, approval.reason)
end

local function render_tool(out, item, approval, output_lines)
  local status = item.status
  if item.type == 'command_execution' and item.exit_code ~= nil and item.exit_code ~= 0 then
    status = status .. ', exit ' .. item.exit_code
  end
  if item.duration_ms then
    status = status .. (', %d ms'):format(item.duration_ms)
  end
  local hl = item.status == 'failed' and 'OpenComposerError' or 'OpenComposerTool'
  out:add(('%s %s  (%s)'):format(ICONS[item.status] or '•', describe(item), status), hl)
  if approval then
    out:add(approval_line(approval), 'OpenComposerApproval', 0, '  ? ')
  end
  if item.error then
    out:add(item.error.message, 'OpenComposerError', 0, '  ! ')
  end
  if item.type == 'file_change' then
    for _, change in ipairs(item.changes or {}) do
      local target = change.move_to and (' -> ' .. change.move_to) or ''
      out:add(('%s %s%s'):format(change.kind, change.path, target), 'OpenComposerTool', 0, '  ')
      for _, line in ipairs(vim.split(trim(change.diff), '\n', { plain = true })) do
        local first = line:sub(1, 1)
        local diff_hl = (first == '+' and 'OpenComposerAdded')
          or (first == '-' and 'OpenComposerRemoved')
          or (first == '@' and 'OpenComposerDim')
          or nil
        if line ~= '' then
          out:add(line, diff_hl, 0, '  ')
        end
      end
    end
  elseif item.type == 'todo_list' then
    for _, todo in ipairs(item.todos or {}) do
      out:add(todo.content, nil, 0, '  ' .. (TODO[todo.status] or '[ ]') .. ' ')
    end
  else
    render_output(out, item, output_lines)
  end
end

--- `ctx`: { approvals = approval requests by the id of the tool call they are about (shown
--- with it), output_lines }.
local function render_item(out, item, ctx)
  local kind = item.type
  if kind == 'user_message' then
    out:blank()
    out:add(item.steer and '▌You (added while running)' or '▌You', 'OpenComposerUser')
    for _, input in ipairs(item.content or {}) do
      if input.type == 'text' then
        out:add(input.text)
      else
        out:add('@ ' .. input.path .. lines_of(input.range), 'OpenComposerDim')
      end
    end
    if item.unsent then
      out:add('(the agent sees this at its next step)', 'OpenComposerDim')
    end
    if item.context and item.context ~= '' then
      out:add('context:', 'OpenComposerDim')
      out:add(item.context, 'OpenComposerDim', 1, '  ')
    end
    out:blank()
  elseif kind == 'agent_message' then
    if item.text ~= '' or item.status ~= 'completed' then
      out:blank()
      out:add('▌opencomposer', 'OpenComposerAgent')
      out:add(trim(item.text))
      if item.status ~= 'completed' and item.status ~= 'in_progress' then
        out:add(('(%s)'):format(item.status), 'OpenComposerDim')
      end
      out:blank()
    end
  elseif kind == 'reasoning' or kind == 'context_summary' then
    local title = kind == 'reasoning' and 'thinking'
      or ('context summarized (#%d, %s)'):format(item.summary_index or 1, item.method or 'model')
    out:add(('%s %s'):format(ICONS[item.status] or '•', title), 'OpenComposerDim')
    out:add(trim(item.text), 'OpenComposerDim', 1, '  ')
  elseif kind == 'approval_request' then
    if ctx.approvals[item.target_item_id] ~= item then -- its tool call is not in the thread
      local line = ('%s: %s — %s'):format(item.tool, item.summary, approval_line(item))
      out:add(line, 'OpenComposerApproval', 0, '? ')
    end
  elseif kind == 'error' then
    out:add(('✗ %s: %s'):format(item.error.kind, item.error.message), 'OpenComposerError')
  else
    render_tool(out, item, ctx.approvals[item.id], ctx.output_lines)
  end
end

local function render_turn_end(out, turn)
  out:blank()
  if turn.status == 'in_progress' then
    out:add('… working', 'OpenComposerDim')
    return
  end
  local reason = ''
  if turn.stop_reason and turn.stop_reason ~= turn.status then
    reason = (' (%s)'):format(turn.stop_reason)
  end
  local usage = ''
  local calls = turn.usage and turn.usage.model_calls or 0
  if calls > 0 then
    local tokens = (turn.usage.prompt_tokens or 0) + (turn.usage.completion_tokens or 0)
    -- "~": some tokens were estimated (a call cut short, or an engine that reports none).
    local about = turn.usage.estimated and '~' or ''
    local noun = calls == 1 and 'model call' or 'model calls'
    usage = (' · %d %s, %s%d tokens'):format(calls, noun, about, tokens)
  end
  local hl = turn.status == 'completed' and 'OpenComposerDim' or 'OpenComposerError'
  out:add(('── %s%s%s ──'):format(turn.status, reason, usage), hl)
  if turn.error then
    out:add(turn.error.message, 'OpenComposerError', 0, '  ')
  end
end

--- The thread (state.lua's) as { lines, highlights = { {row, group}, ... }, folds = {
--- [lnum] = level } }, with at most `output_lines` lines of each tool's output.
function M.render(thread, output_lines)
  local out = setmetatable({ lines = {}, highlights = {}, folds = {} }, Out)
  local info = thread.thread or {}
  out:add('opencomposer · ' .. (info.title or thread.id), 'OpenComposerTitle')
  if info.workspace then
    out:add(info.workspace, 'OpenComposerDim')
  end
  for _, turn in ipairs(thread.turns) do
    local approvals = {}
    for _, id in ipairs(turn.items) do
      local item = thread.items[id]
      if item.type == 'approval_request' and thread.items[item.target_item_id] then
        approvals[item.target_item_id] = item
      end
    end
    local ctx = { approvals = approvals, output_lines = output_lines }
    for _, id in ipairs(turn.items) do
      render_item(out, thread.items[id], ctx)
    end
    render_turn_end(out, turn)
  end
  return out
end

return M
