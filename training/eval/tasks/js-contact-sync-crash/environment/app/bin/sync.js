#!/usr/bin/env node
"use strict";

const path = require("node:path");
const { runSync } = require("../src/sync");

async function main(argv) {
  const dataDir = path.resolve(argv[0] ?? "data");
  const outFile = path.resolve(argv[1] ?? "out/contacts.json");
  const started = Date.now();
  const { contacts } = await runSync(dataDir, outFile);
  console.info(`wrote ${contacts.length} contacts to ${outFile} in ${Date.now() - started} ms`);
}

main(process.argv.slice(2)).catch((err) => {
  console.error("FATAL sync aborted");
  console.error(err.stack);
  process.exitCode = 1;
});
