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

function addToDate(date, text) {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw new TypeError("not a valid Date");
  return new Date(date.getTime() + parseDuration(text));
}


function sumDurations(texts) {
  return texts.reduce((total, text) => total + parseDuration(text), 0);
}

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

module.exports = { parseDuration, formatDuration, sumDurations, addToDate, UNITS };
