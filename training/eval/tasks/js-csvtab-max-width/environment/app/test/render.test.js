"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { parseCsv, render } = require("../src/index");

const PEOPLE = "name,city,age\nAda,London,36\nGrace,Arlington,85\n";

test("text table", () => {
  assert.equal(
    render(parseCsv(PEOPLE)),
    ["name  | city      | age", "------+-----------+----", "Ada   | London    |  36", "Grace | Arlington |  85"].join("\n")
  );
});

test("markdown table", () => {
  assert.equal(
    render(parseCsv(PEOPLE), { format: "markdown" }),
    [
      "| name  | city      | age |",
      "| ----- | --------- | --: |",
      "| Ada   | London    |  36 |",
      "| Grace | Arlington |  85 |",
    ].join("\n")
  );
});

test("columns", () => {
  assert.equal(render(parseCsv(PEOPLE), { columns: ["age", "1"] }), ["age | name", "----+------", " 36 | Ada", " 85 | Grace"].join("\n"));
});
