import './support/anyVscode';
import * as assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { CloseAction, ErrorAction } from 'vscode-languageclient/node';
import { MAX_RESTARTS, ServerWatch, WINDOW_MS } from '../src/serverWatch';

const shown: { level: string; message: string }[] = [];
Object.assign(vscode.window, {
  showWarningMessage: async (message: string) => (shown.push({ level: 'warning', message }), undefined),
  showErrorMessage: async (message: string) => (shown.push({ level: 'error', message }), undefined),
});

function channel() {
  const errors: string[] = [];
  return { errors, error: (line: string) => errors.push(line) } as any;
}

async function writeLines(watch: ServerWatch, lines: string[]) {
  const stderr = new PassThrough();
  const log = channel();
  watch.stderr(stderr, log);
  stderr.end(lines.map((line) => `${line}\n`).join(''));
  await new Promise((resolve) => setImmediate(resolve));
  return log.errors as string[];
}

test('each stop is told with the last error the server wrote, and restarted', async () => {
  shown.length = 0;
  let now = 1_000;
  const watch = new ServerWatch(() => undefined, () => now);
  const logged = await writeLines(watch, ['Traceback (most recent call last):', '  ...',
    'opencomposer lsp: the client broke LSP framing (not an LSP header line)']);
  assert.equal(logged.length, 3); // every stderr line reaches the channel, as an error
  const result = watch.closed();
  assert.equal(result.action, CloseAction.Restart);
  assert.equal(result.handled, true);
  assert.deepEqual(shown, [{ level: 'warning', message: 'opencomposer: the language server stopped unexpectedly: '
    + 'opencomposer lsp: the client broke LSP framing (not an LSP header line). Restarting it.' }]);
  // A stop with no recent error line (killed by a signal) says just that.
  now += 60_000;
  assert.equal(watch.closed().message, 'opencomposer: the language server stopped unexpectedly. Restarting it.');
});

test('an old error line does not explain a later stop', async () => {
  let now = 0;
  const watch = new ServerWatch(() => undefined, () => now);
  await writeLines(watch, ['ERROR something long ago']);
  now = 60_000;
  assert.doesNotMatch(watch.closed().message!, /long ago/);
});

test('too many stops in the window leave it stopped, with how to start it again', () => {
  shown.length = 0;
  let now = 0;
  const watch = new ServerWatch(() => undefined, () => now);
  for (let stop = 0; stop < MAX_RESTARTS; stop++, now += 1_000) {
    assert.equal(watch.closed().action, CloseAction.Restart);
  }
  const last = watch.closed();
  assert.equal(last.action, CloseAction.DoNotRestart);
  assert.match(last.message!, /stopped 5 times in 3 minutes.*Restart server/);
  assert.equal(shown.at(-1)?.level, 'error');
  // Stops spread over more than the window keep restarting; so does a user's restart.
  now += WINDOW_MS + 1;
  assert.equal(watch.closed().action, CloseAction.Restart);
  for (let stop = 0; stop < MAX_RESTARTS; stop++) watch.closed();
  watch.reset();
  assert.equal(watch.closed().action, CloseAction.Restart);
});

test('connection errors are retried a few times, then the connection is shut down', () => {
  const watch = new ServerWatch(() => undefined);
  assert.equal(watch.error(new Error('EPIPE'), undefined, 1).action, ErrorAction.Continue);
  assert.equal(watch.error(new Error('EPIPE'), undefined, 4).action, ErrorAction.Shutdown);
});
