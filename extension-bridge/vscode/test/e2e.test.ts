/**
 * The agent client against the real language server (tests/support/scripted_lsp_server.py: the
 * server with a scripted model), over stdio JSON-RPC as VS Code would speak it. Skipped when the
 * repository's Python environment (.venv) is not there, e.g. a Node-only CI job.
 */

import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import { AgentClient, type Connection } from '../src/agentClient';
import { reverseApply } from '../src/patch';
import { EVENT_METHOD, METHODS, type ApprovalAnswer, type ApprovalRequestItem, type Event } from '../src/protocol';
import { itemHtml, itemView } from '../src/render';
import { ThreadModel } from '../src/threadModel';

const REPO = path.resolve(__dirname, '..', '..', '..', '..');
const PYTHON = path.join(REPO, '.venv', 'bin', 'python');
const SERVER = path.join(REPO, 'tests', 'support', 'scripted_lsp_server.py');
const READY = existsSync(PYTHON) && existsSync(SERVER);
const UTIL = 'def twice(x):\n    return x * 2\n';

async function until<T>(what: string, condition: () => T | undefined): Promise<T> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const value = condition();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface Session {
  workspace: string;
  connection: ReturnType<typeof createMessageConnection>;
  agent: AgentClient;
  /** Approvals the server asked; `answer` decides each (undefined: leave it waiting). */
  asked: ApprovalRequestItem[];
}

