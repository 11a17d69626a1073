#!/usr/bin/env node
"use strict";

const fs = require("node:fs");
const { parseArgs, UsageError, USAGE } = require("../src/args");
const { parseCsv, render } = require("../src/index");

function main(argv) {
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`csvtab: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let text;
  try {
    text = fs.readFileSync(opts.file && opts.file !== "-" ? opts.file : 0, "utf8");
  } catch (err) {
    process.stderr.write(`csvtab: ${err.message}\n`);
    return 1;
  }
  try {
    const records = parseCsv(text, { delimiter: opts.delimiter });
    const out = render(records, {
      format: opts.format,
      header: opts.header,
      columns: opts.columns,
      maxWidth: opts.maxWidth,
    });
    if (out) process.stdout.write(`${out}\n`);
  } catch (err) {
    process.stderr.write(`csvtab: ${err.message}\n`);
    return 1;
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
