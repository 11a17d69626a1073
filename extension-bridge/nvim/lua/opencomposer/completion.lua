-- Inline completion as ghost text. In insert mode, after a pause in typing or moving
-- (`completion.debounce_ms`), the server is asked `textDocument/inlineCompletion` at the
-- cursor; the first item's text is shown after the cursor (its first line as virtual text,
-- the rest as virtual lines). The accept key inserts it and runs the item's command, with
-- which the server records the acceptance. Typing, moving or leaving insert mode drops it; an
-- answer that arrives after the text or the cursor changed is ignored.

local client_mod = require('opencomposer.client')

local M = {}

local ns = vim.api.nvim_create_namespace('opencomposer.completion')
local uv = vim.uv or vim.loop
local timer = nil
local generation = 0 -- numbers requests: only the newest one's answer is shown
local inflight = nil -- { client, id } of the request waiting for an answer
local shown = nil -- the suggestion on screen

local function options()
  return require('opencomposer').options.completion
end

local function byte_col(line, character, encoding)
  if encoding == 'utf-8' then
    return character
  elseif vim.fn.has('nvim-0.11') == 1 then
    return vim.str_byteindex(line, encoding, character, false)
  end
  return vim.str_byteindex(line, character, encoding == 'utf-16')
end

--- Removes the suggestion on screen and forgets any request in flight.
function M.clear()
  generation = generation + 1
  if inflight then
    pcall(client_mod.cancel, inflight.client, inflight.id)
    inflight = nil
  end
  if shown and vim.api.nvim_buf_is_valid(shown.bufnr) then
    vim.api.nvim_buf_clear_namespace(shown.bufnr, ns, 0, -1)
  end
  shown = nil
end

local function here(bufnr)
  return {
    bufnr = bufnr,
    tick = vim.api.nvim_buf_get_changedtick(bufnr),
    cursor = vim.api.nvim_win_get_cursor(0),
  }
end

local function still_here(place)
  if vim.api.nvim_get_current_buf() ~= place.bufnr or not vim.api.nvim_get_mode().mode:match('^i') then
    return false
  end
  local now = here(place.bufnr)
  return now.tick == place.tick and now.cursor[1] == place.cursor[1] and now.cursor[2] == place.cursor[2]
end

local function show(client, place, item)
  local text = type(item.insertText) == 'table' and item.insertText.value or item.insertText
  local row, col = place.cursor[1] - 1, place.cursor[2]
  local line = vim.api.nvim_buf_get_lines(place.bufnr, row, row + 1, true)[1]
  -- The item replaces its range (an empty one at the cursor, unless the server says
  -- otherwise); what of it is typed already is not shown again.
  local start_col, end_col = col, col
  local range = item.range
  if range and range.start.line == row and range['end'].line == row then
    start_col = byte_col(line, range.start.character, client.offset_encoding)
    end_col = math.max(col, byte_col(line, range['end'].character, client.offset_encoding))
  end
  local typed = line:sub(start_col + 1, col)
  if type(text) ~= 'string' or start_col > col or text:sub(1, #typed) ~= typed or #text == #typed then
    return
  end
  local lines = vim.split(text:sub(#typed + 1), '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'OpenComposerSuggestion' } }
  end
  vim.api.nvim_buf_set_extmark(place.bufnr, ns, row, col, {
    virt_text = { { lines[1], 'OpenComposerSuggestion' } },
    -- Inline virtual text needs 0.10; 0.9 shows the first line at the end of the line.
    virt_text_pos = vim.fn.has('nvim-0.10') == 1 and 'inline' or 'eol',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  shown = vim.tbl_extend('force', place, {
    client_id = client.id,
    item = item,
    text = text,
    start_col = start_col,
    end_col = end_col,
  })
  local id = item.command and item.command.arguments and item.command.arguments[1]
  if id then
    client_mod.execute(client, { command = 'opencomposer.completion.shown', arguments = { id } }, place.bufnr)
  end
end

--- Asks the server for a completion at the cursor now.
function M.request(bufnr)
  M.clear()
  local client = client_mod.clients({ bufnr = bufnr })[1]
  if client == nil or not still_here(here(bufnr)) then
    return
  end
  local place = here(bufnr)
  local mine = generation
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 2 } -- Automatic: not asked for by the user
  local id = client_mod.request(client, 'textDocument/inlineCompletion', params, function(result)
    if mine ~= generation then
      return
    end
    inflight = nil
    local items = result and (result.items or result) or {}
    if items[1] and still_here(place) then
      show(client, place, items[1])
    end
  end, bufnr, function()
    -- A failed completion is not worth a message at every keystroke; the server logs it.
    inflight = nil
  end)
  inflight = id and { client = client, id = id } or nil
end

--- Restarts the pause after which a completion is asked for.
function M.schedule(bufnr)
  M.clear()
  timer = timer or uv.new_timer()
  timer:stop()
  timer:start(options().debounce_ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_buf_is_valid(bufnr) then
      M.request(bufnr)
    end
  end))
end

--- Whether a suggestion is on screen at the cursor.
function M.visible()
  return shown ~= nil and still_here(shown)
end

--- Inserts the suggestion on screen and tells the server it was accepted.
function M.accept()
  local suggestion = shown
  if not M.visible() then
    return
  end
  M.clear()
  local row = suggestion.cursor[1] - 1
  local lines = vim.split(suggestion.text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(suggestion.bufnr, row, suggestion.start_col, row, suggestion.end_col, lines)
  local last = lines[#lines]
  local col = #lines == 1 and suggestion.start_col + #last or #last
  vim.api.nvim_win_set_cursor(0, { row + #lines, col })
  local client = client_mod.by_id(suggestion.client_id)
  if client and suggestion.item.command then
    client_mod.execute(client, suggestion.item.command, suggestion.bufnr)
  end
end

--- Shows completions in a buffer the server is attached to (once per buffer).
function M.attach(bufnr)
  if not options().enabled or vim.b[bufnr].opencomposer_completion then
    return
  end
  vim.b[bufnr].opencomposer_completion = true
  local group = vim.api.nvim_create_augroup('opencomposer.completion.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'InsertEnter', 'TextChangedI', 'CursorMovedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.schedule(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      if timer then
        timer:stop()
      end
      M.clear()
    end,
  })
  local key = require('opencomposer').options.keymaps.accept
  if key then
    vim.keymap.set('i', key, function()
      if M.visible() then
        return "<Cmd>lua require('opencomposer.completion').accept()<CR>"
      end
      return key
    end, { buffer = bufnr, expr = true, desc = 'opencomposer: accept the completion' })
  end
end

return M
