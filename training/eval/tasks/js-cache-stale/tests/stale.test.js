"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const APP = "/app";
const { Cache } = require(path.join(APP, "src/cache.js"));
const { PriceService } = require(path.join(APP, "src/pricing.js"));
const { PriceStore } = require(path.join(APP, "src/store.js"));

function clock(start = 1_741_600_000_000) {
  let t = start;
  const now = () => t;
  now.advance = (ms) => (t += ms);
  return now;
}

/** A promise and the functions that settle it. */
function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A loader whose every call waits until the test settles it: loader.calls[i].resolve(v). */
function manualLoader() {
  const loader = () => {
    const d = deferred();
    loader.calls.push(d);
    return d.promise;
  };
  loader.calls = [];
  return loader;
}

test("an entry expires ttlMs after it was stored, however often it is read", () => {
  const now = clock();
  const cache = new Cache({ ttlMs: 1000, now });
  cache.set("k", "v1");
  for (let i = 0; i < 9; i++) {
    now.advance(100);
    assert.equal(cache.get("k"), "v1", `read at ${(i + 1) * 100}ms`);
  }
  now.advance(99);
  assert.equal(cache.get("k"), "v1");
  assert.equal(cache.age("k"), 999);
  now.advance(1);
  assert.equal(cache.get("k"), undefined, "still served 1000ms after it was stored");
  assert.equal(cache.has("k"), false);
  assert.equal(cache.age("k"), undefined);
});

test("has() and age() do not keep an entry alive either", () => {
  const now = clock();
  const cache = new Cache({ ttlMs: 500, now });
  cache.set("k", 1);
  for (let i = 0; i < 4; i++) {
    now.advance(100);
    assert.ok(cache.has("k"));
    cache.age("k");
    cache.get("k");
  }
  now.advance(100);
  assert.equal(cache.get("k"), undefined);
});

test("reads still make an entry the most recently used", () => {
  const now = clock();
  const cache = new Cache({ ttlMs: 10000, max: 2, now });
  cache.set("a", 1).set("b", 2);
  now.advance(10);
  assert.equal(cache.get("a"), 1);
  cache.set("c", 3);
  assert.equal(cache.get("b"), undefined, "b was the least recently used");
  assert.equal(cache.get("a"), 1);
  assert.equal(cache.get("c"), 3);
  assert.equal(cache.size, 2);
});

test("a key read all the time is loaded again once its ttl is over", async () => {
  const now = clock();
  const cache = new Cache({ ttlMs: 300, now });
  let loads = 0;
  const loader = async () => ++loads;
  const seen = [];
  for (let i = 0; i < 20; i++) {
    seen.push(await cache.getOrLoad("hot", loader));
    now.advance(50);
  }
  // Stored at 0, 300, 600 and 900ms.
  assert.equal(loads, 4);
  assert.deepEqual(seen, [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4]);
});

test("concurrent callers still share one load", async () => {
  const cache = new Cache();
  const loader = manualLoader();
  const all = [cache.getOrLoad("k", loader), cache.getOrLoad("k", loader), cache.getOrLoad("k", loader)];
  await tick();
  assert.equal(loader.calls.length, 1);
  loader.calls[0].resolve(42);
  assert.deepEqual(await Promise.all(all), [42, 42, 42]);
  assert.equal(cache.get("k"), 42);
  assert.equal(await cache.getOrLoad("k", loader), 42);
  assert.equal(loader.calls.length, 1);
});

test("a failed load still stores nothing and is not shared afterwards", async () => {
  const cache = new Cache();
  const loader = manualLoader();
  const first = cache.getOrLoad("k", loader);
  await tick();
  loader.calls[0].reject(new Error("db down"));
  await assert.rejects(first, /db down/);
  const second = cache.getOrLoad("k", loader);
  await tick();
  assert.equal(loader.calls.length, 2);
  loader.calls[1].resolve(5);
  assert.equal(await second, 5);
});

test("a load in flight when its key is deleted is not stored", async () => {
  const cache = new Cache();
  const loader = manualLoader();
  const inFlight = cache.getOrLoad("price:A", loader);
  await tick();
  cache.delete("price:A");
  loader.calls[0].resolve("old");
  assert.equal(await inFlight, "old");
  assert.equal(cache.get("price:A"), undefined, "the value loaded before the delete was stored");
  const next = cache.getOrLoad("price:A", loader);
  await tick();
  assert.equal(loader.calls.length, 2, "no new load after the delete");
  loader.calls[1].resolve("new");
  assert.equal(await next, "new");
  assert.equal(cache.get("price:A"), "new");
});

