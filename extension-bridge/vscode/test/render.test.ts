import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Item } from '../src/protocol';
import { APPROVAL_BUTTONS, escapeHtml, formatText, itemHtml, itemView, turnEndHtml } from '../src/render';
import { approval, message } from './support/events';

const NONE = { pendingApprovals: new Set<string>() };
const EVIL = '<img src=x onerror="alert(1)">';

/** No tag in the markup other than the ones the renderer writes itself. */
function assertNoInjectedMarkup(html: string): void {
  assert.ok(!html.includes('<img'), html);
  assert.ok(!html.includes('"alert(1)"'), html);
}

test('escapeHtml escapes every character that could open markup or leave an attribute', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&</a>`),
    '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
});

test('model text is escaped, inside code blocks too', () => {
  assert.equal(formatText(`Run \`${EVIL}\`:\n\n\`\`\`html\n${EVIL}\n\`\`\`\nDone **now**`),
    '<p>Run <code>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</code>:</p>'
    + '<pre><code>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</code></pre>'
    + '<p>Done <strong>now</strong></p>');
  // A fence still streaming runs to the end.
  assert.equal(formatText('a\n```\nx < y'), '<p>a</p><pre><code>x &lt; y</code></pre>');
});

test('every item kind escapes what came from the server', () => {
  const base = { turn_id: 'turn_1', status: 'completed' as const, call_id: 'c', arguments: {} };
  const items: Item[] = [
    { ...base, type: 'user_message', id: EVIL, content: [{ type: 'text', text: EVIL },
      { type: 'file', path: EVIL, range: { start: 1, end: 2 } }], context: EVIL },
    message('m', EVIL),
    { ...base, type: 'reasoning', id: 'r', text: EVIL },
    { ...base, type: 'command_execution', id: 'c', tool: 'run_terminal', command: EVIL, cwd: EVIL,
      output: EVIL, error: { kind: 'x', message: EVIL } },
    { ...base, type: 'file_change', id: 'f', tool: 'edit_file', arguments: { path: EVIL },
      changes: [{ path: EVIL, kind: 'update', diff: `@@ -1 +1 @@\n-${EVIL}\n+${EVIL}\n` }] },
    { ...base, type: 'todo_list', id: 't', tool: 'todo_write', todos: [{ content: EVIL, status: 'pending' }] },
    { ...base, type: 'search', id: 's', tool: 'grep', query: EVIL, output: EVIL },
    { ...base, type: 'file_read', id: 'fr', tool: 'read_file', path: EVIL },
    { ...base, type: 'tool_call', id: 'tc', tool: EVIL, arguments_text: EVIL },
    { ...base, type: 'context_summary', id: 'cs', text: EVIL },
    approval('a', { tool: EVIL, summary: EVIL, reason: EVIL, decision: 'deny', message: EVIL }),
    approval(EVIL),
    { ...base, type: 'error', id: 'e', error: { kind: EVIL, message: EVIL } },
  ];
  // Fields the schema makes enums or numbers are escaped too: the client does not trust them.
  items.push({ ...base, type: 'command_execution', id: 'c2', tool: 'run_terminal', command: 'ls',
    status: EVIL as any, exit_code: EVIL as any });
  items.push({ ...base, type: 'file_change', id: 'f2', tool: 'edit_file', status: EVIL as any,
    changes: [{ path: 'a', kind: EVIL as any, diff: '' }] });
  items.push({ ...base, type: 'todo_list', id: 't2', tool: 'todo_write', todos: [{ content: 'x', status: EVIL as any }] });
  for (const item of items) {
    assertNoInjectedMarkup(itemHtml(itemView(item, { pendingApprovals: new Set([EVIL]) })));
  }
});

test('a file change becomes diff lines, with Open diff where there is one', () => {
  const item: Item = {
    type: 'file_change', id: 'f', turn_id: 'turn_1', status: 'completed', call_id: 'c',
    tool: 'edit_file', arguments: { path: 'src/a.py' },
    changes: [
      { path: 'src/a.py', kind: 'update', diff: '--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n' },
      { path: 'new.py', kind: 'add', diff: '--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+y\n' },
      { path: 'img.png', kind: 'delete', diff: '' },
    ],
  };
  assert.deepEqual(itemView(item, NONE), {
    kind: 'fileChange', id: 'f', status: 'completed', error: undefined, title: 'edit_file src/a.py',
    files: [
      { path: 'src/a.py', kind: 'update', moveTo: undefined, hidden: 0, diff: true,
        lines: [
          { kind: 'header', text: '--- a/src/a.py' }, { kind: 'header', text: '+++ b/src/a.py' },
          { kind: 'hunk', text: '@@ -1 +1 @@' },
          { kind: 'del', text: 'x = 1', oldLine: 1 }, { kind: 'add', text: 'x = 2', newLine: 1 },
        ] },
      { path: 'new.py', kind: 'add', moveTo: undefined, hidden: 0, diff: true,
        lines: [
          { kind: 'header', text: '--- /dev/null' }, { kind: 'header', text: '+++ b/new.py' },
          { kind: 'hunk', text: '@@ -0,0 +1 @@' }, { kind: 'add', text: 'y', newLine: 1 },
        ] },
      { path: 'img.png', kind: 'delete', moveTo: undefined, hidden: 0, diff: false, lines: [] },
    ],
  });
  const html = itemHtml(itemView(item, NONE));
  assert.ok(html.includes('<div class="del">-x = 1</div><div class="add">+x = 2</div>'), html);
  assert.ok(html.includes('<button data-action="openDiff" data-item="f" data-index="1">Open diff</button>'), html);
  assert.ok(!html.includes('data-index="2"'), html);
});

