"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { compare, sort, maxSatisfying, satisfies } = require("../src/index");

test("orders by major, minor, patch numerically", () => {
  assert.equal(compare("1.10.0", "1.9.0"), 1);
  assert.equal(compare("1.2.3", "1.2.3"), 0);
  assert.equal(compare("0.0.9", "0.1.0"), -1);
});

test("a release is newer than its prereleases", () => {
  assert.equal(compare("1.0.0", "1.0.0-rc.1"), 1);
});

test("sort", () => {
  assert.deepEqual(sort(["1.10.0", "1.2.0", "1.9.3"]), ["1.2.0", "1.9.3", "1.10.0"]);
  assert.deepEqual(sort(["1.2.0", "1.10.0"], { desc: true }), ["1.10.0", "1.2.0"]);
});

test("ranges", () => {
  assert.ok(satisfies("1.4.0", "^1.2.0"));
  assert.ok(!satisfies("2.0.0", "^1.2.0"));
  assert.ok(satisfies("1.2.9", "~1.2.0"));
  assert.ok(!satisfies("1.3.0", "~1.2.0"));
  assert.equal(maxSatisfying(["1.2.0", "1.10.0", "2.0.0"], "^1.0.0"), "1.10.0");
});
