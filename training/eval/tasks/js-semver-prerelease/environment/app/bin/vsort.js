#!/usr/bin/env node
"use strict";

const fs = require("node:fs");
const { parse, sort, parseRange } = require("../src/index");

function usage() {
  return "usage: vsort [--desc] [--latest] [--range R] [--no-prerelease] [--strict] [FILE]";
}

function parseArgs(argv) {
  const opts = { desc: false, latest: false, range: null, prerelease: true, strict: false, file: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--desc") opts.desc = true;
    else if (arg === "--latest") opts.latest = true;
    else if (arg === "--no-prerelease") opts.prerelease = false;
    else if (arg === "--strict") opts.strict = true;
    else if (arg === "--range") {
      if (i + 1 >= argv.length) throw new Error("--range needs a value");
      opts.range = argv[++i];
    } else if (arg === "-h" || arg === "--help") opts.help = true;
    else if (arg.startsWith("-") && arg !== "-") throw new Error(`unknown option ${arg}`);
    else opts.file = arg;
  }
  return opts;
}

function main(argv) {
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (err) {
    process.stderr.write(`vsort: ${err.message}\n${usage()}\n`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  const input = fs.readFileSync(opts.file && opts.file !== "-" ? opts.file : 0, "utf8");
  const versions = [];
  for (const line of input.split(/\r?\n/)) {
    const text = line.trim();
    if (!text || text.startsWith("#")) continue;
    const v = parse(text);
    if (!v) {
      if (opts.strict) {
        process.stderr.write(`vsort: not a version: ${text}\n`);
        return 1;
      }
      continue;
    }
    if (!opts.prerelease && v.prerelease.length) continue;
    versions.push(text);
  }
  const test = opts.range ? parseRange(opts.range) : () => true;
  const kept = sort(versions.filter((v) => test(v)), { desc: opts.desc || opts.latest });
  const out = opts.latest ? kept.slice(0, 1) : kept;
  if (out.length) process.stdout.write(`${out.join("\n")}\n`);
  return opts.latest && !out.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
