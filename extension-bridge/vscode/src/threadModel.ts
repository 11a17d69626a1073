/**
 * A thread as the client knows it: turns, and items in log order, each in its latest state
 * (started, extended by deltas, replaced by its completed form). It starts from a snapshot
 * (`thread/read`, which says the seq it was taken at) or from nothing, and follows events.
 *
 * Events carry `seq`, numbered from 1 without gaps per thread. An event past the next expected
 * one is held back and reported as a gap: the caller replays the log from `lastSeq` with
 * `thread/events`, and the held events apply once the gap is filled. Repeats are ignored, so
 * replayed and live events may overlap freely. Pure logic: no `vscode` here.
 */

import type { Event, Item, Thread, Turn, TurnWithItems } from './protocol';

export interface Applied {
  /** Items that changed, in the order they changed (each once). */
  items: string[];
  /** A turn started or ended. */
  turns: boolean;
  /** Set when events are missing: replay the log after this seq with `thread/events`. */
  gapAfter?: number;
}

const TURN = 'turn' as const;

export class ThreadModel {
  thread?: Thread;
  /** The last event applied; everything up to it is known. */
  lastSeq = 0;
  private readonly items = new Map<string, Item>();
  private readonly order: string[] = [];
  private readonly turnsById = new Map<string, Turn>();
  private readonly turnOrder: string[] = [];
  /** Events past a gap, by seq, waiting for the missing ones. */
  private readonly held = new Map<number, Event>();

  constructor(readonly threadId: string) {}

  /** Apply events (live or replayed, in any order); see `Applied`. */
  apply(...events: Event[]): Applied {
    const changed = new Set<string>();
    let turns = false;
    for (const event of events) {
      if (event.seq > this.lastSeq) this.held.set(event.seq, event);
    }
    for (let next = this.held.get(this.lastSeq + 1); next; next = this.held.get(this.lastSeq + 1)) {
      this.held.delete(next.seq);
      this.lastSeq = next.seq;
      const touched = this.applyOne(next);
      if (touched === TURN) turns = true;
      else if (touched !== undefined) changed.add(touched.item);
    }
    const applied: Applied = { items: [...changed], turns };
    if (this.held.size > 0) applied.gapAfter = this.lastSeq;
    return applied;
  }

  /**
   * Take the thread as a snapshot shows it at `lastSeq`, unless this model knows as much
   * already; events held past it then apply.
   */
  restore(thread: Thread, turns: TurnWithItems[], lastSeq: number): Applied {
    if (lastSeq <= this.lastSeq) return { items: [], turns: false };
    this.thread = thread;
    this.items.clear();
    this.order.length = 0;
    this.turnsById.clear();
    this.turnOrder.length = 0;
    for (const { items, ...turn } of turns) {
      this.turnsById.set(turn.id, turn);
      this.turnOrder.push(turn.id);
      for (const item of items) {
        this.items.set(item.id, { ...item });
        this.order.push(item.id);
      }
    }
    this.lastSeq = lastSeq;
    for (const seq of this.held.keys()) if (seq <= lastSeq) this.held.delete(seq);
    // Held events apply to items of the snapshot: every item is listed once, in log order.
    return { ...this.apply(), items: [...this.order], turns: true };
  }

  /** Items in log order. */
  itemList(): Item[] {
    return this.order.map((id) => this.items.get(id)!);
  }

  item(id: string): Item | undefined {
    return this.items.get(id);
  }

  /** Where the item stands in the thread (-1 if unknown). */
  indexOf(id: string): number {
    return this.order.indexOf(id);
  }

  turns(): Turn[] {
    return this.turnOrder.map((id) => this.turnsById.get(id)!);
  }

  /** The turn still running, if any. */
  runningTurn(): Turn | undefined {
    return this.turns().reverse().find((turn) => turn.status === 'in_progress');
  }

  /** Finished turns that changed files, by their last item: what "Revert turn" is offered on. */
  revertibleTurns(): Map<string, { turnId: string; files: number }> {
    const last = new Map<string, string>();
    const paths = new Map<string, Set<string>>();
    for (const item of this.itemList()) {
      last.set(item.turn_id, item.id);
      if (item.type === 'file_change' && item.status === 'completed' && item.changes.length) {
        const files = paths.get(item.turn_id) ?? new Set();
        item.changes.forEach((change) => files.add(change.path));
        paths.set(item.turn_id, files);
      }
    }
    const revertible = new Map<string, { turnId: string; files: number }>();
    for (const [turnId, files] of paths) {
      if (this.turnsById.get(turnId)?.status !== 'in_progress') {
        revertible.set(last.get(turnId)!, { turnId, files: files.size });
      }
    }
    return revertible;
  }

  /** What the event changed: an item, a turn, or nothing to show. */
  private applyOne(event: Event): { item: string } | typeof TURN | undefined {
    switch (event.type) {
      case 'thread.started':
        this.thread = event.thread;
        return undefined;
      case 'turn.started':
      case 'turn.completed':
        if (!this.turnsById.has(event.turn.id)) this.turnOrder.push(event.turn.id);
        this.turnsById.set(event.turn.id, event.turn);
        return TURN;
      case 'item.started':
      case 'item.completed':
        // The completed item is authoritative: it replaces what deltas assembled.
        if (!this.items.has(event.item.id)) this.order.push(event.item.id);
        this.items.set(event.item.id, { ...event.item });
        return { item: event.item.id };
      case 'item.delta': {
        const item = this.items.get(event.item_id);
        if (item === undefined) return undefined;
        const delta = event.delta;
        if (delta.kind === 'text' && 'text' in item) {
          item.text += delta.text;
        } else if (delta.kind === 'output' && 'call_id' in item) {
          item.output = (item.output ?? '') + delta.text;
        }
        return { item: item.id };
      }
    }
  }
}

/** The threads this client has seen events of, by id. */
export class ThreadStore {
  private readonly threads = new Map<string, ThreadModel>();

  get(threadId: string): ThreadModel {
    let model = this.threads.get(threadId);
    if (model === undefined) {
      model = new ThreadModel(threadId);
      this.threads.set(threadId, model);
    }
    return model;
  }
}
