"use strict";

const { parse } = require("./parse");
const { compare, toVersion } = require("./compare");

function comparator(op, version) {
  const v = toVersion(version);
  switch (op) {
    case ">":
      return (x) => compare(x, v) > 0;
    case ">=":
      return (x) => compare(x, v) >= 0;
    case "<":
      return (x) => compare(x, v) < 0;
    case "<=":
      return (x) => compare(x, v) <= 0;
    case "=":
    case "":
      return (x) => compare(x, v) === 0;
    default:
      throw new TypeError(`unknown operator ${op}`);
  }
}

function upperForCaret(v) {
  if (v.major > 0) return `${v.major + 1}.0.0-0`;
  if (v.minor > 0) return `0.${v.minor + 1}.0-0`;
  return `0.0.${v.patch + 1}-0`;
}

/** The tests of one range term ("^1.2.3", "~1.2.3", ">=1.0.0", "1.2.3"). */
function term(text) {
  const m = /^(\^|~|>=|<=|>|<|=)?\s*(.+)$/.exec(text);
  if (!m) throw new TypeError(`invalid range term: ${text}`);
  const [, op = "", rest] = m;
  const v = parse(rest);
  if (!v) throw new TypeError(`invalid version in range: ${rest}`);
  if (op === "^") return [comparator(">=", v), comparator("<", upperForCaret(v))];
  if (op === "~") return [comparator(">=", v), comparator("<", `${v.major}.${v.minor + 1}.0-0`)];
  return [comparator(op, v)];
}

/** A predicate for a range: space-separated terms, all of which must hold. */
function parseRange(range) {
  const tests = range
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .flatMap(term);
  return (version) => tests.every((t) => t(toVersion(version)));
}

function satisfies(version, range) {
  return parseRange(range)(version);
}

module.exports = { parseRange, satisfies };
