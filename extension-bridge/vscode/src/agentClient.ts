/**
 * The client side of the agent protocol over one connection to the language server: a thread
 * is opened from its snapshot (`thread/read`) and followed from the seq it was taken at
 * (`thread/subscribe`); events go into per-thread models (a gap in `seq` is filled by replaying
 * the log with `thread/events`); approvals asked by the server wait until the user answers (in
 * the chat view or a notification) or the question is settled elsewhere; the client -> server
 * methods are typed. No `vscode` import: the connection is anything with sendRequest /
 * onNotification / onRequest (the LanguageClient, or a stub in tests).
 */

import {
  APPROVAL_METHOD, EVENT_METHOD, METHODS,
  type ApprovalAnswer, type ApprovalRequestItem, type ApprovalRequestParams, type Event,
  type Thread, type ThreadEventsParams, type ThreadEventsResponse, type ThreadListParams,
  type ThreadListResponse, type ThreadReadParams, type ThreadReadResponse, type ThreadStartParams,
  type ThreadStartResponse, type ThreadSubscribeParams, type ThreadSubscribeResponse,
  type ThreadUndoParams, type ThreadUndoResponse, type Turn, type TurnInterruptParams,
  type TurnInterruptResponse, type TurnStartParams, type TurnStartResponse, type TurnSteerParams,
  type TurnSteerResponse, type UndoScope, type UserInput,
} from './protocol';
import { ThreadStore, type Applied } from './threadModel';

/** The LSP request that runs a server command (`opencomposer.fix`, ...). */
export const EXECUTE_COMMAND = 'workspace/executeCommand';

export interface Connection {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
  onNotification(method: string, handler: (params: any) => void): unknown;
  onRequest(method: string, handler: (params: any) => Promise<unknown>): unknown;
}

export interface AgentListener {
  /** Events were applied to a thread's model. */
  threadChanged(threadId: string, applied: Applied): void;
  /** The server asks whether a tool call may run; answer with `AgentClient.answerApproval`. */
  approvalRequested(threadId: string, item: ApprovalRequestItem): void;
  /** An approval no longer waits (answered here or elsewhere, or its turn ended). */
  approvalSettled(threadId: string, itemId: string): void;
}

interface Pending {
  threadId: string;
  turnId: string;
  resolve: (answer: ApprovalAnswer) => void;
}

export class AgentClient {
  readonly threads = new ThreadStore();
  private readonly pending = new Map<string, Pending>();
  private readonly filling = new Map<string, Promise<void>>();
  /** Threads the server sends the events of (opened, started, or a turn started here). */
  private readonly followed = new Set<string>();

  constructor(private readonly connection: Connection, private readonly listener: AgentListener,
    private readonly log: (message: string) => void = () => {}) {
    connection.onNotification(EVENT_METHOD, (event: Event) => this.onEvent(event));
    connection.onRequest(APPROVAL_METHOD, (params: ApprovalRequestParams) => this.onApproval(params));
  }

  // ------------------------------------------------------------------ server -> client

  onEvent(event: Event): void {
    this.applied(event.thread_id, this.threads.get(event.thread_id).apply(event));
    if ((event.type === 'item.started' || event.type === 'item.completed')
        && event.item.type === 'approval_request' && event.item.decision) {
      this.settle(event.item.id, { decision: event.item.decision });
    } else if (event.type === 'turn.completed') {
      // An approval still waiting when its turn ended will never be used.
      for (const [itemId, pending] of this.pending) {
        if (pending.turnId === event.turn.id) this.settle(itemId, { decision: 'deny', message: 'the turn ended' });
      }
    }
  }

  onApproval(params: ApprovalRequestParams): Promise<ApprovalAnswer> {
    const { thread_id: threadId, item } = params;
    // Asked again (the server replays a subscribed thread's events): one answer answers both.
    const earlier = this.pending.get(item.id);
    const answer = new Promise<ApprovalAnswer>((resolve) => {
      this.pending.set(item.id, { threadId, turnId: item.turn_id,
        resolve: earlier ? (value) => { earlier.resolve(value); resolve(value); } : resolve });
    });
    if (!earlier) this.listener.approvalRequested(threadId, item);
    return answer;
  }

  /** The user's answer to a waiting approval; false when nothing waits for it any more. */
  answerApproval(itemId: string, answer: ApprovalAnswer): boolean {
    return this.settle(itemId, answer);
  }

  /** Approvals waiting for the user, by item id. */
  pendingApprovals(): ReadonlySet<string> {
    return new Set(this.pending.keys());
  }

  private settle(itemId: string, answer: ApprovalAnswer): boolean {
    const pending = this.pending.get(itemId);
    if (pending === undefined) return false;
    this.pending.delete(itemId);
    pending.resolve(answer);
    this.listener.approvalSettled(pending.threadId, itemId);
    return true;
  }

  private applied(threadId: string, applied: Applied): void {
    if (applied.items.length > 0 || applied.turns) this.listener.threadChanged(threadId, applied);
    if (applied.gapAfter !== undefined) {
      this.log(`thread ${threadId}: events missing after seq ${applied.gapAfter}; replaying`);
      void this.fill(threadId).catch((error) => this.log(`thread ${threadId}: replay failed: ${error}`));
    }
  }

