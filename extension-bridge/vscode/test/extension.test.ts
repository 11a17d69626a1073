import { recorded, settings } from './support/anyVscode';
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { activate } from '../src/extension';

const MANIFEST = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));

test('activation registers every contributed command and the chat view, even with no server', async () => {
  settings['server.command'] = '/nonexistent/opencomposer';
  await activate({ subscriptions: [], extensionUri: { path: '/ext' } } as any);
  assert.deepEqual(recorded.commands.sort(),
    MANIFEST.contributes.commands.map((c: { command: string }) => c.command).sort());
  assert.deepEqual(recorded.views, MANIFEST.contributes.views.opencomposer.map((v: { id: string }) => v.id));
  // The server starts after activation; its failure is reported with the command line.
  const reported = () => recorded.errors.some((message) => message.startsWith(
    'opencomposer: the language server did not start (/nonexistent/opencomposer lsp)'));
  for (let waited = 0; !reported() && waited < 5000; waited += 10) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(reported(), recorded.errors.join('\n'));
});

test('the manifest: the engine VS Code and @types/vscode agree, and the entry point is built', () => {
  assert.equal(MANIFEST.engines.vscode, `^${MANIFEST.devDependencies['@types/vscode']}`);
  assert.equal(MANIFEST.main, './out/src/extension.js');
  assert.ok(MANIFEST.activationEvents.includes('onStartupFinished'));
});
