"use strict";

// Durations as people write them in job configs ("1h30m", "90s", "1.5h", "250ms") and back.
// Every value in code is integer milliseconds.

const UNITS = [
  ["d", 86400000],
  ["h", 3600000],
  ["m", 60000],
  ["s", 1000],
  ["ms", 1],
];

const PART = /(\d+(?:\.\d+)?)\s*(ms|d|h|m|s)/y;

/**
 * Milliseconds in a duration string: one or more parts, each a number (decimals allowed) and
 * a unit (d, h, m, s, ms), largest unit first and each unit at most once ("1h30m", "1h 30m",
 * "2 d 4 h", "1.5h", "250ms"). Spaces are allowed around the whole, between the parts and
 * between a number and its unit; a leading "-" makes it negative. The result is rounded to
 * whole milliseconds. Throws TypeError for a non-string, SyntaxError for anything else invalid.
 */
function parseDuration(text) {
  if (typeof text !== "string") throw new TypeError(`a duration must be a string, not ${typeof text}`);
  let rest = text.trim();
  let sign = 1;
  if (rest.startsWith("-")) {
    sign = -1;
    rest = rest.slice(1).trimStart();
  }
  if (rest === "") throw new SyntaxError(`empty duration: ${JSON.stringify(text)}`);
  let total = 0;
  let pos = 0;
  let lastRank = -1;
  while (pos < rest.length) {
    PART.lastIndex = pos;
    const m = PART.exec(rest);
    if (!m) throw new SyntaxError(`invalid duration: ${JSON.stringify(text)}`);
    const rank = UNITS.findIndex(([unit]) => unit === m[2]);
    if (rank <= lastRank) throw new SyntaxError(`units out of order or repeated: ${JSON.stringify(text)}`);
    lastRank = rank;
    total += Number(m[1]) * UNITS[rank][1];
    pos = PART.lastIndex;
    while (rest[pos] === " ") pos++;
  }
  return sign * Math.round(total);
}

/**
 * A duration in milliseconds as text: "1d 2h 3m 4s 5ms", units that are zero left out, "0s"
 * for zero, "-" in front of negatives; fractions of a millisecond are rounded (half up).
 * options.largest: show only that many (non-zero) units, the largest ones; the rest is
 * dropped, not rounded ("1h 59m" with largest 1 is "1h").
 * options.separator: put between the parts instead of " ".
 */
function formatDuration(ms, { largest = Infinity, separator = " " } = {}) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) throw new RangeError(`not a duration: ${ms}`);
  if (largest !== Infinity && (!Number.isInteger(largest) || largest < 1)) {
    throw new RangeError(`largest must be a whole number of at least 1, not ${largest}`);
  }
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return "0s";
  const parts = [];
  for (const [unit, size] of UNITS) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return (ms < 0 ? "-" : "") + parts.slice(0, largest).join(separator);
}

/** The sum of duration strings, in milliseconds (0 for none). */
function sumDurations(texts) {
  return texts.reduce((total, text) => total + parseDuration(text), 0);
}

/** A new Date: `date` moved by the duration (back in time for a negative one). */
function addToDate(date, text) {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw new TypeError("not a valid Date");
  return new Date(date.getTime() + parseDuration(text));
}

module.exports = { parseDuration, formatDuration, sumDurations, addToDate, UNITS };
