/**
 * Items as the chat view shows them: `itemView` turns an item into a small render model (what
 * to show, which actions it offers), `itemHtml` turns that into markup. Every string that came
 * from the server (model output, paths, commands) goes through `escapeHtml`; markup is built
 * only here, and the webview inserts it as is. Pure logic: no `vscode` here.
 */

import { diffLines, type DiffLine } from './patch';
import type { ApprovalDecision, FileChangeKind, Item, ItemStatus, TodoStatus } from './protocol';

/** Longest command output or tool result shown; the tail is kept (where errors are). */
export const OUTPUT_LIMIT = 20_000;
/** Diff lines shown per file before "N more lines". */
export const DIFF_LINE_LIMIT = 500;

export interface RenderContext {
  /** Approval items this client was asked about and has not answered: they get buttons. */
  pendingApprovals: ReadonlySet<string>;
}

export interface ApprovalButton { decision: ApprovalDecision; label: string }

export const APPROVAL_BUTTONS: readonly ApprovalButton[] = [
  { decision: 'approve', label: 'Approve' },
  { decision: 'approve_for_thread', label: 'Approve for this thread' },
  { decision: 'deny', label: 'Deny' },
  { decision: 'abort', label: 'Stop the turn' },
];

export interface FileView {
  path: string;
  kind: FileChangeKind;
  moveTo?: string;
  lines: DiffLine[];
  /** Diff lines left out (beyond DIFF_LINE_LIMIT). */
  hidden: number;
  /** Offers "Open diff" (there is a diff to show). */
  diff: boolean;
}

export type ItemView =
  | { kind: 'user'; id: string; text: string; files: { path: string; lines?: string }[];
    steer: boolean; context?: string; note?: string }
  | { kind: 'message'; id: string; text: string; streaming: boolean }
  | { kind: 'reasoning'; id: string; text: string; streaming: boolean }
  | { kind: 'command'; id: string; status: ItemStatus; command: string; cwd: string;
    output: string; exitCode?: number; timedOut: boolean; error?: string }
  | { kind: 'fileChange'; id: string; status: ItemStatus; title: string; files: FileView[];
    error?: string }
  | { kind: 'todo'; id: string; status: ItemStatus; todos: { content: string; status: TodoStatus }[] }
  | { kind: 'tool'; id: string; status: ItemStatus; title: string; detail?: string; output: string;
    error?: string }
  | { kind: 'summary'; id: string; text: string; note: string }
  | { kind: 'approval'; id: string; tool: string; actionClass: string; summary: string;
    reason: string; outcome?: string; buttons: readonly ApprovalButton[] }
  | { kind: 'error'; id: string; message: string; errorKind: string };

export function itemView(item: Item, context: RenderContext): ItemView {
  const streaming = item.status === 'in_progress';
  switch (item.type) {
    case 'user_message':
      return {
        kind: 'user', id: item.id, steer: item.steer ?? false,
        text: item.content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n'),
        files: item.content.flatMap((part) => (part.type === 'file'
          ? [{ path: part.path, lines: part.range ? `${part.range.start}-${part.range.end}` : undefined }]
          : [])),
        context: item.context ?? undefined,
      };
    case 'agent_message':
      return { kind: 'message', id: item.id, text: item.text, streaming };
    case 'reasoning':
      return { kind: 'reasoning', id: item.id, text: item.text, streaming };
    case 'command_execution':
      return {
        kind: 'command', id: item.id, status: item.status, command: item.command,
        cwd: item.cwd ?? '.', output: tail(item.output ?? ''), exitCode: item.exit_code ?? undefined,
        timedOut: item.timed_out ?? false, error: item.error?.message,
      };
    case 'file_change':
      return {
        kind: 'fileChange', id: item.id, status: item.status, error: item.error?.message,
        title: `${item.tool} ${String(item.arguments.path ?? '')}`.trim(),
        files: item.changes.map((change) => {
          const lines = diffLines(change.diff);
          return {
            path: change.path, kind: change.kind, moveTo: change.move_to ?? undefined,
            lines: lines.slice(0, DIFF_LINE_LIMIT),
            hidden: Math.max(0, lines.length - DIFF_LINE_LIMIT), diff: change.diff !== '',
          };
        }),
      };
    case 'todo_list':
      return { kind: 'todo', id: item.id, status: item.status, todos: item.todos };
    case 'search':
      return tool(item, `${item.tool} ${JSON.stringify(item.query)}`, item.match_count == null
        ? undefined
        : `${item.match_count} matches in ${item.file_count ?? '?'} files${item.truncated ? ' (truncated)' : ''}`);
    case 'file_read':
      return tool(item, `read ${item.path}`, item.range
        ? `lines ${item.range.start}-${item.range.end}${item.total_lines ? ` of ${item.total_lines}` : ''}`
        : undefined);
    case 'tool_call':
      return tool(item, `${item.tool} ${(item.arguments_text ?? '').slice(0, 100)}`.trim());
    case 'context_summary':
      return {
        kind: 'summary', id: item.id, text: item.text,
        note: `Context summarized (#${item.summary_index ?? 1}${item.method === 'truncation' ? ', truncated' : ''})`
          + (item.tokens_before != null && item.tokens_after != null
            ? `: ${item.tokens_before} -> ${item.tokens_after} tokens` : ''),
      };
    case 'approval_request':
      return {
        kind: 'approval', id: item.id, tool: item.tool, actionClass: item.action_class,
        summary: item.summary, reason: item.reason, outcome: approvalOutcome(item),
        buttons: context.pendingApprovals.has(item.id) && !item.decision ? APPROVAL_BUTTONS : [],
      };
    case 'error':
      return { kind: 'error', id: item.id, message: item.error.message, errorKind: item.error.kind };
  }
}

