"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

const APP = "/app";
const { parseCsv, render } = require(path.join(APP, "src/index.js"));

const PRODUCTS = [
  "sku,description,price",
  "A-1,Stainless steel water bottle (750 ml),12.50",
  "B-22,Mug,4",
  'C-333,"Notebook, dotted, A5",7.25',
].join("\n");

function csvtab(args, input) {
  return spawnSync(process.execPath, [path.join(APP, "bin/csvtab.js"), ...args], {
    input,
    encoding: "utf8",
    cwd: APP,
    timeout: 20000,
  });
}

const TEXT_10 = [
  "sku   | descripti… | price",
  "------+------------+------",
  "A-1   | Stainless… | 12.50",
  "B-22  | Mug        |     4",
  "C-333 | Notebook,… |  7.25",
].join("\n");

test("render cuts long cells in text tables", () => {
  assert.equal(render(parseCsv(PRODUCTS), { maxWidth: 10 }), TEXT_10);
});

test("cells of exactly N characters are kept whole", () => {
  const out = render(parseCsv("id,word\n1,abcde\n2,abcdef\n"), { maxWidth: 5 });
  assert.equal(out, ["id | word", "---+------", " 1 | abcde", " 2 | abcd…"].join("\n"));
});

test("headers are cut too", () => {
  const out = render(parseCsv("identifier,quantity_in_stock\nx,3\n"), { maxWidth: 4 });
  assert.equal(out, ["ide… | qua…", "-----+-----", "x    |    3"].join("\n"));
});

test("without maxWidth nothing changes", () => {
  const wide = render(parseCsv(PRODUCTS));
  assert.ok(wide.includes("Stainless steel water bottle (750 ml)"));
  assert.equal(render(parseCsv(PRODUCTS), { maxWidth: null }), wide);
  assert.equal(render(parseCsv(PRODUCTS), { maxWidth: 1000 }), wide);
  assert.equal(render(parseCsv(PRODUCTS), { format: "markdown", maxWidth: 1000 }), render(parseCsv(PRODUCTS), { format: "markdown" }));
});

test("markdown tables are cut the same way", () => {
  assert.equal(
    render(parseCsv(PRODUCTS), { format: "markdown", maxWidth: 10 }),
    [
      "| sku   | descripti… | price |",
      "| ----- | ---------- | ----: |",
      "| A-1   | Stainless… | 12.50 |",
      "| B-22  | Mug        |     4 |",
      "| C-333 | Notebook,… |  7.25 |",
    ].join("\n")
  );
});

test("markdown: the cell text is cut, then escaped", () => {
  const out = render(parseCsv('k,v\n1,"a|b|c|d"\n'), { format: "markdown", maxWidth: 4 });
  assert.equal(out.split("\n")[2], "|   1 | a\\|b… |");
});

test("characters, not UTF-16 units, are counted", () => {
  const out = render(parseCsv("name,mood\nZoë Ångström,🙂🙂🙂🙂\n"), { maxWidth: 3, header: false });
  assert.equal(out, ["na… | mo…", "Zo… | 🙂🙂…"].join("\n"));
  assert.ok(!out.includes("\ufffd") && !/[\ud800-\udbff](?![\udc00-\udfff])/.test(out));
});

test("multi-line cells are cut after their newlines become spaces", () => {
  const out = render(parseCsv('a,b\n"one\ntwo three",x\n'), { maxWidth: 8 });
  assert.equal(out.split("\n")[2], "one two… | x");
});

test("maxWidth works with columns and no header, and with 1", () => {
  assert.equal(
    render(parseCsv(PRODUCTS), { columns: ["description", "sku"], maxWidth: 6 }),
    ["descr… | sku", "-------+------", "Stain… | A-1", "Mug    | B-22", "Noteb… | C-333"].join("\n")
  );
  assert.equal(render([["abc", "d"]], { header: false, maxWidth: 1 }), "… | d");
});

test("csvtab --max-width N and --max-width=N", () => {
  for (const args of [["--max-width", "10"], ["--max-width=10"]]) {
    const done = csvtab(args, PRODUCTS);
    assert.equal(done.status, 0, done.stderr);
    assert.equal(done.stdout, TEXT_10 + "\n");
  }
});

test("csvtab --max-width with a file, markdown and other options", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "csvtab-"));
  const file = path.join(dir, "products.csv");
  fs.writeFileSync(file, PRODUCTS.replace(/,/g, ";").replace('"Notebook; dotted; A5"', '"Notebook, dotted, A5"'));
  const done = csvtab(["-f", "markdown", "-d", ";", "--max-width", "6", "-c", "description,price", file], "");
  assert.equal(done.status, 0, done.stderr);
  assert.equal(
    done.stdout,
    [
      "| descr… | price |",
      "| ------ | ----: |",
      "| Stain… | 12.50 |",
      "| Mug    |     4 |",
      "| Noteb… |  7.25 |",
      "",
    ].join("\n")
  );
  fs.rmSync(dir, { recursive: true, force: true });
});

test("bad --max-width values are usage errors", () => {
  for (const args of [["--max-width", "0"], ["--max-width", "-3"], ["--max-width", "abc"], ["--max-width", "2.5"], ["--max-width=", "x.csv"], ["--max-width"]]) {
    const done = csvtab(args, PRODUCTS);
    assert.equal(done.status, 2, `${args.join(" ")}: exit ${done.status}, stdout ${done.stdout}`);
    assert.equal(done.stdout, "", args.join(" "));
    assert.match(done.stderr, /max-width/, args.join(" "));
  }
});

test("the rest of the CLI still works", () => {
  const done = csvtab(["--no-header"], "a,b\n1,2\n");
  assert.equal(done.status, 0);
  assert.equal(done.stdout, "a | b\n1 | 2\n");
  assert.equal(csvtab(["--bogus"], "a\n").status, 2);
});