/** Start the scripted server on a fresh workspace (util.py), initialize, run `body`. */
async function withServer(replies: unknown[], answer: (item: ApprovalRequestItem) => ApprovalAnswer | undefined,
  body: (session: Session) => Promise<void>): Promise<void> {
  const tmp = mkdtempSync(path.join(tmpdir(), 'opencomposer-vscode-'));
  const workspace = path.join(tmp, 'project');
  mkdirSync(workspace);
  writeFileSync(path.join(workspace, 'util.py'), UTIL);
  const script = path.join(tmp, 'script.json');
  writeFileSync(script, JSON.stringify(replies));
  const server = spawn(PYTHON, [SERVER, script], {
    env: { ...process.env, OPENCOMPOSER_HOME: path.join(tmp, 'data'),
      OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE: 'ask' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const connection = createMessageConnection(new StreamMessageReader(server.stdout),
    new StreamMessageWriter(server.stdin));
  const asked: ApprovalRequestItem[] = [];
  const agent: AgentClient = new AgentClient(connection, {
    threadChanged: () => {},
    approvalRequested: (_, item) => {
      asked.push(item);
      const decision = answer(item);
      if (decision) agent.answerApproval(item.id, decision);
    },
    approvalSettled: () => {},
  });
  connection.listen();
  try {
    const uri = pathToFileURL(workspace).href;
    const initialized = await connection.sendRequest('initialize', {
      processId: process.pid, rootUri: uri, workspaceFolders: [{ uri, name: 'project' }],
      capabilities: { experimental: { opencomposer: { protocolVersion: 1 } } },
    }) as { capabilities: { experimental: { opencomposer: { events: string; approvals: string } } } };
    const advertised = initialized.capabilities.experimental.opencomposer;
    assert.deepEqual([advertised.events, advertised.approvals], ['opencomposer/event', 'opencomposer/approval/request']);
    await connection.sendNotification('initialized', {});
    await body({ workspace, connection, agent, asked });
    await connection.sendRequest('shutdown');
    await connection.sendNotification('exit');
  } finally {
    connection.dispose();
    server.kill();
    rmSync(tmp, { recursive: true, force: true });
  }
}

const DOUBLE_BY_ADDING = ['edit_file', { path: 'util.py', old_string: 'x * 2', new_string: 'x + x' }];

test('a turn with an approval, an edit and an answer', { skip: !READY && 'no .venv' }, () => withServer(
  [{ calls: [DOUBLE_BY_ADDING] }, { text: 'Done: `twice` <adds>.' }],
  () => ({ decision: 'approve' }),
  async ({ workspace, connection, agent, asked }) => {
    const thread = await agent.startThread(workspace);
    const model = agent.threads.get(thread.id);
    await agent.send(thread.id, [{ type: 'text', text: 'make twice() add' }]);
    const turn = await until('the turn to end', () => model.turns().find((t) => t.status !== 'in_progress'));

    assert.equal(turn.status, 'completed');
    assert.deepEqual(asked.map((item) => [item.tool, item.action_class]), [['edit_file', 'writes_workspace']]);
    assert.deepEqual(model.itemList().map((item) => [item.type, item.status]), [
      ['user_message', 'completed'], ['file_change', 'completed'], ['approval_request', 'completed'],
      ['agent_message', 'completed'],
    ]);
    const change = model.itemList().find((item) => item.type === 'file_change');
    assert.ok(change?.type === 'file_change');
    // The server's diff, applied backwards to the file it wrote, gives the file back.
    const written = readFileSync(path.join(workspace, 'util.py'), 'utf8');
    assert.equal(written, UTIL.replace('x * 2', 'x + x'));
    assert.equal(reverseApply(written, change.changes[0].diff), UTIL);
    const answer = model.itemList().at(-1)!;
    assert.equal(itemHtml(itemView(answer, { pendingApprovals: new Set() })),
      '<div class="item message"><p>Done: <code>twice</code> &lt;adds&gt;.</p></div>');

    // The live events built the same thread as a replay of its log does.
    const replayed = new ThreadModel(thread.id);
    const log = await connection.sendRequest('opencomposer/thread/events', { thread_id: thread.id, after_seq: 0 }) as any;
    assert.equal(replayed.apply(...log.events).gapAfter, undefined);
    assert.equal(replayed.lastSeq, model.lastSeq);
    assert.deepEqual(replayed.itemList(), model.itemList());
    assert.deepEqual(replayed.turns(), model.turns());
  }));

test('steering a running turn, then stopping it while an approval waits', { skip: !READY && 'no .venv' },
  () => withServer(
    // Steered during the first step; the second step sees the steer and asks for an edit.
    [{ text: 'Looking', calls: [['read_file', { path: 'util.py' }]], delay: 0.2 }, { calls: [DOUBLE_BY_ADDING] }],
    () => undefined,
    async ({ workspace, agent, asked }) => {
      const thread = await agent.startThread(workspace);
      const model = agent.threads.get(thread.id);
      const { turnId } = await agent.send(thread.id, [{ type: 'text', text: 'make twice() add' }]);
      await until('the turn to start', () => model.runningTurn());
      const steered = await agent.send(thread.id, [{ type: 'text', text: 'and keep it short' }]);
      assert.equal(steered.turnId, turnId);
      await until('the approval request', () => asked[0]);
      assert.deepEqual([...agent.pendingApprovals()], [asked[0].id]);

      const interrupted = await agent.interrupt(thread.id, turnId);
      assert.equal(interrupted.status, 'interrupted');
      await until('the turn to end', () => model.turns().find((t) => t.status !== 'in_progress'));
      // Nothing waits for the user any more, and the edit was not made.
      assert.deepEqual([...agent.pendingApprovals()], []);
      assert.equal(readFileSync(path.join(workspace, 'util.py'), 'utf8'), UTIL);
      const steer = model.item(steered.steerItemId!);
      assert.deepEqual(steer?.type === 'user_message' && [steer.steer, steer.content],
        [true, [{ type: 'text', text: 'and keep it short' }]]);
      const waited = model.item(asked[0].id);
      assert.deepEqual(waited?.type === 'approval_request' && [waited.status, waited.decision],
        ['interrupted', null]);
    }));

/** A second client on the same connection (it takes over the event and approval handlers),
 * recording the methods it calls and the seqs of the events it is sent. */
function freshClient(connection: Connection): { agent: AgentClient; methods: string[]; seqs: number[] } {
  const methods: string[] = [];
  const seqs: number[] = [];
  const recording: Connection = {
    sendRequest: (method, params) => (methods.push(method), connection.sendRequest(method, params)),
    onNotification: (method, handler) => connection.onNotification(method, (event: Event) => {
      if (method === EVENT_METHOD) seqs.push(event.seq);
      handler(event);
    }),
    onRequest: (method, handler) => connection.onRequest(method, handler),
  };
  const agent = new AgentClient(recording,
    { threadChanged: () => {}, approvalRequested: () => {}, approvalSettled: () => {} });
  return { agent, methods, seqs };
}

test('a thread opened from its snapshot follows on without gap or repeat', { skip: !READY && 'no .venv' },
  () => withServer(
    [{ calls: [DOUBLE_BY_ADDING] }, { text: 'Done.' }, { text: 'Again.' }],
    () => ({ decision: 'approve' }),
    async ({ workspace, connection, agent }) => {
      const thread = await agent.startThread(workspace);
      await agent.send(thread.id, [{ type: 'text', text: 'make twice() add' }]);
      await until('the first turn to end', () => agent.threads.get(thread.id).turns().find((t) => t.status !== 'in_progress'));
      const known = agent.threads.get(thread.id).lastSeq;

      // As after a restart of the editor: nothing known, the thread picked from the history.
      const { agent: fresh, methods, seqs } = freshClient(connection);
      assert.deepEqual((await fresh.listThreads(workspace)).map((t) => t.id), [thread.id]);
      assert.deepEqual(await fresh.listThreads(path.join(workspace, 'elsewhere')), []);
      await fresh.open(thread.id);
      const model = fresh.threads.get(thread.id);
      assert.equal(model.lastSeq, known);
      assert.deepEqual(model.itemList(), agent.threads.get(thread.id).itemList());
      await fresh.send(thread.id, [{ type: 'text', text: 'once more' }]);
      await until('the second turn to end', () => model.turns().length === 2 && !model.runningTurn());

      assert.deepEqual(methods, [METHODS.threadList, METHODS.threadList, METHODS.threadRead,
        METHODS.threadSubscribe, METHODS.turnStart]);
      // Sent only what followed the snapshot, each event once.
      assert.deepEqual(seqs, Array.from({ length: model.lastSeq - known }, (_, i) => known + 1 + i));
      const replayed = new ThreadModel(thread.id);
      const log = await connection.sendRequest('opencomposer/thread/events', { thread_id: thread.id, after_seq: 0 }) as any;
      replayed.apply(...log.events);
      assert.deepEqual(model.itemList(), replayed.itemList());
      assert.deepEqual(model.turns(), replayed.turns());
    }));

test('undoing a turn puts its files back, unless changed since', { skip: !READY && 'no .venv' }, () => withServer(
  [{ calls: [DOUBLE_BY_ADDING] }, { text: 'Done.' }],
  () => ({ decision: 'approve' }),
  async ({ workspace, agent }) => {
    const thread = await agent.startThread(workspace);
    const { turnId } = await agent.send(thread.id, [{ type: 'text', text: 'make twice() add' }]);
    await until('the turn to end', () => !agent.threads.get(thread.id).runningTurn() && agent.threads.get(thread.id).turns()[0]);
    const file = path.join(workspace, 'util.py');
    const edited = readFileSync(file, 'utf8');

    writeFileSync(file, edited + '# mine\n');
    await assert.rejects(agent.undo(thread.id, 'turn', turnId), (error: any) => error.data?.kind === 'conflict');
    assert.equal(readFileSync(file, 'utf8'), edited + '# mine\n');

    writeFileSync(file, edited);
    const undone = await agent.undo(thread.id, 'turn', turnId);
    assert.deepEqual([undone.restored.map((change) => [change.path, change.kind]), undone.conflicts],
      [[['util.py', 'update']], []]);
    assert.equal(readFileSync(file, 'utf8'), UTIL);
    assert.deepEqual(await agent.undo(thread.id, 'turn', turnId), { restored: [], conflicts: [], unrestorable: [] });
  }));

test('a command named a thread runs its turn there', { skip: !READY && 'no .venv' }, () => withServer(
  [{ text: 'It doubles x.' }],
  () => undefined,
  async ({ workspace, agent }) => {
    const thread = await agent.startThread(workspace);
    const started = await agent.runCommand('opencomposer.explain', {
      uri: pathToFileURL(path.join(workspace, 'util.py')).href,
      range: { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } },
    }, thread.id);
    assert.equal(started.thread_id, thread.id);
    const model = agent.threads.get(thread.id);
    await until('the turn to end', () => model.turns().find((t) => t.id === started.turn_id && t.status !== 'in_progress'));
    assert.deepEqual(model.itemList().map((item) => item.type), ['user_message', 'agent_message']);
    const answer = model.itemList()[1];
    assert.equal(answer.type === 'agent_message' && answer.text, 'It doubles x.');
  }));