/**
 * Input sent to a running turn before its item exists: the server logs it when the model takes
 * it at its next step, or when the turn ends first (the next turn's prompt then carries it).
 */
export function queuedSteerView(id: string, text: string): ItemView {
  return { kind: 'user', id, text, files: [], steer: true, note: 'steer, queued for the next step' };
}

/** After the last item of a finished turn that changed files: undo them all (`thread/undo`). */
export function turnEndHtml(turnId: string, files: number): string {
  return `<div class="turn-end"><button data-action="revertTurn" data-turn="${escapeHtml(turnId)}" `
    + `title="Put back the files this turn changed; files changed since are left as they are">Revert turn</button>`
    + ` <span class="detail">${files} ${files === 1 ? 'file' : 'files'} changed</span></div>`;
}

function tool(item: Extract<Item, { call_id: string }>, title: string, detail?: string): ItemView {
  return {
    kind: 'tool', id: item.id, status: item.status, title, detail, output: tail(item.output ?? ''),
    error: item.error?.message,
  };
}

function approvalOutcome(item: Extract<Item, { type: 'approval_request' }>): string | undefined {
  if (!item.decision) return undefined;
  const by = item.decided_by === 'policy' ? ' (by a rule for this thread)'
    : item.decided_by === 'no_client' ? ' (no one could be asked)' : '';
  const label = APPROVAL_BUTTONS.find((b) => b.decision === item.decision)?.label ?? item.decision;
  return `${label}${by}${item.message ? `: ${item.message}` : ''}`;
}

function tail(text: string): string {
  return text.length <= OUTPUT_LIMIT ? text : '…' + text.slice(text.length - OUTPUT_LIMIT);
}

// ------------------------------------------------------------------ markup

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
};

