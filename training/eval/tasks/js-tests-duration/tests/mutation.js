"use strict";
// Grades the agent's tests by mutation: they must pass on the module as shipped (and on
// rewrites of it that behave the same), and fail on enough of the mutants in mutants/.
// Each variant is put in place of /app/src/duration.js in turn (the agent's copy of the
// module is never trusted) and the agent's test file is run on it with node's test runner.
// Writes /logs/verifier/reward.json; exits 0 only when the reward is 1.

const fs = require("node:fs");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

const APP = process.env.MUTATION_APP || "/app";
const LOGS = process.env.MUTATION_LOGS || "/logs/verifier";
const MODULE = path.join(APP, "src/duration.js");
const TESTS = path.join(APP, "test/duration.test.js");
const HERE = __dirname;
const THRESHOLD = 0.8;

const env = { ...process.env };
delete env.NODE_TEST_CONTEXT;
delete env.NODE_OPTIONS;

function runWith(variant) {
  fs.copyFileSync(variant, MODULE);
  const done = spawnSync(process.execPath, ["--test", "--test-reporter=tap", TESTS], {
    cwd: APP,
    env,
    encoding: "utf8",
    timeout: 60000,
  });
  const status = done.status === null ? 124 : done.status;
  return { status, output: `${(done.stdout || "").slice(-3000)}${(done.stderr || "").slice(-2000)}` };
}

function main() {
  const result = { reward: 0, killed: 0, mutants: 0 };
  const finish = (extra = {}) => {
    Object.assign(result, extra);
    fs.mkdirSync(LOGS, { recursive: true });
    fs.writeFileSync(path.join(LOGS, "reward.json"), JSON.stringify(result));
    console.log(JSON.stringify(result, null, 2));
    return result.reward === 1 ? 0 : 1;
  };
  if (!fs.existsSync(TESTS)) return finish({ problem: "test/duration.test.js does not exist" });
  const original = path.join(HERE, "original", "duration.js");
  try {
    let run = runWith(original);
    if (run.status !== 0) {
      console.log(run.output);
      return finish({ problem: `the tests do not pass on the original module (exit ${run.status})` });
    }
    if (!/^# pass [1-9]/m.test(run.output)) {
      console.log(run.output);
      return finish({ problem: "no tests ran" });
    }
    for (const name of fs.readdirSync(path.join(HERE, "equivalent")).sort()) {
      run = runWith(path.join(HERE, "equivalent", name));
      if (run.status !== 0) {
        console.log(run.output);
        return finish({ problem: `the tests fail on ${name}, a rewrite that behaves the same` });
      }
    }
    const mutants = fs.readdirSync(path.join(HERE, "mutants")).filter((f) => f.endsWith(".js")).sort();
    const survived = [];
    for (const name of mutants) {
      const { status } = runWith(path.join(HERE, "mutants", name));
      console.log(`${name}: ${status === 0 ? "survived" : "killed"}`);
      if (status === 0) survived.push(name.replace(/\.js$/, ""));
    }
    const killed = mutants.length - survived.length;
    return finish({ reward: killed >= THRESHOLD * mutants.length ? 1 : 0, killed, mutants: mutants.length, survived });
  } finally {
    fs.copyFileSync(original, MODULE);
  }
}

process.exitCode = main();
