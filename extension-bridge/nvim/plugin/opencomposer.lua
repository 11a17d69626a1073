-- :OpenComposer {ask|fix|explain|tests|undo|stop|threads}. The plugin starts nothing until
-- require('opencomposer').setup() is called.
if vim.g.loaded_opencomposer then
  return
end
vim.g.loaded_opencomposer = true

vim.api.nvim_create_user_command('OpenComposer', function(opts)
  require('opencomposer.commands').run(opts)
end, {
  nargs = '+',
  range = true,
  desc = 'opencomposer: ask, fix, explain, tests, undo, stop, threads',
  complete = function(arglead, cmdline)
    return require('opencomposer.commands').complete(arglead, cmdline)
  end,
})
