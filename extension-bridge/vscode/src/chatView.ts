/**
 * The chat view: one thread at a time, rendered by `render.ts` and shown by media/chat.js.
 *
 * The webview sends what the user does (send, stop, approve, open a diff...); the view posts
 * markup for the items that changed (coalesced, so a streaming answer costs one message per
 * frame, not per token) and whether a turn runs. Sending while a turn runs steers it. The
 * editor's Fix / Explain / Write tests run in the shown thread; a turn that starts in another
 * thread this client follows (a code action) is shown when nothing runs in the current one. A
 * finished turn that changed files offers "Revert turn" (the server's `thread/undo`).
 */

import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { AgentClient } from './agentClient';
import { BeforeContent, openDiff, openFile } from './fileActions';
import type { ApprovalDecision, Item, UserInput } from './protocol';
import { itemHtml, itemView, queuedSteerView, turnEndHtml, type RenderContext } from './render';
import type { Applied, ThreadModel } from './threadModel';

export const VIEW_ID = 'opencomposer.chat';

/** Longest wait before changed items reach the webview; about one frame. */
const FLUSH_MS = 16;

type FromWebview =
  | { type: 'ready' }
  | { type: 'send'; text: string }
  | { type: 'stop' }
  | { type: 'newThread' }
  | { type: 'history' }
  | { type: 'approval'; itemId: string; decision: ApprovalDecision; message?: string }
  | { type: 'openFile'; path: string; lines?: string }
  | { type: 'openDiff'; itemId: string; index: number }
  | { type: 'revertTurn'; turnId: string };

export class ChatView implements vscode.WebviewViewProvider {
  private view?: vscode.WebviewView;
  private threadId?: string;
  private readonly dirty = new Set<string>();
  /** Steers of the shown thread not yet in its log (until the model's next step or the turn's
   * end), by their future item id: their text. */
  private readonly queued = new Map<string, string>();
  private flushTimer?: ReturnType<typeof setTimeout>;

  constructor(private readonly extensionUri: vscode.Uri, private readonly agent: () => AgentClient | undefined,
    private readonly before: BeforeContent, private readonly workspaceFolder: () => string | undefined) {}

  get visible(): boolean {
    return this.view?.visible ?? false;
  }

