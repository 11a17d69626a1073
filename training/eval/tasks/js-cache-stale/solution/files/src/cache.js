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
    this.pending = new Map(); // key -> { promise, stale } of the load in flight
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
    // Touch: move it to the most recently used end. Only the order changes: the entry still
    // expires ttlMs after it was stored, however often it is read.
    this.entries.delete(key);
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

  /** Stores value for key; a load of key in flight is not stored over it. */
  set(key, value) {
    this._forgetLoad(key);
    return this._store(key, value);
  }

  _store(key, value) {
    const now = this.now();
    this.entries.delete(key);
    this.entries.set(key, { value, storedAt: now, expiresAt: now + this.ttlMs });
    while (this.entries.size > this.max) {
      this.entries.delete(this.entries.keys().next().value);
      this.stats.evictions++;
    }
    return this;
  }

  /**
   * Drops the entry of key; true if there was one. A load of key in flight read the value
   * before whatever made the caller drop it: its result is not stored, and later callers start
   * a load of their own instead of sharing it.
   */
  delete(key) {
    this._forgetLoad(key);
    return this.entries.delete(key);
  }

  clear() {
    for (const key of [...this.pending.keys()]) this._forgetLoad(key);
    this.entries.clear();
  }

  _forgetLoad(key) {
    const load = this.pending.get(key);
    if (load) {
      load.stale = true;
      this.pending.delete(key);
    }
  }

  /**
   * The cached value of key, or else the value `loader()` resolves to, stored. Callers that ask
   * for a key while its load is in flight share that load. A failed load stores nothing.
   */
  getOrLoad(key, loader) {
    const hit = this.get(key);
    if (hit !== undefined) return Promise.resolve(hit);
    const inFlight = this.pending.get(key);
    if (inFlight) return inFlight.promise;
    this.stats.loads++;
    this.log?.debug(`cache: load ${key} started`);
    const load = { promise: null, stale: false };
    load.promise = Promise.resolve()
      .then(loader)
      .then((value) => {
        if (load.stale) {
          this.log?.debug(`cache: load ${key} dropped (invalidated while loading)`);
        } else {
          this._store(key, value);
          this.log?.debug(`cache: load ${key} stored`);
        }
        return value;
      })
      .finally(() => {
        // Only this load's own record: a newer load of the key may be in flight by now.
        if (this.pending.get(key) === load) this.pending.delete(key);
      });
    this.pending.set(key, load);
    return load.promise;
  }
}

module.exports = { Cache };