export function itemHtml(view: ItemView): string {
  const e = escapeHtml;
  const id = e(view.id);
  switch (view.kind) {
    case 'user':
      return `<div class="item user${view.steer ? ' steer' : ''}">`
        + (view.steer || view.note ? `<div class="label">${e(view.note ?? 'steer')}</div>` : '')
        + `<div class="text">${formatText(view.text)}</div>`
        + view.files.map((f) => `<button class="chip" data-action="openFile" data-path="${e(f.path)}"`
          + `${f.lines ? ` data-lines="${e(f.lines)}"` : ''}>${e(f.path)}${f.lines ? `:${e(f.lines)}` : ''}</button>`).join('')
        + (view.context ? `<details class="context"><summary>context</summary><pre>${e(view.context)}</pre></details>` : '')
        + '</div>';
    case 'message':
      return `<div class="item message${view.streaming ? ' streaming' : ''}">${formatText(view.text)}</div>`;
    case 'reasoning':
      return `<details class="item reasoning"><summary>${view.streaming ? 'Thinking…' : 'Thought'}</summary>`
        + `<div class="text">${formatText(view.text)}</div></details>`;
    case 'command':
      return `<div class="item command ${e(view.status)}">`
        + `<div class="title"><span class="status">${statusLabel(view.status)}</span> `
        + `<code>$ ${e(view.command)}</code>${view.cwd !== '.' ? ` <span class="cwd">in ${e(view.cwd)}</span>` : ''}`
        + (view.exitCode !== undefined ? ` <span class="exit">exit ${e(String(view.exitCode))}</span>` : '')
        + (view.timedOut ? ' <span class="exit">still running</span>' : '') + '</div>'
        + (view.output ? `<pre class="output">${e(view.output)}</pre>` : '')
        + errorHtml(view.error) + '</div>';
    case 'fileChange':
      return `<div class="item file-change ${e(view.status)}">`
        + `<div class="title"><span class="status">${statusLabel(view.status)}</span> ${e(view.title)}</div>`
        + view.files.map((file, index) => fileHtml(view.id, file, index)).join('')
        + errorHtml(view.error) + '</div>';
    case 'todo':
      return `<div class="item todo"><div class="title">To do</div><ul>`
        + view.todos.map((t) => `<li class="${e(t.status)}">${TODO_MARK[t.status] ?? ''} ${e(t.content)}</li>`).join('')
        + '</ul></div>';
    case 'tool':
      return `<div class="item tool ${e(view.status)}">`
        + `<div class="title"><span class="status">${statusLabel(view.status)}</span> <code>${e(view.title)}</code>`
        + (view.detail ? ` <span class="detail">${e(view.detail)}</span>` : '') + '</div>'
        + (view.output ? `<details><summary>result</summary><pre class="output">${e(view.output)}</pre></details>` : '')
        + errorHtml(view.error) + '</div>';
    case 'summary':
      return `<details class="item summary"><summary>${e(view.note)}</summary>`
        + `<div class="text">${formatText(view.text)}</div></details>`;
    case 'approval':
      return `<div class="item approval${view.buttons.length ? ' pending' : ''}" data-item="${id}">`
        + `<div class="title">Run <code>${e(view.tool)}</code>? <span class="class">${e(view.actionClass)}</span></div>`
        + `<pre class="summary">${e(view.summary)}</pre><div class="reason">${e(view.reason)}</div>`
        + (view.outcome ? `<div class="outcome">${e(view.outcome)}</div>` : '')
        + (view.buttons.length
          ? '<input class="approval-note" type="text" placeholder="Note for the model (with Deny)">'
            + '<div class="buttons">' + view.buttons.map((b) => `<button data-action="approval" `
              + `data-item="${id}" data-decision="${b.decision}">${e(b.label)}</button>`).join('') + '</div>'
          : (view.outcome ? '' : '<div class="outcome">waiting for an answer…</div>'))
        + '</div>';
    case 'error':
      return `<div class="item error"><span class="kind">${e(view.errorKind)}</span> ${e(view.message)}</div>`;
  }
}

function fileHtml(itemId: string, file: FileView, index: number): string {
  const e = escapeHtml;
  const target = `data-item="${e(itemId)}" data-index="${index}"`;
  return `<div class="file"><div class="file-title"><span class="kind">${e(file.kind)}</span> `
    + `<button class="link" data-action="openFile" data-path="${e(file.moveTo ?? file.path)}">${e(file.path)}</button>`
    + (file.moveTo ? ` → ${e(file.moveTo)}` : '')
    + (file.diff ? ` <button data-action="openDiff" ${target}>Open diff</button>` : '')
    + '</div>'
    + (file.lines.length ? '<pre class="diff">' + file.lines.map((line) => `<div class="${line.kind}">`
      + `${DIFF_MARK[line.kind]}${e(line.text)}</div>`).join('') + '</pre>' : '')
    + (file.hidden ? `<div class="more">${file.hidden} more lines</div>` : '')
    + '</div>';
}

const DIFF_MARK: Record<DiffLine['kind'], string> = {
  header: '', hunk: '', add: '+', del: '-', context: ' ', note: '',
};
const TODO_MARK: Record<TodoStatus, string> = { pending: '☐', in_progress: '◐', completed: '☑' };

const STATUS_MARK: Record<ItemStatus, string> = {
  in_progress: '…', completed: '✓', failed: '✗', interrupted: '■', declined: '⊘',
};

function statusLabel(status: ItemStatus): string {
  return STATUS_MARK[status] ?? '';
}

function errorHtml(message: string | undefined): string {
  return message ? `<div class="error">${escapeHtml(message)}</div>` : '';
}

/**
 * Model text as markup: escaped first, then fenced code blocks, inline code and paragraphs.
 * An unclosed fence (still streaming) runs to the end.
 */
export function formatText(text: string): string {
  const parts = text.split(/^```[^\n]*\n?/m);
  return parts.map((part, i) => (i % 2 === 1
    ? `<pre><code>${escapeHtml(part.replace(/\n$/, ''))}</code></pre>`
    : prose(part))).join('');
}

function prose(text: string): string {
  return text.split(/\n{2,}/).filter((p) => p.trim() !== '').map((paragraph) => '<p>'
    + escapeHtml(paragraph.trim()).replace(/`([^`\n]+)`/g, '<code>$1</code>')
      .replace(/\*\*([^*\n]+)\*\*/g, '<strong>$1</strong>').replace(/\n/g, '<br>')
    + '</p>').join('');
}
