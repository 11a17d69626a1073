/** Builders of protocol events for tests: whole objects as the server sends them. */

import type { ApprovalRequestItem, Event, Item, Turn } from '../../src/protocol';

export const THREAD = 'thr_1';
export const TURN = 'turn_1';

export function turn(status: Turn['status'] = 'in_progress', id = TURN): Turn {
  return { id, thread_id: THREAD, status };
}

export function message(id: string, text = '', status: Item['status'] = 'in_progress'): Item {
  return { type: 'agent_message', id, turn_id: TURN, status, text };
}

export function approval(id: string, extra: Partial<ApprovalRequestItem> = {}): ApprovalRequestItem {
  return {
    type: 'approval_request', id, turn_id: TURN, status: 'in_progress', target_item_id: 'item_cmd',
    tool: 'run_terminal', action_class: 'dangerous', summary: 'rm -rf build', reason: 'dangerous: ask',
    ...extra,
  };
}

/** Numbers events from `first`, as the server's log does. */
export function log(first: number, ...events: DistributiveOmit<Event, 'seq' | 'thread_id'>[]): Event[] {
  return events.map((event, i) => ({ ...event, seq: first + i, thread_id: THREAD }) as Event);
}

type DistributiveOmit<T, K extends keyof any> = T extends unknown ? Omit<T, K> : never;
