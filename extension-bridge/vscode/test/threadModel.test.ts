import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Item } from '../src/protocol';
import { ThreadModel } from '../src/threadModel';
import { log, message, THREAD, turn } from './support/events';

const started = log(1,
  { type: 'thread.started', thread: { id: THREAD, workspace: '/w', title: 'fix it' } },
  { type: 'turn.started', turn: turn() },
  { type: 'item.started', item: { type: 'user_message', id: 'u', turn_id: 'turn_1', status: 'completed',
    content: [{ type: 'text', text: 'hi' }] } },
  { type: 'item.started', item: message('m') },
);

test('items keep log order and deltas are appended', () => {
  const model = new ThreadModel(THREAD);
  const applied = model.apply(...started, ...log(5,
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'Hel' } },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'lo' } },
  ));
  assert.deepEqual(applied, { items: ['u', 'm'], turns: true });
  assert.deepEqual(model.itemList().map((item) => item.id), ['u', 'm']);
  assert.deepEqual(model.item('m'), message('m', 'Hello'));
  assert.equal(model.thread?.title, 'fix it');
  assert.equal(model.lastSeq, 6);
});

test('command output deltas are appended to the output', () => {
  const model = new ThreadModel(THREAD);
  model.apply(...log(1,
    { type: 'item.started', item: { type: 'command_execution', id: 'c', turn_id: 'turn_1', status: 'in_progress',
      call_id: 'call_1', tool: 'run_terminal', arguments: {}, command: 'ls' } },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'c', delta: { kind: 'output', stream: 'stdout', text: 'a\n' } },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'c', delta: { kind: 'output', stream: 'stderr', text: 'b\n' } },
  ));
  const item = model.item('c');
  assert.equal(item?.type === 'command_execution' && item.output, 'a\nb\n');
});

test('the completed item replaces what the deltas built, in place', () => {
  const model = new ThreadModel(THREAD);
  model.apply(...started, ...log(5,
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'Hel' } },
    { type: 'item.started', item: message('m2') },
    { type: 'item.completed', item: message('m', 'Hello.', 'completed') },
  ));
  assert.deepEqual(model.item('m'), message('m', 'Hello.', 'completed'));
  assert.deepEqual(model.itemList().map((item) => item.id), ['u', 'm', 'm2']);
});

test('the model never mutates the events it was given', () => {
  const model = new ThreadModel(THREAD);
  const events = log(1, { type: 'item.started', item: message('m') },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'x' } });
  model.apply(...events);
  assert.deepEqual(events[0], { type: 'item.started', item: message('m'), seq: 1, thread_id: THREAD });
});

test('repeated events are ignored', () => {
  const model = new ThreadModel(THREAD);
  const delta = log(5, { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'x' } });
  model.apply(...started, ...delta);
  assert.deepEqual(model.apply(...started, ...delta), { items: [], turns: false });
  assert.equal((model.item('m') as { text: string }).text, 'x');
});

test('a gap holds later events back and reports where to replay from', () => {
  const model = new ThreadModel(THREAD);
  model.apply(...started.slice(0, 2));
  const early = log(4, { type: 'item.started', item: message('m') },
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'm', delta: { kind: 'text', text: 'x' } });
  assert.deepEqual(model.apply(...early), { items: [], turns: false, gapAfter: 2 });
  assert.deepEqual(model.itemList(), []);
  // The replay fills the gap (and repeats what was held): all of it applies once, in order.
  assert.deepEqual(model.apply(...started.slice(2), ...early), { items: ['u', 'm'], turns: false });
  assert.deepEqual(model.itemList().map((item) => item.id), ['u', 'm']);
  assert.equal((model.item('m') as { text: string }).text, 'x');
  assert.equal(model.lastSeq, 5);
});

test('a thread first seen mid-log reports a gap from the start', () => {
  const model = new ThreadModel(THREAD);
  assert.equal(model.apply(...log(7, { type: 'item.started', item: message('m') })).gapAfter, 0);
});

test('the running turn ends with turn.completed', () => {
  const model = new ThreadModel(THREAD);
  model.apply(...started);
  assert.equal(model.runningTurn()?.id, 'turn_1');
  assert.deepEqual(model.apply(...log(5, { type: 'turn.completed', turn: turn('interrupted') })),
    { items: [], turns: true });
  assert.equal(model.runningTurn(), undefined);
  assert.deepEqual(model.turns(), [turn('interrupted')]);
});

test('a delta for an unknown item changes nothing', () => {
  const model = new ThreadModel(THREAD);
  assert.deepEqual(model.apply(...log(1,
    { type: 'item.delta', turn_id: 'turn_1', item_id: 'nope', delta: { kind: 'text', text: 'x' } })),
  { items: [], turns: false });
  assert.equal(model.lastSeq, 1);
});

const EDIT: Item = { type: 'file_change', id: 'f', turn_id: 'turn_1', status: 'completed', call_id: 'c',
  tool: 'edit_file', arguments: {}, changes: [{ path: 'a.py', kind: 'update', diff: '' },
    { path: 'b.py', kind: 'add', diff: '' }] };

test('a snapshot replaces what is known, and events after its seq apply on top', () => {
  const model = new ThreadModel(THREAD);
  // An event past the snapshot arrives first, and one the snapshot covers.
  assert.equal(model.apply(...log(2, { type: 'item.started', item: message('m1') }),
    ...log(5, { type: 'item.delta', turn_id: 'turn_1', item_id: 'm2', delta: { kind: 'text', text: '!' } })).gapAfter, 0);
  const applied = model.restore({ id: THREAD, workspace: '/w' },
    [{ ...turn(), items: [message('m1', 'Hi', 'completed'), message('m2', 'Yes')] }], 4);
  assert.deepEqual(applied, { items: ['m1', 'm2'], turns: true });
  assert.deepEqual(model.itemList(), [message('m1', 'Hi', 'completed'), message('m2', 'Yes!')]);
  assert.deepEqual(model.turns(), [turn()]);
  assert.equal(model.lastSeq, 5);
  // An older snapshot changes nothing; events it covers are repeats.
  assert.deepEqual(model.restore({ id: THREAD, workspace: '/w' }, [], 3), { items: [], turns: false });
  assert.deepEqual(model.apply(...log(4, { type: 'item.started', item: message('m3') })), { items: [], turns: false });
  assert.deepEqual(model.itemList().map((item) => item.id), ['m1', 'm2']);
});

test('a finished turn that changed files is revertible at its last item', () => {
  const model = new ThreadModel(THREAD);
  model.apply(...log(1, { type: 'turn.started', turn: turn() }, { type: 'item.completed', item: EDIT },
    { type: 'item.completed', item: message('m', 'done', 'completed') }));
  assert.deepEqual(model.revertibleTurns(), new Map());
  model.apply(...log(4, { type: 'turn.completed', turn: turn('completed') },
    { type: 'turn.started', turn: turn('in_progress', 'turn_2') },
    { type: 'item.completed', item: { ...message('m2', 'no edits', 'completed'), turn_id: 'turn_2' } },
    { type: 'turn.completed', turn: turn('completed', 'turn_2') }));
  assert.deepEqual(model.revertibleTurns(), new Map([['m', { turnId: 'turn_1', files: 2 }]]));
});
