"use strict";

const { parse } = require("./parse");

function toVersion(v) {
  if (typeof v !== "string") return v;
  const parsed = parse(v);
  if (!parsed) throw new TypeError(`invalid version: ${JSON.stringify(v)}`);
  return parsed;
}

function compareNumbers(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

function comparePrerelease(a, b) {
  // A version without a prerelease ranks above the same version with one.
  if (!a.length && !b.length) return 0;
  if (!a.length) return 1;
  if (!b.length) return -1;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const order = compareIdentifier(a[i], b[i]);
    if (order) return order;
  }
  // All shared identifiers equal: the longer set ranks higher.
  return compareNumbers(a.length, b.length);
}

const NUMERIC = /^\d+$/;

/** Numeric identifiers compare as numbers and rank below alphanumeric ones (ASCII order). */
function compareIdentifier(x, y) {
  const xNum = NUMERIC.test(x);
  const yNum = NUMERIC.test(y);
  if (xNum && yNum) return compareNumbers(x.length, y.length) || (x < y ? -1 : x > y ? 1 : 0);
  if (xNum) return -1;
  if (yNum) return 1;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** -1, 0 or 1, by semver precedence (build metadata ignored). Accepts strings or parsed versions. */
function compare(a, b) {
  const x = toVersion(a);
  const y = toVersion(b);
  return (
    compareNumbers(x.major, y.major) ||
    compareNumbers(x.minor, y.minor) ||
    compareNumbers(x.patch, y.patch) ||
    comparePrerelease(x.prerelease, y.prerelease)
  );
}

function eq(a, b) {
  return compare(a, b) === 0;
}
function gt(a, b) {
  return compare(a, b) > 0;
}
function lt(a, b) {
  return compare(a, b) < 0;
}
function gte(a, b) {
  return compare(a, b) >= 0;
}
function lte(a, b) {
  return compare(a, b) <= 0;
}

module.exports = { compare, eq, gt, lt, gte, lte, toVersion };