test("callers after a delete do not share the load from before it", async () => {
  for (const order of ["old first", "new first"]) {
    const cache = new Cache();
    const loader = manualLoader();
    const before = cache.getOrLoad("k", loader);
    await tick();
    cache.delete("k");
    const after = cache.getOrLoad("k", loader);
    await tick();
    assert.equal(loader.calls.length, 2, `${order}: the caller after the delete joined the old load`);
    if (order === "old first") {
      loader.calls[0].resolve("old");
      await before;
      loader.calls[1].resolve("new");
    } else {
      loader.calls[1].resolve("new");
      await after;
      loader.calls[0].resolve("old");
      await before;
    }
    assert.equal(await after, "new", order);
    await tick();
    assert.equal(cache.get("k"), "new", `${order}: the cache holds ${cache.get("k")}`);
  }
});

test("the old load finishing does not break the sharing of the new one", async () => {
  const cache = new Cache();
  const loader = manualLoader();
  const before = cache.getOrLoad("k", loader);
  await tick();
  cache.delete("k");
  const after = cache.getOrLoad("k", loader);
  await tick();
  loader.calls[0].resolve("old");
  await before;
  await tick();
  const third = cache.getOrLoad("k", loader);
  await tick();
  assert.equal(loader.calls.length, 2, "a third load started while the second was in flight");
  loader.calls[1].resolve("new");
  assert.deepEqual(await Promise.all([after, third]), ["new", "new"]);
  assert.equal(cache.get("k"), "new");
});

test("deletes of other keys leave a load alone", async () => {
  const cache = new Cache();
  const loader = manualLoader();
  const load = cache.getOrLoad("a", loader);
  await tick();
  cache.delete("b");
  loader.calls[0].resolve(1);
  assert.equal(await load, 1);
  assert.equal(cache.get("a"), 1);
});

/** A store whose reads see the price when they start and answer when the test says so. */
class SlowStore {
  constructor(prices) {
    this.prices = new Map(Object.entries(prices));
    this.reads = [];
  }
  get(sku) {
    const cents = this.prices.get(sku);
    const d = deferred();
    this.reads.push(() => d.resolve(cents));
    return d.promise;
  }
  async set(sku, cents) {
    this.prices.set(sku, cents);
  }
}

test("a price changed while a page was loading it is not served afterwards", async () => {
  const store = new SlowStore({ "SKU-0854": 7949 });
  const prices = new PriceService({ store, cache: new Cache({ ttlMs: 300000 }) });
  const page = prices.getPrice("SKU-0854");
  await tick();
  await prices.updatePrice("SKU-0854", 999, "test");
  store.reads.shift()();
  assert.equal(await page, 7949);
  const next = prices.getPrice("SKU-0854");
  await tick();
  assert.equal(store.reads.length, 1, "the new price was not read from the store");
  store.reads.shift()();
  assert.equal(await next, 999);
  assert.equal(await prices.getPrice("SKU-0854"), 999);
});

test("the total uses the new price after an update during a load", async () => {
  const store = new SlowStore({ A: 100, B: 250 });
  const prices = new PriceService({ store, cache: new Cache() });
  const first = prices.total([{ sku: "A", qty: 2 }, { sku: "B", qty: 1 }]);
  await tick();
  await prices.updatePrice("B", 200);
  while (store.reads.length) store.reads.shift()();
  assert.equal(await first, 450);
  const second = prices.total([{ sku: "A", qty: 2 }, { sku: "B", qty: 1 }]);
  await tick();
  while (store.reads.length) store.reads.shift()();
  assert.equal(await second, 400);
});

test("prices changed in the database directly show up within the ttl, even for busy items", async () => {
  const now = clock();
  const store = new PriceStore({ "SKU-1043": 6999 });
  const prices = new PriceService({ store, cache: new Cache({ ttlMs: 300000, now }) });
  assert.equal(await prices.getPrice("SKU-1043"), 6999);
  store.prices.set("SKU-1043", 6499); // the nightly import writes to the database
  let t = 0;
  while (t < 300000) {
    now.advance(10000);
    t += 10000;
    const cents = await prices.getPrice("SKU-1043");
    if (t < 300000) assert.equal(cents, 6999);
    else assert.equal(cents, 6499, "still the old price after the ttl");
  }
});

test("with the real store and real time, an update during a load wins", async () => {
  const store = new PriceStore({ X: 500 }, { delayMs: 40 });
  const prices = new PriceService({ store, cache: new Cache() });
  const page = prices.getPrice("X");
  // The write is faster than the read in flight: it lands and drops the key before the read
  // of the old price answers.
  store.delayMs = 5;
  await prices.updatePrice("X", 450);
  store.delayMs = 40;
  assert.equal(await page, 500);
  assert.equal(await prices.getPrice("X"), 450);
});
