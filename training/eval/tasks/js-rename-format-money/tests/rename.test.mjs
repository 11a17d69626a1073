import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { spawnSync } from "node:child_process";
import { scenarios, MONEY_CASES } from "./scenarios.mjs";

const APP = "/app";
const golden = JSON.parse(readFileSync(new URL("./golden.json", import.meta.url), "utf8"));

function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === ".git") continue;
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) out.push(...sources(path));
    else if (/\.(c|m)?js$/.test(name)) out.push(path);
  }
  return out;
}

test("the old name is gone from every source file", () => {
  const files = sources(APP);
  assert.ok(files.length >= 12, `only ${files.length} source files left`);
  const left = files.filter((f) => /\bfmtMoney\b/.test(readFileSync(f, "utf8"))).map((f) => relative(APP, f));
  assert.deepEqual(left, [], `fmtMoney still appears in ${left.join(", ")}`);
});

test("formatMoney is exported by money.js and the package entry, fmtMoney is not", async () => {
  const money = await import(join(APP, "src/money.js"));
  const index = await import(join(APP, "src/index.js"));
  assert.equal(typeof money.formatMoney, "function");
  assert.equal(index.formatMoney, money.formatMoney);
  assert.equal(money.fmtMoney, undefined);
  assert.equal(index.fmtMoney, undefined);
  const got = MONEY_CASES.map(([args]) => money.formatMoney(...args));
  assert.deepEqual(got, golden.money);
  assert.throws(() => money.formatMoney(1.5, "EUR"), TypeError);
  assert.throws(() => money.formatMoney(100, "XXX"), RangeError);
});

test("every user of it renders exactly what it rendered before", async () => {
  const lib = await import(join(APP, "src/index.js"));
  const got = scenarios(lib);
  for (const key of Object.keys(golden.scenarios)) {
    assert.deepEqual(got[key], golden.scenarios[key], key);
  }
});

test("the invoice CLI still works", () => {
  const order = join(APP, "examples/order-1001.json");
  const run = (args) => spawnSync(process.execPath, [join(APP, "bin/invoice.js"), ...args], { encoding: "utf8", cwd: APP, timeout: 20000 });
  const full = run([order]);
  assert.equal(full.status, 0, full.stderr);
  assert.equal(full.stdout, golden.scenarios["invoice T-1001"] + "\n");
  const total = run([order, "--total"]);
  assert.equal(total.status, 0, total.stderr);
  assert.equal(total.stdout, "€55.78\n");
});

test("the repository's own tests still pass", () => {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // a child runner of its own, reporting in TAP
  const done = spawnSync(process.execPath, ["--test", "--test-reporter=tap", join(APP, "test")], { encoding: "utf8", cwd: APP, env, timeout: 60000 });
  assert.equal(done.status, 0, done.stdout.slice(-3000));
  const passed = Number(/# pass (\d+)/.exec(done.stdout)?.[1] ?? 0);
  assert.ok(passed >= 5, `only ${passed} tests ran`);
});
