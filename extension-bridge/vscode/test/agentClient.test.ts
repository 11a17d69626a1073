import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentClient, EXECUTE_COMMAND } from '../src/agentClient';
import { APPROVAL_METHOD, EVENT_METHOD, METHODS, type Event } from '../src/protocol';
import { FakeConnection, RecordingListener, settle } from './support/connection';
import { approval, log, message, THREAD, turn } from './support/events';

function client(): { connection: FakeConnection; listener: RecordingListener; agent: AgentClient } {
  const connection = new FakeConnection();
  const listener = new RecordingListener();
  return { connection, listener, agent: new AgentClient(connection, listener) };
}

const HISTORY = log(1,
  { type: 'thread.started', thread: { id: THREAD, workspace: '/w' } },
  { type: 'turn.started', turn: turn() },
  { type: 'item.started', item: message('m1') },
);

test('events reach the thread model and the listener', () => {
  const { connection, listener, agent } = client();
  for (const event of HISTORY) connection.notify(EVENT_METHOD, event);
  assert.deepEqual(agent.threads.get(THREAD).itemList(), [message('m1')]);
  assert.deepEqual(listener.calls, [
    ['threadChanged', THREAD, { items: [], turns: true }],
    ['threadChanged', THREAD, { items: ['m1'], turns: false }],
  ]);
});

test('a gap is filled from thread/events, page by page, and held events then apply', async () => {
  const { connection, agent } = client();
  connection.answers.set(METHODS.threadEvents, (params) => (params.after_seq === 0
    ? { events: HISTORY.slice(0, 2), has_more: true }
    : { events: HISTORY.slice(2), has_more: false }));
  // The client first hears of the thread at seq 4 (a turn started by a code action in an old thread).
  connection.notify(EVENT_METHOD, log(4, { type: 'item.started', item: message('m2') })[0]);
  connection.notify(EVENT_METHOD, log(5, { type: 'item.started', item: message('m3') })[0]);
  await settle();
  assert.deepEqual(connection.sent, [
    [METHODS.threadEvents, { thread_id: THREAD, after_seq: 0 }],
    [METHODS.threadEvents, { thread_id: THREAD, after_seq: 2 }],
  ]);
  assert.deepEqual(agent.threads.get(THREAD).itemList().map((item) => item.id), ['m1', 'm2', 'm3']);
  assert.equal(agent.threads.get(THREAD).lastSeq, 5);
});

test('an approval waits for the user and answers the server with the decision', async () => {
  const { connection, listener, agent } = client();
  const answer = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  assert.deepEqual(listener.calls, [['approvalRequested', THREAD, 'a1']]);
  assert.deepEqual([...agent.pendingApprovals()], ['a1']);
  assert.equal(agent.answerApproval('a1', { decision: 'deny', message: 'use make clean' }), true);
  assert.deepEqual(await answer, { decision: 'deny', message: 'use make clean' });
  assert.deepEqual(listener.calls.at(-1), ['approvalSettled', THREAD, 'a1']);
  // Answered once: a second click does nothing.
  assert.equal(agent.answerApproval('a1', { decision: 'approve' }), false);
  assert.deepEqual([...agent.pendingApprovals()], []);
});

test('an approval decided elsewhere stops waiting', async () => {
  const { connection, listener } = client();
  const answer = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  connection.notify(EVENT_METHOD, log(1, { type: 'item.completed',
    item: approval('a1', { status: 'completed', decision: 'approve', decided_by: 'client' }) })[0]);
  assert.deepEqual(await answer, { decision: 'approve' });
  assert.deepEqual(listener.calls.filter((call) => call[0] !== 'threadChanged'),
    [['approvalRequested', THREAD, 'a1'], ['approvalSettled', THREAD, 'a1']]);
});

test('an approval whose turn ended stops waiting', async () => {
  const { connection, agent } = client();
  const answer = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  const other = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a2', { turn_id: 'turn_2' }) });
  const events: Event[] = log(1, { type: 'turn.started', turn: turn() }, { type: 'turn.completed', turn: turn('interrupted') });
  events.forEach((event) => connection.notify(EVENT_METHOD, event));
  assert.deepEqual(await answer, { decision: 'deny', message: 'the turn ended' });
  assert.deepEqual([...agent.pendingApprovals()], ['a2']);
  agent.answerApproval('a2', { decision: 'approve' });
  assert.deepEqual(await other, { decision: 'approve' });
});

