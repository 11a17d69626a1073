/** A stand-in for the language client's connection: records requests, answers them from
 * per-method handlers, and delivers server -> client messages on demand. */

import type { AgentListener, Connection } from '../../src/agentClient';
import type { Applied } from '../../src/threadModel';

export class FakeConnection implements Connection {
  readonly sent: [string, unknown][] = [];
  readonly answers = new Map<string, (params: any) => unknown>();
  private readonly notificationHandlers = new Map<string, (params: any) => void>();
  private readonly requestHandlers = new Map<string, (params: any) => Promise<unknown>>();

  async sendRequest<R>(method: string, params: unknown): Promise<R> {
    this.sent.push([method, params]);
    const answer = this.answers.get(method);
    if (!answer) throw new Error(`no answer for ${method}`);
    return answer(params) as R;
  }

  onNotification(method: string, handler: (params: any) => void): void {
    this.notificationHandlers.set(method, handler);
  }

  onRequest(method: string, handler: (params: any) => Promise<unknown>): void {
    this.requestHandlers.set(method, handler);
  }

  /** The server sends a notification. */
  notify(method: string, params: unknown): void {
    this.notificationHandlers.get(method)!(params);
  }

  /** The server sends a request; the client's answer. */
  request(method: string, params: unknown): Promise<unknown> {
    return this.requestHandlers.get(method)!(params);
  }
}

/** Records what the agent client tells its listener. */
export class RecordingListener implements AgentListener {
  readonly calls: [string, string, unknown][] = [];

  threadChanged(threadId: string, applied: Applied): void {
    this.calls.push(['threadChanged', threadId, applied]);
  }

  approvalRequested(threadId: string, item: { id: string }): void {
    this.calls.push(['approvalRequested', threadId, item.id]);
  }

  approvalSettled(threadId: string, itemId: string): void {
    this.calls.push(['approvalSettled', threadId, itemId]);
  }
}

/** Let pending promise callbacks run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
