"use strict";

const { parse, format } = require("./parse");
const { compare, eq, gt, lt, gte, lte } = require("./compare");
const { parseRange, satisfies } = require("./range");

/** A sorted copy (oldest first, or newest first with { desc: true }); ties keep input order. */
function sort(versions, { desc = false } = {}) {
  const sign = desc ? -1 : 1;
  return versions
    .map((text, index) => ({ text, index, v: parse(text) }))
    .filter((entry) => {
      if (!entry.v) throw new TypeError(`invalid version: ${JSON.stringify(entry.text)}`);
      return true;
    })
    .sort((a, b) => sign * compare(a.v, b.v) || a.index - b.index)
    .map((entry) => entry.text);
}

/** The newest version of `versions` in `range` (any version if range is omitted), or null. */
function maxSatisfying(versions, range) {
  const test = range ? parseRange(range) : () => true;
  let best = null;
  for (const text of versions) {
    if (!test(text)) continue;
    if (best === null || compare(text, best) > 0) best = text;
  }
  return best;
}

module.exports = { parse, format, compare, eq, gt, lt, gte, lte, satisfies, parseRange, sort, maxSatisfying };
