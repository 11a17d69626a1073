"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { Cache } = require("../src/cache");

function clock(start = 1_000_000) {
  let t = start;
  const now = () => t;
  now.advance = (ms) => (t += ms);
  return now;
}

test("stores and expires", () => {
  const now = clock();
  const cache = new Cache({ ttlMs: 1000, now });
  cache.set("a", 1);
  assert.equal(cache.get("a"), 1);
  now.advance(1500);
  assert.equal(cache.get("a"), undefined);
});

test("evicts the least recently used", () => {
  const cache = new Cache({ max: 2 });
  cache.set("a", 1).set("b", 2).set("c", 3);
  assert.equal(cache.get("a"), undefined);
  assert.equal(cache.get("c"), 3);
});

test("shares concurrent loads", async () => {
  const cache = new Cache();
  let calls = 0;
  const loader = async () => ++calls;
  const [x, y] = await Promise.all([cache.getOrLoad("k", loader), cache.getOrLoad("k", loader)]);
  assert.equal(x, 1);
  assert.equal(y, 1);
  assert.equal(calls, 1);
  assert.equal(await cache.getOrLoad("k", loader), 1);
});

test("a failed load stores nothing", async () => {
  const cache = new Cache();
  await assert.rejects(cache.getOrLoad("k", async () => Promise.reject(new Error("db down"))));
  assert.equal(await cache.getOrLoad("k", async () => 7), 7);
});
