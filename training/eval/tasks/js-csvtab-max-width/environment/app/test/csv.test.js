"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { parseCsv } = require("../src/csv");

test("quoted fields", () => {
  assert.deepEqual(parseCsv('a,"b,c","d ""e"""\n1,2,3\n'), [
    ["a", "b,c", 'd "e"'],
    ["1", "2", "3"],
  ]);
});

test("newlines inside quotes and CRLF", () => {
  assert.deepEqual(parseCsv('x,"line 1\nline 2"\r\ny,z'), [
    ["x", "line 1\nline 2"],
    ["y", "z"],
  ]);
});

test("other delimiter", () => {
  assert.deepEqual(parseCsv("a;b\n1;2", { delimiter: ";" }), [
    ["a", "b"],
    ["1", "2"],
  ]);
});
