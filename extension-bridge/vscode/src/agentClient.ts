/**
 * The client side of the agent protocol over one connection to the language server: events go
 * into per-thread models (a gap in `seq` is filled by replaying the log with `thread/events`),
 * approvals asked by the server wait until the user answers (in the chat view or a
 * notification) or the question is settled elsewhere, and the client -> server methods are
 * typed. No `vscode` import: the connection is anything with sendRequest / onNotification /
 * onRequest (the LanguageClient, or a stub in tests).
 */

import {
  APPROVAL_METHOD, EVENT_METHOD, METHODS,
  type ApprovalAnswer, type ApprovalRequestItem, type ApprovalRequestParams, type Event,
  type Thread, type ThreadEventsParams, type ThreadEventsResponse, type ThreadListParams,
  type ThreadListResponse, type ThreadStartParams, type ThreadStartResponse, type Turn,
  type TurnInterruptParams, type TurnInterruptResponse, type TurnStartParams, type TurnStartResponse,
  type TurnSteerParams, type TurnSteerResponse, type UserInput,
} from './protocol';
import { ThreadStore, type Applied } from './threadModel';

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
    this.settle(item.id, { decision: 'deny', message: 'asked again' });
    const answer = new Promise<ApprovalAnswer>((resolve) => {
      this.pending.set(item.id, { threadId, turnId: item.turn_id, resolve });
    });
    this.listener.approvalRequested(threadId, item);
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
      void this.load(threadId).catch((error) => this.log(`thread ${threadId}: replay failed: ${error}`));
    }
  }

  // ------------------------------------------------------------------ client -> server

  /** Bring a thread's model up to date from its log (all of it, the first time). */
  load(threadId: string): Promise<void> {
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

  async startThread(workspace: string): Promise<Thread> {
    const response = await this.connection.sendRequest<ThreadStartResponse>(METHODS.threadStart,
      { workspace } satisfies ThreadStartParams);
    return response.thread;
  }

  async listThreads(): Promise<Thread[]> {
    const response = await this.connection.sendRequest<ThreadListResponse>(METHODS.threadList,
      {} satisfies ThreadListParams);
    return response.data;
  }

  async startTurn(threadId: string, input: UserInput[]): Promise<Turn> {
    const response = await this.connection.sendRequest<TurnStartResponse>(METHODS.turnStart,
      { thread_id: threadId, input } satisfies TurnStartParams);
    return response.turn;
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
   * got the input and, for a steer, the id its user_message item will have (logged only when
   * the model takes it, at its next step).
   */
  async send(threadId: string, input: UserInput[]): Promise<{ turnId: string; steerItemId?: string }> {
    const running = this.threads.get(threadId).runningTurn();
    if (running !== undefined) {
      return { turnId: running.id, steerItemId: await this.steer(threadId, running.id, input) };
    }
    return { turnId: (await this.startTurn(threadId, input)).id };
  }
}
