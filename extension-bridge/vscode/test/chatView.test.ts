import { stub, Uri } from './support/vscode';
import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentClient, EXECUTE_COMMAND } from '../src/agentClient';
import { ChatView } from '../src/chatView';
import { BeforeContent } from '../src/fileActions';
import { APPROVAL_METHOD, EVENT_METHOD, METHODS } from '../src/protocol';
import { turnEndHtml } from '../src/render';
import { FakeConnection, settle } from './support/connection';
import { approval, log, message, THREAD, turn } from './support/events';

/** The server's answers to opening a thread that has only started (seq 1). */
function following(connection: FakeConnection): void {
  connection.answers.set(METHODS.threadRead, () => ({ thread: { id: THREAD, workspace: '/w' }, turns: [], last_seq: 1 }));
  connection.answers.set(METHODS.threadSubscribe, () => ({ last_seq: 1 }));
}

/** A chat view in a fake webview, over an agent client on a fake connection. */
function setUp() {
  const connection = new FakeConnection();
  const posted: any[] = [];
  let receive: (message: unknown) => void = () => {};
  let agent: AgentClient | undefined;
  const chat = new ChatView(Uri.file('/ext') as any, () => agent, new BeforeContent(), () => '/w');
  agent = new AgentClient(connection, {
    threadChanged: (threadId, applied) => chat.threadChanged(threadId, applied),
    approvalRequested: (threadId, item) => chat.approvalChanged(threadId, item.id),
    approvalSettled: (threadId, itemId) => chat.approvalChanged(threadId, itemId),
  });
  const webview = {
    options: {}, html: '', cspSource: 'vscode-webview:',
    asWebviewUri: (uri: Uri) => uri,
    postMessage: async (message: unknown) => posted.push(message),
    onDidReceiveMessage: (handler: (message: unknown) => void) => { receive = handler; },
  };
  chat.resolveWebviewView({ webview, visible: true, onDidDispose: () => {} } as any);
  const frame = () => new Promise((resolve) => setTimeout(resolve, 40));
  return { connection, posted, chat, agent, webview, frame, click: (message: unknown) => receive(message) };
}

test('the webview gets a strict content security policy and its script by nonce', () => {
  const { webview } = setUp();
  const nonce = /script-src 'nonce-([a-z0-9]{32})'/.exec(webview.html)?.[1];
  assert.ok(nonce, webview.html);
  assert.ok(webview.html.includes(`default-src 'none'`));
  assert.ok(!webview.html.includes('unsafe-inline'));
  assert.ok(webview.html.includes(`<script nonce="${nonce}" src="file:///ext/media/chat.js"></script>`));
});

test('the first message starts a thread in the workspace, then a turn; events are drawn', async () => {
  const { connection, posted, chat, frame, click } = setUp();
  connection.answers.set(METHODS.threadStart, () => ({ thread: { id: THREAD, workspace: '/w' } }));
  connection.answers.set(METHODS.turnStart, () => ({ turn: turn() }));
  click({ type: 'send', text: 'hi <b>' });
  await settle();
  await settle();
  // The server sends a thread's events from its start: nothing to read or subscribe to.
  assert.deepEqual(connection.sent.map(([method]) => method), [METHODS.threadStart, METHODS.turnStart]);
  assert.deepEqual(connection.sent[0][1], { workspace: '/w' });
  assert.equal(chat.currentThread, THREAD);

  posted.length = 0;
  for (const event of log(1, { type: 'thread.started', thread: { id: THREAD, workspace: '/w', title: 'hi' } },
    { type: 'turn.started', turn: turn() }, { type: 'item.started', item: message('m') },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: '<b>bold</b>' } })) {
    connection.notify(EVENT_METHOD, event);
  }
  await frame();
  // The turn's status at once; the item's markup once per frame, deltas coalesced.
  assert.deepEqual(posted, [
    { type: 'status', running: true, title: 'hi' },
    { type: 'upsert', items: [{ id: 'm', index: 0,
      html: '<div class="item message streaming"><p>&lt;b&gt;bold&lt;/b&gt;</p></div>' }] },
  ]);
});

test('approval buttons appear when the server asks, and a click answers it', async () => {
  const { connection, posted, chat, frame, click } = setUp();
  following(connection);
  chat.show(THREAD);
  await settle();
  for (const event of log(2, { type: 'turn.started', turn: turn() }, { type: 'item.started', item: approval('a1') })) {
    connection.notify(EVENT_METHOD, event);
  }
  await frame();
  assert.ok(!JSON.stringify(posted.at(-1)).includes('data-action=\\"approval\\"'));
  const answer = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  await frame();
  assert.ok(JSON.stringify(posted.at(-1)).includes('data-decision=\\"approve\\"'));
  click({ type: 'approval', itemId: 'a1', decision: 'abort' });
  assert.deepEqual(await answer, { decision: 'abort' });
  await frame();
  assert.ok(!JSON.stringify(posted.at(-1)).includes('data-action=\\"approval\\"'));
});

