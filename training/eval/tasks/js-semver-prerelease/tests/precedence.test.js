"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const path = require("node:path");

const APP = "/app";
const lib = require(path.join(APP, "src/index.js"));

function shuffled(list, seed) {
  const out = list.slice();
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

// Each strictly lower than the next (semver 2.0.0, section 11, and a few more).
const CHAIN = [
  "1.0.0-0",
  "1.0.0-2",
  "1.0.0-10",
  "1.0.0-Beta",
  "1.0.0-alpha",
  "1.0.0-alpha.1",
  "1.0.0-alpha.2",
  "1.0.0-alpha.10",
  "1.0.0-alpha.beta",
  "1.0.0-alpha-beta",
  "1.0.0-beta",
  "1.0.0-beta.2",
  "1.0.0-beta.11",
  "1.0.0-beta.11.1",
  "1.0.0-beta.x",
  "1.0.0-rc.1",
  "1.0.0-rc.9",
  "1.0.0-rc.10",
  "1.0.0-rc.10.2",
  "1.0.0-rc.10.10",
  "1.0.0",
  "1.0.1-rc.1",
  "1.0.1",
  "1.2.0",
  "1.10.0-alpha.3",
  "1.10.0",
  "2.0.0-rc.2",
  "2.0.0-rc.19",
  "2.0.0-rc.100",
  "2.0.0",
];

test("the numeric part of a prerelease is compared as a number", () => {
  assert.equal(lib.compare("2.0.0-rc.9", "2.0.0-rc.10"), -1);
  assert.equal(lib.compare("2.0.0-rc.10", "2.0.0-rc.9"), 1);
  assert.equal(lib.compare("1.0.0-beta.2", "1.0.0-beta.11"), -1);
  assert.equal(lib.compare("1.0.0-10", "1.0.0-9"), 1);
  assert.ok(lib.lt("3.1.0-alpha.9", "3.1.0-alpha.10"));
  assert.ok(lib.gt("3.1.0-alpha.10", "3.1.0-alpha.9"));
});

test("every adjacent pair of the precedence chain, both ways", () => {
  for (let i = 0; i + 1 < CHAIN.length; i++) {
    const [lo, hi] = [CHAIN[i], CHAIN[i + 1]];
    assert.equal(lib.compare(lo, hi), -1, `${lo} < ${hi}`);
    assert.equal(lib.compare(hi, lo), 1, `${hi} > ${lo}`);
  }
});

test("every pair of the chain", () => {
  for (let i = 0; i < CHAIN.length; i++) {
    for (let j = 0; j < CHAIN.length; j++) {
      const want = i < j ? -1 : i > j ? 1 : 0;
      assert.equal(lib.compare(CHAIN[i], CHAIN[j]), want, `${CHAIN[i]} vs ${CHAIN[j]}`);
    }
  }
});

test("numeric identifiers rank below alphanumeric ones, ASCII order for the rest", () => {
  assert.equal(lib.compare("1.0.0-1", "1.0.0-a"), -1);
  assert.equal(lib.compare("1.0.0-999", "1.0.0-1a"), -1);
  assert.equal(lib.compare("1.0.0-rc.1", "1.0.0-rc.1a"), -1);
  assert.equal(lib.compare("1.0.0-RC.1", "1.0.0-rc.1"), -1);
  assert.equal(lib.compare("1.0.0-alpha.beta", "1.0.0-alpha-beta"), -1);
  assert.equal(lib.compare("1.0.0-a.b.c", "1.0.0-a.b"), 1);
});

test("build metadata is ignored and equal versions compare equal", () => {
  assert.equal(lib.compare("1.0.0-rc.10+build.1", "1.0.0-rc.10+build.2"), 0);
  assert.equal(lib.compare("1.0.0+5", "1.0.0+40"), 0);
  assert.equal(lib.compare("v2.0.0-rc.10", "2.0.0-rc.10"), 0);
  assert.ok(lib.eq("1.0.0-alpha.1", "1.0.0-alpha.1"));
  assert.equal(lib.compare("1.0.0-rc.10+build.9", "1.0.0-rc.9+build.10"), 1);
});

test("sort puts a shuffled chain back in order, both directions", () => {
  for (const seed of [1, 7, 42, 2024]) {
    assert.deepEqual(lib.sort(shuffled(CHAIN, seed)), CHAIN);
    assert.deepEqual(lib.sort(shuffled(CHAIN, seed), { desc: true }), CHAIN.slice().reverse());
  }
});

test("sort keeps the input order of equal versions", () => {
  assert.deepEqual(lib.sort(["1.0.0+b", "1.0.0-rc.10", "1.0.0+a", "1.0.0-rc.9"]), [
    "1.0.0-rc.9",
    "1.0.0-rc.10",
    "1.0.0+b",
    "1.0.0+a",
  ]);
});

test("maxSatisfying and ranges pick the newest prerelease", () => {
  const candidates = ["2.0.0-rc.9", "2.0.0-rc.10", "2.0.0-rc.2", "1.9.0"];
  assert.equal(lib.maxSatisfying(candidates), "2.0.0-rc.10");
  assert.equal(lib.maxSatisfying(candidates, ">=2.0.0-rc.1"), "2.0.0-rc.10");
  assert.equal(lib.maxSatisfying(candidates, "<2.0.0-rc.10"), "2.0.0-rc.9");
  assert.ok(lib.satisfies("2.0.0-rc.10", ">2.0.0-rc.9"));
  assert.ok(!lib.satisfies("2.0.0-rc.9", ">=2.0.0-rc.10"));
  assert.ok(lib.satisfies("1.4.0", "^1.2.0"));
  assert.ok(!lib.satisfies("2.0.0-rc.1", "^1.2.0"));
});

function vsort(args, input) {
  const done = spawnSync(process.execPath, [path.join(APP, "bin/vsort.js"), ...args], {
    input,
    encoding: "utf8",
    cwd: APP,
    timeout: 20000,
  });
  return done;
}

test("vsort --latest picks rc.10 over rc.9", () => {
  const done = vsort(["--latest"], "1.9.0\n2.0.0-rc.9\n2.0.0-rc.10\n2.0.0-rc.2\n");
  assert.equal(done.status, 0, done.stderr);
  assert.equal(done.stdout, "2.0.0-rc.10\n");
});

test("vsort sorts a shuffled list and still filters", () => {
  const done = vsort([], shuffled(CHAIN, 99).join("\n") + "\nnot-a-version\n");
  assert.equal(done.status, 0, done.stderr);
  assert.equal(done.stdout, CHAIN.join("\n") + "\n");
  const ranged = vsort(["--desc", "--range", ">=1.0.0-rc.9 <1.0.1-rc.1"], shuffled(CHAIN, 5).join("\n"));
  assert.equal(ranged.stdout, "1.0.0\n1.0.0-rc.10.10\n1.0.0-rc.10.2\n1.0.0-rc.10\n1.0.0-rc.9\n");
  const stable = vsort(["--no-prerelease", "--latest"], shuffled(CHAIN, 3).join("\n"));
  assert.equal(stable.stdout, "2.0.0\n");
});
