-- The chat buffer: one scratch buffer per thread (`opencomposer://thread/<id>`), redrawn whole
-- (render.lua) from the thread's state whenever events change it, at most once per batch of
-- events, and the window it is shown in. Fold level 1 (reasoning, attached context) starts
-- closed.

local render = require('opencomposer.render')

local M = {}

local ns = vim.api.nvim_create_namespace('opencomposer.chat')
local buffers = {} -- thread id -> buffer
local folds = {} -- buffer -> fold level of each line
local pending = {} -- thread id -> true while a redraw is scheduled

local function options()
  return require('opencomposer').options.chat
end

--- Fold level of line `lnum` of the current buffer (the chat windows' 'foldexpr').
function M.foldexpr(lnum)
  local levels = folds[vim.api.nvim_get_current_buf()]
  return levels and levels[lnum] or 0
end

local function draw(thread_id)
  pending[thread_id] = nil
  local buf = buffers[thread_id]
  if buf == nil or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local thread = require('opencomposer').state.threads[thread_id]
  if thread == nil then
    return
  end
  local out = render.render(thread, options().output_lines)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local row = vim.api.nvim_win_get_cursor(win)[1]
    following[win] = win ~= vim.api.nvim_get_current_win() or row == vim.api.nvim_buf_line_count(buf)
  end
  folds[buf] = out.folds
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, out.lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, mark in ipairs(out.highlights) do
    vim.api.nvim_buf_set_extmark(buf, ns, mark[1], 0, {
      end_col = #out.lines[mark[1] + 1],
      hl_group = mark[2],
    })
  end
  for win, follow in pairs(following) do
    if follow then
      vim.api.nvim_win_set_cursor(win, { #out.lines, 0 })
    end
  end
end

--- Redraws the thread's chat buffer, if it has one, once the current batch of events is done.
function M.refresh(thread_id)
  if buffers[thread_id] == nil or pending[thread_id] then
    return
  end
  pending[thread_id] = true
  vim.schedule(function()
    draw(thread_id)
  end)
end

--- The chat buffer of a thread (created when missing).
function M.buffer(thread_id)
  local buf = buffers[thread_id]
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  buffers[thread_id] = buf
  vim.api.nvim_buf_set_name(buf, 'opencomposer://thread/' .. thread_id)
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].filetype = 'opencomposer'
  vim.b[buf].opencomposer_thread = thread_id
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    callback = function()
      buffers[thread_id], folds[buf] = nil, nil
    end,
  })
  require('opencomposer.commands').chat_keymaps(buf)
  draw(thread_id)
  return buf
end

local function style(win)
  local wo = vim.wo[win]
  wo.wrap, wo.linebreak = true, true
  wo.number, wo.relativenumber, wo.signcolumn = false, false, 'no'
  wo.foldmethod, wo.foldlevel, wo.foldenable = 'expr', 0, true
  wo.foldexpr = "v:lua.require'opencomposer.chat'.foldexpr(v:lnum)"
end

local function open_window(buf)
  local opts = options()
  if opts.position == 'float' then
    local width = math.min(opts.width, vim.o.columns - 4)
    local height = math.floor(vim.o.lines * 0.8)
    return vim.api.nvim_open_win(buf, true, {
      relative = 'editor',
      width = width,
      height = height,
      row = math.floor((vim.o.lines - height) / 2),
      col = math.floor((vim.o.columns - width) / 2),
      border = 'rounded',
      title = ' opencomposer ',
    })
  end
  if opts.position == 'bottom' then
    vim.cmd(('botright %dsplit'):format(opts.height))
  else
    vim.cmd(('botright %dvsplit'):format(opts.width))
  end
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  return win
end

--- Shows the thread's chat: in the window already showing a chat, else in a new split (or
--- float). `focus`: move the cursor there (else it stays where it was).
function M.open(thread_id, focus)
  local buf = M.buffer(thread_id)
  draw(thread_id)
  local previous = vim.api.nvim_get_current_win()
  local win
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.bo[vim.api.nvim_win_get_buf(w)].filetype == 'opencomposer' then
      win = w
      break
    end
  end
  if win then
    vim.api.nvim_win_set_buf(win, buf)
  else
    win = open_window(buf)
  end
  style(win)
  vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
  if focus then
    vim.api.nvim_set_current_win(win)
  elseif vim.api.nvim_win_is_valid(previous) and vim.api.nvim_win_get_config(win).relative == '' then
    vim.api.nvim_set_current_win(previous)
  end
  return buf
end

--- Whether a window of the current tab page shows the thread's chat.
function M.visible(thread_id)
  local buf = buffers[thread_id]
  for _, win in ipairs(buf and vim.fn.win_findbuf(buf) or {}) do
    if vim.api.nvim_win_get_tabpage(win) == vim.api.nvim_get_current_tabpage() then
      return true
    end
  end
  return false
end

return M
