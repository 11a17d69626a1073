import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { cliCommand, initializationOptions, readSettings, serverArgs } from '../src/settings';

const lookup = (values: Record<string, unknown>) => (key: string) => values[key];

test('defaults start `opencomposer lsp` with completion on', () => {
  const settings = readSettings(lookup({}));
  assert.deepEqual(settings, { command: 'opencomposer', args: ['lsp'], completionEnabled: true });
  assert.deepEqual(serverArgs(settings), ['lsp']);
  assert.deepEqual(initializationOptions(settings), { completion: { enabled: true } });
});

test('the engine and the approval policy are flags of the server command', () => {
  const settings = readSettings(lookup({
    'server.command': '/venv/bin/python', 'server.args': ['-m', 'opencomposer', 'lsp'],
    engine: 'openai:http://127.0.0.1:30000/v1', approval: 'ask', 'completion.enabled': false,
  }));
  assert.deepEqual(serverArgs(settings),
    ['-m', 'opencomposer', 'lsp', '--engine', 'openai:http://127.0.0.1:30000/v1', '--approval', 'ask']);
  assert.deepEqual(initializationOptions(settings), { completion: { enabled: false } });
  assert.deepEqual(cliCommand(settings, 'traces', 'list'), ['/venv/bin/python', '-m', 'opencomposer', 'traces', 'list']);
});

test('a TCP server is connected to with its token; unknown approvals and blank engines are dropped', () => {
  const settings = readSettings(lookup({
    'server.tcp': { host: '', port: 7000, token: 's3cret' }, approval: 'maybe', engine: '  ',
  }));
  assert.deepEqual(settings.tcp, { host: '127.0.0.1', port: 7000, token: 's3cret' });
  assert.equal(settings.approval, undefined);
  assert.equal(settings.engine, undefined);
  assert.deepEqual(initializationOptions(settings), { completion: { enabled: true }, token: 's3cret' });
  assert.equal(readSettings(lookup({ 'server.tcp': { port: 0 } })).tcp, undefined);
});