test('sending starts a turn, or steers the running one', async () => {
  const { connection, agent } = client();
  connection.answers.set(METHODS.turnStart, () => ({ turn: turn() }));
  connection.answers.set(METHODS.turnSteer, () => ({ item_id: 'u2' }));
  const input = [{ type: 'text' as const, text: 'go' }];
  assert.deepEqual(await agent.send(THREAD, input), { turnId: 'turn_1' });
  connection.notify(EVENT_METHOD, log(1, { type: 'turn.started', turn: turn() })[0]);
  assert.deepEqual(await agent.send(THREAD, input), { turnId: 'turn_1', steerItemId: 'u2' });
  assert.deepEqual(connection.sent, [
    [METHODS.turnStart, { thread_id: THREAD, input }],
    [METHODS.turnSteer, { thread_id: THREAD, turn_id: 'turn_1', input }],
  ]);
});

const SNAPSHOT = {
  thread: { id: THREAD, workspace: '/w', title: 'fix it' },
  turns: [{ ...turn('completed'), items: [message('m1', 'Done.', 'completed')] }],
  last_seq: 4,
};

test('opening a thread reads its snapshot, then follows the events after it without gap or repeat', async () => {
  const { connection, listener, agent } = client();
  connection.answers.set(METHODS.threadRead, () => SNAPSHOT);
  connection.answers.set(METHODS.threadSubscribe, (params) => {
    // The server replays what follows the seq asked for (here one event), then live ones.
    connection.notify(EVENT_METHOD, log(params.after_seq + 1, { type: 'turn.started', turn: turn('in_progress', 'turn_2') })[0]);
    return { last_seq: 5 };
  });
  await agent.open(THREAD);
  connection.notify(EVENT_METHOD, log(6, { type: 'item.started', item: message('m2') })[0]);
  await agent.open(THREAD); // once: the server keeps sending
  await settle();
  assert.deepEqual(connection.sent, [
    [METHODS.threadRead, { thread_id: THREAD }],
    [METHODS.threadSubscribe, { thread_id: THREAD, after_seq: 4 }],
  ]);
  const model = agent.threads.get(THREAD);
  assert.equal(model.thread?.title, 'fix it');
  assert.deepEqual(model.itemList(), [message('m1', 'Done.', 'completed'), message('m2')]);
  assert.deepEqual(model.turns().map((t) => [t.id, t.status]), [['turn_1', 'completed'], ['turn_2', 'in_progress']]);
  assert.equal(model.lastSeq, 6);
  assert.deepEqual(listener.calls, [
    ['threadChanged', THREAD, { items: ['m1'], turns: true }],
    ['threadChanged', THREAD, { items: [], turns: true }],
    ['threadChanged', THREAD, { items: ['m2'], turns: false }],
  ]);
});

test('a thread with a running turn is followed from its first event', async () => {
  // Its snapshot holds the streaming items as they started, without what streamed since.
  const { connection, agent } = client();
  connection.answers.set(METHODS.threadRead, () => ({ ...SNAPSHOT, turns: [{ ...turn(), items: [message('m1')] }] }));
  connection.answers.set(METHODS.threadSubscribe, () => ({ last_seq: 4 }));
  await agent.open(THREAD);
  assert.deepEqual(connection.sent.at(-1), [METHODS.threadSubscribe, { thread_id: THREAD, after_seq: 0 }]);
  assert.deepEqual(agent.threads.get(THREAD).itemList(), []);
});

test('an approval asked again (its events replayed) is answered once, for both requests', async () => {
  const { connection, listener, agent } = client();
  const first = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  const again = connection.request(APPROVAL_METHOD, { thread_id: THREAD, item: approval('a1') });
  assert.deepEqual(listener.calls, [['approvalRequested', THREAD, 'a1']]);
  agent.answerApproval('a1', { decision: 'approve' });
  assert.deepEqual(await Promise.all([first, again]), [{ decision: 'approve' }, { decision: 'approve' }]);
});

test('undo and commands name the thread', async () => {
  const { connection, agent } = client();
  const restored = { restored: [{ path: 'a.py', kind: 'update', diff: '' }], conflicts: ['b.py'],
    unrestorable: [] };
  connection.answers.set(METHODS.threadUndo, () => restored);
  connection.answers.set(EXECUTE_COMMAND, () => ({ thread_id: THREAD, turn_id: 'turn_2' }));
  assert.deepEqual(await agent.undo(THREAD, 'turn', 'turn_1'), restored);
  assert.deepEqual(await agent.runCommand('opencomposer.fix', { uri: 'file:///w/a.py' }, THREAD),
    { thread_id: THREAD, turn_id: 'turn_2' });
  assert.deepEqual(connection.sent, [
    [METHODS.threadUndo, { thread_id: THREAD, scope: 'turn', turn_id: 'turn_1' }],
    [EXECUTE_COMMAND, { command: 'opencomposer.fix', arguments: [{ uri: 'file:///w/a.py', thread_id: THREAD }] }],
  ]);
});
