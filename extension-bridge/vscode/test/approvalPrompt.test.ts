import { stub } from './support/vscode';
import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { askInNotification } from '../src/approvalPrompt';
import { approval } from './support/events';

test('the notification asks with the four answers and maps the chosen one', async () => {
  let asked: unknown[] = [];
  stub.window.showWarningMessage = async (...args: unknown[]) => {
    asked = args;
    return 'Approve for this thread';
  };
  assert.deepEqual(await askInNotification(approval('a1')), { decision: 'approve_for_thread' });
  assert.deepEqual(asked, ['opencomposer wants to run run_terminal: rm -rf build', { detail: 'dangerous: ask' },
    'Approve', 'Approve for this thread', 'Deny', 'Stop the turn']);
});

test('a dismissed notification denies, as the server\'s own prompt does', async () => {
  stub.window.showWarningMessage = async () => undefined;
  assert.deepEqual(await askInNotification(approval('a1')),
    { decision: 'deny', message: 'the user dismissed the approval prompt' });
});