test('a turn that changed files ends with Revert turn', () => {
  assert.equal(turnEndHtml(EVIL, 2), '<div class="turn-end"><button data-action="revertTurn" '
    + 'data-turn="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" title="Put back the files this turn changed; '
    + 'files changed since are left as they are">Revert turn</button> <span class="detail">2 files changed</span></div>');
});

test('an approval gets buttons only while this client is asked', () => {
  const asked = { pendingApprovals: new Set(['a']) };
  assert.deepEqual(itemView(approval('a'), asked), {
    kind: 'approval', id: 'a', tool: 'run_terminal', actionClass: 'dangerous', summary: 'rm -rf build',
    reason: 'dangerous: ask', outcome: undefined, buttons: APPROVAL_BUTTONS,
  });
  assert.deepEqual(APPROVAL_BUTTONS.map((b) => b.decision), ['approve', 'approve_for_thread', 'deny', 'abort']);
  const html = itemHtml(itemView(approval('a'), asked));
  assert.ok(html.includes('<button data-action="approval" data-item="a" data-decision="approve_for_thread">'
    + 'Approve for this thread</button>'), html);
  // Not asked (yet, or another client answers): no buttons, a note instead.
  assert.ok(itemHtml(itemView(approval('a'), NONE)).includes('waiting for an answer'));
  // Decided: the outcome, and no buttons even if a request is still open.
  const decided = itemView(approval('a', { decision: 'deny', decided_by: 'client', message: 'not now' }), asked);
  assert.deepEqual(decided.kind === 'approval' && [decided.outcome, decided.buttons], ['Deny: not now', []]);
  const byPolicy = itemView(approval('a', { decision: 'approve_for_thread', decided_by: 'policy' }), NONE);
  assert.equal(byPolicy.kind === 'approval' && byPolicy.outcome, 'Approve for this thread (by a rule for this thread)');
});

test('reasoning and summaries are collapsed; todos keep their status', () => {
  const base = { turn_id: 'turn_1', status: 'completed' as const };
  assert.match(itemHtml(itemView({ ...base, type: 'reasoning', id: 'r', text: 'hm' }, NONE)),
    /^<details class="item reasoning"><summary>Thought<\/summary>/);
  assert.match(itemHtml(itemView({ ...base, type: 'context_summary', id: 's', text: 'so far', summary_index: 2,
    method: 'truncation', tokens_before: 9000, tokens_after: 1200 }, NONE)),
  /^<details class="item summary"><summary>Context summarized \(#2, truncated\): 9000 -&gt; 1200 tokens<\/summary>/);
  assert.equal(itemHtml(itemView({ ...base, type: 'todo_list', id: 't', call_id: 'c', tool: 'todo_write', arguments: {},
    todos: [{ content: 'read', status: 'completed' }, { content: 'fix', status: 'in_progress' }] }, NONE)),
  '<div class="item todo"><div class="title">To do</div><ul><li class="completed">☑ read</li>'
    + '<li class="in_progress">◐ fix</li></ul></div>');
});

test('a command shows its line, exit code and output tail', () => {
  const view = itemView({ type: 'command_execution', id: 'c', turn_id: 't', status: 'failed', call_id: 'c',
    tool: 'run_terminal', arguments: {}, command: 'pytest -x', cwd: 'pkg', exit_code: 1,
    output: 'x'.repeat(30_000) + 'END' }, NONE);
  assert.equal(view.kind === 'command' && view.output.length, 20_001);
  assert.ok(view.kind === 'command' && view.output.endsWith('END'));
  assert.match(itemHtml(view), /<code>\$ pytest -x<\/code> <span class="cwd">in pkg<\/span> <span class="exit">exit 1<\/span>/);
});
