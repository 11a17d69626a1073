-- Threads as the client knows them, built from the server's events (or a `thread/read`
-- answer). Pure Lua, no editor calls: render.lua draws what this holds.
--
-- A thread is { id, thread = the protocol Thread, turns = { turn, ... }, items = { [id] =
-- item }, last_seq, complete }; a turn is the protocol Turn plus `items`, the ids of its items
-- in log order. `complete`: everything from the thread's start is known (its events from
-- seq 1, or a `thread/read` answer); a thread followed from the middle (the server's own
-- thread, when a code action runs in it) is not. An item is kept as the server sent it, with
-- text deltas appended to `text` and command output deltas to `live_output`, until
-- `item.completed` replaces it.

local M = {}

function M.new()
  return { threads = {} }
end

--- The thread with this id, created empty when unknown.
function M.thread(state, id)
  local thread = state.threads[id]
  if thread == nil then
    thread = { id = id, turns = {}, turn_by_id = {}, items = {}, last_seq = 0 }
    state.threads[id] = thread
  end
  return thread
end

local function turn_of(thread, turn_id)
  local turn = thread.turn_by_id[turn_id]
  if turn == nil then
    turn = { id = turn_id, thread_id = thread.id, status = 'in_progress', items = {} }
    thread.turn_by_id[turn_id] = turn
    table.insert(thread.turns, turn)
  end
  return turn
end

local function merge_turn(thread, turn)
  local known = turn_of(thread, turn.id)
  for key, value in pairs(turn) do
    if key ~= 'items' then
      known[key] = value
    end
  end
  return known
end

local function put_item(thread, item)
  if thread.items[item.id] == nil then
    table.insert(turn_of(thread, item.turn_id).items, item.id)
  end
  thread.items[item.id] = item
end

--- Applies one event. Returns the thread it changed, or nil for an event seen before (a
--- `seq` not above the last one) or a delta of an unknown item.
function M.apply(state, event)
  local thread = M.thread(state, event.thread_id)
  if event.seq ~= nil then
    if event.seq <= thread.last_seq then
      return nil
    end
    thread.last_seq = event.seq
    thread.complete = thread.complete or event.seq == 1
  end
  local kind = event.type
  if kind == 'thread.started' then
    thread.thread = event.thread
  elseif kind == 'turn.started' or kind == 'turn.completed' then
    merge_turn(thread, event.turn)
  elseif kind == 'item.started' or kind == 'item.completed' then
    put_item(thread, event.item)
  elseif kind == 'item.delta' then
    local item = thread.items[event.item_id]
    if item == nil then
      return nil
    end
    local delta = event.delta
    if delta.kind == 'output' then
      item.live_output = (item.live_output or '') .. delta.text
    else
      item.text = (item.text or '') .. delta.text
    end
  else
    return nil
  end
  return thread
end

--- Records a turn the client started (the `turn/start` answer), unless its events came first.
function M.note_turn(state, thread_id, turn)
  local thread = M.thread(state, thread_id)
  if thread.turn_by_id[turn.id] == nil then
    merge_turn(thread, turn)
  end
  return thread
end

--- Records input added to a running turn (the `turn/steer` answer names its item). The
--- server logs the item at the turn's next step (or its end); until then it is kept here,
--- marked `unsent`, and the item's events replace it.
function M.note_steer(state, thread_id, turn_id, item_id, input)
  local thread = M.thread(state, thread_id)
  if thread.items[item_id] == nil then
    put_item(thread, {
      id = item_id,
      turn_id = turn_id,
      type = 'user_message',
      content = input,
      steer = true,
      status = 'in_progress',
      unsent = true,
    })
  end
  return thread
end

--- Takes in a `thread/read` answer: the thread's details, and its turns and items unless
--- they are all known already (streamed state keeps the text of running items, which a
--- snapshot may lack). Events up to the answer's `last_seq` are in it: subscribe after
--- `thread.last_seq` to follow it from there.
function M.load(state, response)
  local thread = M.thread(state, response.thread.id)
  thread.thread = response.thread
  if thread.complete then
    return thread
  end
  thread.complete = true
  -- Events past the snapshot that arrived before it are dropped with the old state here, and
  -- sent again by the subscription.
  thread.last_seq = response.last_seq
  thread.turns, thread.turn_by_id, thread.items = {}, {}, {}
  for _, turn in ipairs(response.turns or {}) do
    merge_turn(thread, turn)
    for _, item in ipairs(turn.items or {}) do
      put_item(thread, item)
    end
  end
  return thread
end

--- The thread's running turn, or nil.
function M.running(thread)
  for i = #thread.turns, 1, -1 do
    if thread.turns[i].status == 'in_progress' then
      return thread.turns[i]
    end
  end
  return nil
end

return M