  // ------------------------------------------------------------------ client -> server

  /**
   * Follow a thread from now on: its snapshot when nothing of it is known, then its events
   * after what is known. Once per thread and connection: the server keeps sending them.
   */
  async open(threadId: string): Promise<void> {
    if (this.followed.has(threadId)) return;
    this.followed.add(threadId);
    try {
      const model = this.threads.get(threadId);
      if (model.lastSeq === 0) {
        const snapshot = await this.connection.sendRequest<ThreadReadResponse>(METHODS.threadRead,
          { thread_id: threadId } satisfies ThreadReadParams);
        // A running turn's items are stored as they started, without what streamed since;
        // then the events from the start are sent instead, and rebuild them.
        if (!snapshot.turns.some((turn) => turn.status === 'in_progress')) {
          this.applied(threadId, model.restore(snapshot.thread, snapshot.turns, snapshot.last_seq));
        }
      }
      await this.connection.sendRequest<ThreadSubscribeResponse>(METHODS.threadSubscribe,
        { thread_id: threadId, after_seq: model.lastSeq } satisfies ThreadSubscribeParams);
    } catch (error) {
      this.followed.delete(threadId);
      throw error;
    }
  }

  /** Fill a gap in a thread's model from its log. */
  private fill(threadId: string): Promise<void> {
    let running = this.filling.get(threadId);
    if (running === undefined) {
      running = this.replay(threadId).finally(() => this.filling.delete(threadId));
      this.filling.set(threadId, running);
    }
    return running;
  }

  private async replay(threadId: string): Promise<void> {
    const model = this.threads.get(threadId);
    for (;;) {
      const page = await this.connection.sendRequest<ThreadEventsResponse>(METHODS.threadEvents,
        { thread_id: threadId, after_seq: model.lastSeq } satisfies ThreadEventsParams);
      const applied = model.apply(...page.events);
      if (applied.items.length > 0 || applied.turns) this.listener.threadChanged(threadId, applied);
      if (!page.has_more || page.events.length === 0) return;
    }
  }

  /** A new thread; the server sends its events from the start. */
  async startThread(workspace: string): Promise<Thread> {
    const response = await this.connection.sendRequest<ThreadStartResponse>(METHODS.threadStart,
      { workspace } satisfies ThreadStartParams);
    this.followed.add(response.thread.id);
    this.threads.get(response.thread.id).thread ??= response.thread;
    return response.thread;
  }

  /** The threads of a workspace folder (all, without one), most recently updated first. */
  async listThreads(workspace?: string): Promise<Thread[]> {
    const response = await this.connection.sendRequest<ThreadListResponse>(METHODS.threadList,
      (workspace ? { workspace } : {}) satisfies ThreadListParams);
    return response.data;
  }

  /** Start a turn; the server sends the thread's events from then on, if it did not already. */
  async startTurn(threadId: string, input: UserInput[]): Promise<Turn> {
    const response = await this.connection.sendRequest<TurnStartResponse>(METHODS.turnStart,
      { thread_id: threadId, input } satisfies TurnStartParams);
    this.followed.add(threadId);
    return response.turn;
  }

  /**
   * Run a server command (`opencomposer.fix`, `.explain`, `.tests`, `.ask`) in a thread this
   * client follows, which then shows its turn; the command answers with the thread and turn.
   */
  async runCommand(command: string, argument: object, threadId: string
  ): Promise<{ thread_id: string; turn_id: string }> {
    return this.connection.sendRequest(EXECUTE_COMMAND,
      { command, arguments: [{ ...argument, thread_id: threadId }] });
  }

  /** Put back the agent's edits (a turn's, its last one, or the thread's); files changed since
   * are reported in `conflicts`, not overwritten. */
  async undo(threadId: string, scope: UndoScope, turnId?: string): Promise<ThreadUndoResponse> {
    return this.connection.sendRequest<ThreadUndoResponse>(METHODS.threadUndo,
      { thread_id: threadId, scope, ...(turnId ? { turn_id: turnId } : {}) } satisfies ThreadUndoParams);
  }

  async steer(threadId: string, turnId: string, input: UserInput[]): Promise<string> {
    const response = await this.connection.sendRequest<TurnSteerResponse>(METHODS.turnSteer,
      { thread_id: threadId, turn_id: turnId, input } satisfies TurnSteerParams);
    return response.item_id;
  }

  async interrupt(threadId: string, turnId: string): Promise<Turn> {
    const response = await this.connection.sendRequest<TurnInterruptResponse>(METHODS.turnInterrupt,
      { thread_id: threadId, turn_id: turnId } satisfies TurnInterruptParams);
    return response.turn;
  }

  /**
   * Start a turn, or add to the running one: what the chat's send does. Returns the turn that
   * got the input and, for a steer, the id its user_message item will have (logged when the
   * model takes it at its next step, or when the turn ends first).
   */
  async send(threadId: string, input: UserInput[]): Promise<{ turnId: string; steerItemId?: string }> {
    const running = this.threads.get(threadId).runningTurn();
    if (running !== undefined) {
      return { turnId: running.id, steerItemId: await this.steer(threadId, running.id, input) };
    }
    return { turnId: (await this.startTurn(threadId, input)).id };
  }
}
