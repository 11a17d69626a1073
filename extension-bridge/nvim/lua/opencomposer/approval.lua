-- `opencomposer/approval/request`: the server asks whether a tool call may run; the user answers
-- through `vim.ui.select`, one prompt at a time.
--
-- vim.ui.select answers through a callback, but an LSP handler's return value is the reply.
-- Neovim (0.9 and later, neovim#21026) runs server-request handlers in a coroutine, so the
-- handler yields until the choice is made, as Neovim's own `window/showMessageRequest` handler
-- does. Called outside a coroutine (from a user's own code), it waits in `vim.wait` instead.

local M = {}

M.CHOICES = { 'Approve', 'Approve for this thread', 'Deny', 'Stop the turn' }
local DECISIONS = { 'approve', 'approve_for_thread', 'deny', 'abort' }

local queue = {} -- prompts waiting for the one on screen: { params, reply }
local asking = false

local function answer(index)
  if index == nil then
    return { decision = 'deny', message = 'the user dismissed the approval prompt' }
  end
  return { decision = DECISIONS[index] }
end

local function next_prompt()
  if asking or #queue == 0 then
    return
  end
  asking = true
  local prompt = table.remove(queue, 1)
  local item = prompt.params.item
  vim.ui.select(M.CHOICES, {
    prompt = ('opencomposer wants to run %s: %s (%s)'):format(item.tool, item.summary, item.reason),
    kind = 'opencomposer.approval',
  }, function(_, index)
    -- Scheduled: with a synchronous vim.ui.select this runs before the handler yielded.
    vim.schedule(function()
      asking = false
      prompt.reply(answer(index))
      next_prompt()
    end)
  end)
end

--- The handler of `opencomposer/approval/request` (the name the server advertises).
function M.handler(_, params)
  local co, is_main = coroutine.running()
  local in_coroutine = co ~= nil and not is_main
  local result
  table.insert(queue, {
    params = params,
    reply = function(value)
      result = value
      if in_coroutine then
        coroutine.resume(co)
      end
    end,
  })
  next_prompt()
  if in_coroutine then
    coroutine.yield()
  else
    vim.wait(2 ^ 31 - 1, function()
      return result ~= nil
    end)
  end
  return result
end

return M
