"use strict";

// Same behaviour, written differently.

const UNITS = [
  ["d", 24 * 60 * 60 * 1000],
  ["h", 60 * 60 * 1000],
  ["m", 60 * 1000],
  ["s", 1000],
  ["ms", 1],
];
const SIZE = new Map(UNITS);
const RANK = new Map(UNITS.map(([u], i) => [u, i]));

function parseDuration(text) {
  if (typeof text !== "string") throw new TypeError("duration must be a string");
  const m = /^\s*(-?)\s*(.*?)\s*$/s.exec(text);
  const negative = m[1] === "-";
  const body = m[2];
  if (!body.length) throw new SyntaxError("empty duration");
  const re = /(\d+(?:\.\d+)?)\s*(ms|d|h|m|s) */gy;
  let consumed = 0;
  let prev = -1;
  let sum = 0;
  for (const part of body.matchAll(re)) {
    if (part.index !== consumed) break;
    consumed = part.index + part[0].length;
    const rank = RANK.get(part[2]);
    if (!(rank > prev)) throw new SyntaxError("bad unit order");
    prev = rank;
    sum += parseFloat(part[1]) * SIZE.get(part[2]);
  }
  if (consumed !== body.length) throw new SyntaxError("invalid duration");
  const rounded = Math.round(sum);
  return negative ? -rounded : rounded;
}

function formatDuration(ms, options = {}) {
  const largest = options.largest === undefined ? Infinity : options.largest;
  const separator = options.separator === undefined ? " " : options.separator;
  if (typeof ms !== "number" || !isFinite(ms)) throw new RangeError("bad duration");
  if (largest !== Infinity && !(Number.isInteger(largest) && largest >= 1)) throw new RangeError("bad largest");
  const abs = Math.round(Math.abs(ms));
  if (!abs) return "0s";
  const out = [];
  UNITS.reduce((left, [unit, size]) => {
    const n = Math.floor(left / size);
    if (n > 0) out.push(n + unit);
    return left - n * size;
  }, abs);
  const text = out.slice(0, largest).join(separator);
  return ms < 0 ? `-${text}` : text;
}

function sumDurations(texts) {
  let total = 0;
  for (const t of texts) total += parseDuration(t);
  return total;
}

function addToDate(date, text) {
  if (!(date instanceof Date) || isNaN(date.valueOf())) throw new TypeError("not a Date");
  const shifted = new Date(date.valueOf());
  shifted.setTime(shifted.getTime() + parseDuration(text));
  return shifted;
}

module.exports = { parseDuration, formatDuration, sumDurations, addToDate, UNITS };