  get currentThread(): string | undefined {
    return this.threadId;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message).catch((error) => {
      void this.post({ type: 'error', message: String(error?.message ?? error) });
    }));
    view.onDidDispose(() => { this.view = undefined; });
  }

  // ------------------------------------------------------------------ from the agent

  threadChanged(threadId: string, applied: Applied): void {
    const model = this.agent()?.threads.get(threadId);
    if (threadId !== this.threadId) {
      const current = this.threadId === undefined ? undefined : this.agent()?.threads.get(this.threadId);
      if (applied.turns && model?.runningTurn() && !current?.runningTurn()) this.show(threadId);
      return;
    }
    applied.items.forEach((id) => {
      this.dirty.add(id);
      this.queued.delete(id);
    });
    if (applied.turns) {
      // A turn ended: its last item gets "Revert turn".
      model?.revertibleTurns().forEach((_, id) => this.dirty.add(id));
      this.postStatus();
    }
    this.schedule();
  }

  /** An approval was asked or settled: redraw its item (buttons come and go). */
  approvalChanged(threadId: string, itemId: string): void {
    this.threadChanged(threadId, { items: [itemId], turns: false });
  }

  /** Show a thread (undefined: a new one, started with the first message). */
  show(threadId: string | undefined): void {
    this.threadId = threadId;
    this.dirty.clear();
    this.queued.clear();
    this.reset();
    if (threadId) {
      this.agent()?.open(threadId).catch((error) => {
        void this.post({ type: 'error', message: `could not open the thread: ${error?.message ?? error}` });
      });
    }
  }

  reveal(): void {
    void vscode.commands.executeCommand(`${VIEW_ID}.focus`);
  }

  /** Send user input to the current thread (a new one in `workspace` if there is none). */
  async send(input: UserInput[], workspace?: string): Promise<void> {
    const agent = this.requireAgent();
    const threadId = this.threadId ?? await this.startThread(workspace);
    const { steerItemId } = await agent.send(threadId, input);
    if (steerItemId && threadId === this.threadId && !agent.threads.get(threadId).item(steerItemId)) {
      const text = input.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n');
      this.queued.set(steerItemId, text);
      void this.post({ type: 'upsert', items: [this.queuedItem(steerItemId, text)] });
    }
  }

  /**
   * Run a server command (Fix, Explain, Write tests) on a file in the shown thread, or in a
   * new one when the shown thread works in another folder than the file.
   */
  async runCommand(command: string, argument: object, file: string, workspace?: string): Promise<void> {
    const agent = this.requireAgent();
    const root = this.threadId ? agent.threads.get(this.threadId).thread?.workspace : undefined;
    const inside = root !== undefined && !path.relative(root, file).startsWith('..')
      && !path.isAbsolute(path.relative(root, file));
    const threadId = inside ? this.threadId! : await this.startThread(workspace);
    await agent.runCommand(command, argument, threadId);
  }

  async stop(): Promise<boolean> {
    const agent = this.agent();
    const running = this.threadId ? agent?.threads.get(this.threadId).runningTurn() : undefined;
    if (!agent || !running) return false;
    await agent.interrupt(this.threadId!, running.id);
    return true;
  }

  // ------------------------------------------------------------------ from the webview

  private async receive(message: FromWebview): Promise<void> {
    switch (message.type) {
      case 'ready':
        return this.reset();
      case 'send':
        if (message.text.trim()) await this.send([{ type: 'text', text: message.text }]);
        return;
      case 'stop':
        await this.stop();
        return;
      case 'newThread':
        return this.show(undefined);
      case 'history':
        await vscode.commands.executeCommand('opencomposer.chat.history');
        return;
      case 'approval':
        this.requireAgent().answerApproval(message.itemId,
          { decision: message.decision, ...(message.message ? { message: message.message } : {}) });
        return;
      case 'openFile':
        return openFile(this.root(), message.path, message.lines);
      case 'openDiff': {
        const item = this.threadId ? this.agent()?.threads.get(this.threadId).item(message.itemId) : undefined;
        const change = item?.type === 'file_change' ? item.changes[message.index] : undefined;
        if (change) await openDiff(this.root(), change, this.before);
        return;
      }
      case 'revertTurn':
        return this.revertTurn(message.turnId);
    }
  }

  /** Undo a turn's edits (the server's undo: adds, deletes and moves too), and say how it went. */
  private async revertTurn(turnId: string): Promise<void> {
    if (!this.threadId) return;
    const { restored, conflicts, unrestorable } =
      await this.requireAgent().undo(this.threadId, 'turn', turnId);
    const files = (paths: string[]) => paths.join(', ');
    if (unrestorable.length) {
      void vscode.window.showWarningMessage(`Not reverted: ${files(unrestorable)}. Secret files `
        + 'are never kept in checkpoints, so undo cannot put them back.');
    }
    if (conflicts.length) {
      void vscode.window.showWarningMessage(`Reverted ${restored.length} of the turn's files; `
        + `changed since the agent wrote them, so left as they are: ${files(conflicts)}.`);
    } else {
      void vscode.window.showInformationMessage(restored.length
        ? `Reverted ${files(restored.map((change) => change.path))}.`
        : 'Nothing to revert: the turn\'s edits were undone already.');
    }
  }

  private async startThread(workspace?: string): Promise<string> {
    const folder = workspace ?? this.workspaceFolder();
    if (!folder) throw new Error('Open a folder first: opencomposer works in a workspace folder.');
    const thread = await this.requireAgent().startThread(folder);
    this.show(thread.id);
    return thread.id;
  }

  // ------------------------------------------------------------------ to the webview

  private reset(): void {
    const agent = this.agent();
    const model = this.threadId && agent ? agent.threads.get(this.threadId) : undefined;
    const render = model && this.renderer(model);
    void this.post({
      type: 'reset',
      items: [
        ...(model?.itemList() ?? []).map((item) => ({ id: item.id, html: render!(item) })),
        ...[...this.queued].map(([id, text]) => this.queuedItem(id, text)),
      ],
    });
    this.postStatus();
  }

  /** An item's markup, with "Revert turn" after the last item of a turn that changed files. */
  private renderer(model: ThreadModel): (item: Item) => string {
    const context: RenderContext = { pendingApprovals: this.agent()?.pendingApprovals() ?? new Set() };
    const turnEnds = model.revertibleTurns();
    return (item) => {
      const end = turnEnds.get(item.id);
      return itemHtml(itemView(item, context)) + (end ? turnEndHtml(end.turnId, end.files) : '');
    };
  }

  private queuedItem(id: string, text: string): { id: string; index: number; html: string } {
    // Index past the end: after everything shown.
    return { id, index: Number.MAX_SAFE_INTEGER, html: itemHtml(queuedSteerView(id, text)) };
  }

  private schedule(): void {
    this.flushTimer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  private flush(): void {
    this.flushTimer = undefined;
    const agent = this.agent();
    if (!agent || !this.threadId) return;
    const model = agent.threads.get(this.threadId);
    const render = this.renderer(model);
    const items = [...this.dirty].flatMap((id) => {
      const item = model.item(id);
      return item ? [{ id, index: model.indexOf(id), html: render(item) }] : [];
    }).sort((a, b) => a.index - b.index);
    this.dirty.clear();
    if (items.length) void this.post({ type: 'upsert', items });
  }

  private postStatus(): void {
    const model = this.threadId ? this.agent()?.threads.get(this.threadId) : undefined;
    void this.post({
      type: 'status',
      running: model?.runningTurn() !== undefined,
      title: model?.thread?.title ?? (this.threadId ? this.threadId : 'New thread'),
    });
  }

  private post(message: unknown): Thenable<boolean> | undefined {
    return this.view?.webview.postMessage(message);
  }

  private root(): string {
    const model = this.threadId ? this.agent()?.threads.get(this.threadId) : undefined;
    const root = model?.thread?.workspace ?? this.workspaceFolder();
    if (!root) throw new Error('no workspace folder');
    return root;
  }

  private requireAgent(): AgentClient {
    const agent = this.agent();
    if (!agent) throw new Error('The opencomposer server is not running.');
    return agent;
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = randomBytes(16).toString('hex');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    // No inline script or style, and no event handler attributes: markup from the server side
    // is escaped (render.ts), and this policy would stop it running even if it were not.
    return `<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${style}" rel="stylesheet"></head>
<body>
<header><span id="title">New thread</span>
<button id="history" title="Open a previous thread">History</button>
<button id="new" title="Start a new thread">New</button></header>
<main id="items"></main>
<footer><div id="error" hidden></div>
<textarea id="input" rows="3" placeholder="Ask opencomposer (Enter to send, Shift+Enter for a new line)"></textarea>
<div class="row"><button id="send">Send</button><button id="stop" hidden>Stop</button></div></footer>
<script nonce="${nonce}" src="${script}"></script>
</body></html>`;
  }
}
