import { Uri } from './support/vscode';
import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentClient } from '../src/agentClient';
import { ChatView } from '../src/chatView';
import { BeforeContent } from '../src/fileActions';
import { APPROVAL_METHOD, EVENT_METHOD, METHODS } from '../src/protocol';
import { FakeConnection, settle } from './support/connection';
import { approval, log, message, THREAD, turn } from './support/events';

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
  connection.answers.set(METHODS.threadEvents, () => ({
    events: log(1, { type: 'thread.started', thread: { id: THREAD, workspace: '/w', title: 'hi' } }), has_more: false }));
  connection.answers.set(METHODS.turnStart, () => ({ turn: turn() }));
  click({ type: 'send', text: 'hi <b>' });
  await settle();
  await settle();
  assert.deepEqual(connection.sent.map(([method]) => method),
    [METHODS.threadStart, METHODS.threadEvents, METHODS.turnStart]);
  assert.deepEqual(connection.sent[0][1], { workspace: '/w' });
  assert.equal(chat.currentThread, THREAD);

  posted.length = 0;
  for (const event of log(2, { type: 'turn.started', turn: turn() }, { type: 'item.started', item: message('m') },
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
  connection.answers.set(METHODS.threadEvents, () => ({ events: [], has_more: false }));
  chat.show(THREAD);
  for (const event of log(1, { type: 'turn.started', turn: turn() }, { type: 'item.started', item: approval('a1') })) {
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
  connection.answers.set(METHODS.threadEvents, () => ({ events: [], has_more: false }));
  connection.answers.set(METHODS.turnInterrupt, () => ({ turn: turn('interrupted') }));
  chat.show(THREAD);
  connection.notify(EVENT_METHOD, log(1, { type: 'turn.started', turn: turn() })[0]);
  click({ type: 'stop' });
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.turnInterrupt, { thread_id: THREAD, turn_id: 'turn_1' }]);
});

test('a turn started elsewhere (a code action) is shown when nothing runs here', async () => {
  const { connection, chat } = setUp();
  connection.answers.set(METHODS.threadEvents, () => ({ events: [], has_more: false }));
  connection.notify(EVENT_METHOD, { ...log(1, { type: 'turn.started', turn: turn() })[0], thread_id: 'thr_2' });
  assert.equal(chat.currentThread, 'thr_2');
});

test('a steer shows as queued until its item arrives, or as dropped when the turn ends first', async () => {
  const { connection, posted, chat, frame, click } = setUp();
  connection.answers.set(METHODS.threadEvents, () => ({ events: [], has_more: false }));
  connection.answers.set(METHODS.turnSteer, () => ({ item_id: 'u9' }));
  chat.show(THREAD);
  connection.notify(EVENT_METHOD, log(1, { type: 'turn.started', turn: turn() })[0]);
  click({ type: 'send', text: 'shorter' });
  await settle();
  assert.deepEqual(connection.sent.at(-1), [METHODS.turnSteer,
    { thread_id: THREAD, turn_id: 'turn_1', input: [{ type: 'text', text: 'shorter' }] }]);
  assert.deepEqual(posted.at(-1), { type: 'upsert', items: [{ id: 'u9', index: Number.MAX_SAFE_INTEGER,
    html: '<div class="item user steer"><div class="label">steer, queued for the next step</div>'
      + '<div class="text"><p>shorter</p></div></div>' }] });
  connection.notify(EVENT_METHOD, log(2, { type: 'turn.completed', turn: turn('interrupted') })[0]);
  await frame();
  assert.ok(posted.some((message) => message.type === 'upsert' && message.items[0].id === 'u9'
    && message.items[0].html.includes('not delivered')), JSON.stringify(posted));
});