test('stop interrupts the running turn of the shown thread', async () => {
  const { connection, chat, click } = setUp();
  following(connection);
  connection.answers.set(METHODS.turnInterrupt, () => ({ turn: turn('interrupted') }));
  chat.show(THREAD);
  await settle();
  connection.notify(EVENT_METHOD, log(2, { type: 'turn.started', turn: turn() })[0]);
  click({ type: 'stop' });
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.turnInterrupt, { thread_id: THREAD, turn_id: 'turn_1' }]);
});

test('a turn started elsewhere (a code action) is shown when nothing runs here', async () => {
  const { connection, chat } = setUp();
  following(connection);
  connection.notify(EVENT_METHOD, { ...log(1, { type: 'turn.started', turn: turn() })[0], thread_id: 'thr_2' });
  assert.equal(chat.currentThread, 'thr_2');
  // Opened like any other thread, to be followed from then on.
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.threadSubscribe, { thread_id: 'thr_2', after_seq: 1 }]);
});

test('a steer shows as queued until its item arrives, at the next step or when the turn ends', async () => {
  const { connection, posted, chat, frame, click } = setUp();
  following(connection);
  connection.answers.set(METHODS.turnSteer, () => ({ item_id: 'u9' }));
  chat.show(THREAD);
  await settle();
  connection.notify(EVENT_METHOD, log(2, { type: 'turn.started', turn: turn() })[0]);
  click({ type: 'send', text: 'shorter' });
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.turnSteer,
    { thread_id: THREAD, turn_id: 'turn_1', input: [{ type: 'text', text: 'shorter' }] }]);
  assert.deepEqual(posted.at(-1), { type: 'upsert', items: [{ id: 'u9', index: Number.MAX_SAFE_INTEGER,
    html: '<div class="item user steer"><div class="label">steer, queued for the next step</div>'
      + '<div class="text"><p>shorter</p></div></div>' }] });
  // The turn ends before another step: the server logs the steer just before turn.completed.
  const steer = { type: 'user_message' as const, id: 'u9', turn_id: 'turn_1', status: 'completed' as const,
    content: [{ type: 'text' as const, text: 'shorter' }], steer: true };
  for (const event of log(3, { type: 'item.completed', item: steer }, { type: 'turn.completed', turn: turn('completed') })) {
    connection.notify(EVENT_METHOD, event);
  }
  await frame();
  assert.deepEqual(posted.at(-1), { type: 'upsert', items: [{ id: 'u9', index: 0,
    html: '<div class="item user steer"><div class="label">steer</div><div class="text"><p>shorter</p></div></div>' }] });
});

test('Revert turn undoes the turn on the server and reports files changed since or not kept', async () => {
  const { connection, posted, chat, frame, click } = setUp();
  following(connection);
  const warnings: string[] = [];
  stub.window.showWarningMessage = async (message: string) => { warnings.push(message); };
  connection.answers.set(METHODS.threadUndo, () => ({
    restored: [{ path: 'a.py', kind: 'update', diff: '' }], conflicts: ['b.py'], unrestorable: ['.env'] }));
  chat.show(THREAD);
  await settle();
  const edit = { type: 'file_change' as const, id: 'f', turn_id: 'turn_1', status: 'completed' as const, call_id: 'c',
    tool: 'apply_patch', arguments: {}, changes: [{ path: 'a.py', kind: 'update' as const, diff: '' },
      { path: 'b.py', kind: 'delete' as const, diff: '' }] };
  for (const event of log(2, { type: 'turn.started', turn: turn() }, { type: 'item.completed', item: edit },
    { type: 'turn.completed', turn: turn('completed') })) {
    connection.notify(EVENT_METHOD, event);
  }
  await frame();
  assert.ok(posted.at(-1).items[0].html.endsWith(turnEndHtml('turn_1', 2)), JSON.stringify(posted.at(-1)));
  click({ type: 'revertTurn', turnId: 'turn_1' });
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.threadUndo, { thread_id: THREAD, scope: 'turn', turn_id: 'turn_1' }]);
  assert.deepEqual(warnings, [
    'Not reverted: .env. Secret files are never kept in checkpoints, so undo cannot put them back.',
    "Reverted 1 of the turn's files; changed since the agent wrote them, so left as they are: b.py."]);
});

test('a command runs in the shown thread, or in a new one when the file is in another folder', async () => {
  const { connection, chat } = setUp();
  following(connection);
  connection.answers.set(METHODS.threadStart, () => ({ thread: { id: 'thr_2', workspace: '/other' } }));
  connection.answers.set(EXECUTE_COMMAND, (params) => ({ thread_id: params.arguments[0].thread_id, turn_id: 'turn_1' }));
  chat.show(THREAD);
  await settle();
  await chat.runCommand('opencomposer.explain', { uri: 'file:///w/a.py' }, '/w/a.py', '/w');
  await chat.runCommand('opencomposer.tests', { uri: 'file:///other/b.py' }, '/other/b.py', '/other');
  assert.deepEqual(connection.sent.slice(2), [
    [EXECUTE_COMMAND, { command: 'opencomposer.explain', arguments: [{ uri: 'file:///w/a.py', thread_id: THREAD }] }],
    [METHODS.threadStart, { workspace: '/other' }],
    [EXECUTE_COMMAND, { command: 'opencomposer.tests', arguments: [{ uri: 'file:///other/b.py', thread_id: 'thr_2' }] }],
  ]);
  assert.equal(chat.currentThread, 'thr_2');
});
