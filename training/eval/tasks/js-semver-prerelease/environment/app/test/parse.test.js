"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { parse, format } = require("../src/parse");

test("parses a plain version", () => {
  const v = parse("1.2.3");
  assert.equal(v.major, 1);
  assert.equal(v.minor, 2);
  assert.equal(v.patch, 3);
  assert.deepEqual(v.prerelease, []);
});

test("parses prerelease and build", () => {
  const v = parse("v2.0.0-rc.1+build.7");
  assert.deepEqual(v.prerelease, ["rc", "1"]);
  assert.deepEqual(v.build, ["build", "7"]);
  assert.equal(format(v), "2.0.0-rc.1+build.7");
});

test("rejects junk", () => {
  for (const bad of ["1.2", "01.2.3", "1.2.3-01", "1.2.3-", "x.y.z", ""]) {
    assert.equal(parse(bad), null, bad);
  }
});
