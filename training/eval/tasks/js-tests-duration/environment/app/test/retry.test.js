"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { backoff } = require("../src/retry");

test("backoff doubles up to the cap", () => {
  assert.deepEqual(backoff({ initial: "1s", max: "5s", retries: 4 }), [1000, 2000, 4000, 5000]);
});
