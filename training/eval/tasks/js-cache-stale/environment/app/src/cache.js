"use strict";

// The price service's in-memory cache. Entries expire ttlMs after they were stored; when the
// cache is full the least recently used entry goes first; concurrent loads of one key share a
// single call of the loader.

class Cache {
  constructor({ ttlMs = 300000, max = 5000, now = Date.now, log = null } = {}) {
    if (!(ttlMs > 0) || !(max >= 1)) throw new RangeError("ttlMs and max must be positive");
    this.ttlMs = ttlMs;
    this.max = max;
    this.now = now;
    this.log = log;
    this.entries = new Map(); // key -> { value, storedAt, expiresAt }; oldest use first
    this.pending = new Map(); // key -> the promise of the load in flight
    this.stats = { hits: 0, misses: 0, loads: 0, evictions: 0 };
  }

  get size() {
    return this.entries.size;
  }

  /** The value of a live entry (and it becomes the most recently used), or undefined. */
  get(key) {
    const entry = this.entries.get(key);
    if (entry === undefined) {
      this.stats.misses++;
      return undefined;
    }
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      this.stats.misses++;
      return undefined;
    }
    // Touch: move it to the most recently used end.
    this.entries.delete(key);
    entry.expiresAt = this.now() + this.ttlMs;
    this.entries.set(key, entry);
    this.stats.hits++;
    return entry.value;
  }

  has(key) {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.expiresAt > this.now();
  }

  /** Milliseconds since the live entry of key was stored, or undefined. */
  age(key) {
    const entry = this.entries.get(key);
    return entry === undefined || entry.expiresAt <= this.now() ? undefined : this.now() - entry.storedAt;
  }

  set(key, value) {
    const now = this.now();
    this.entries.delete(key);
    this.entries.set(key, { value, storedAt: now, expiresAt: now + this.ttlMs });
    while (this.entries.size > this.max) {
      this.entries.delete(this.entries.keys().next().value);
      this.stats.evictions++;
    }
    return this;
  }

  /** Drops the entry of key; true if there was one. */
  delete(key) {
    return this.entries.delete(key);
  }

  clear() {
    this.entries.clear();
  }

  /**
   * The cached value of key, or else the value `loader()` resolves to, stored. Callers that ask
   * for a key while its load is in flight share that load. A failed load stores nothing.
   */
  getOrLoad(key, loader) {
    const hit = this.get(key);
    if (hit !== undefined) return Promise.resolve(hit);
    const inFlight = this.pending.get(key);
    if (inFlight) return inFlight;
    this.stats.loads++;
    this.log?.debug(`cache: load ${key} started`);
    const load = Promise.resolve()
      .then(loader)
      .then((value) => {
        this.set(key, value);
        this.log?.debug(`cache: load ${key} stored`);
        return value;
      })
      .finally(() => {
        this.pending.delete(key);
      });
    this.pending.set(key, load);
    return load;
  }
}

module.exports = { Cache };
