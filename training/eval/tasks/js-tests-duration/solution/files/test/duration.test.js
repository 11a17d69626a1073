"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { parseDuration, formatDuration, sumDurations, addToDate } = require("../src/duration");

test("parseDuration: single units", () => {
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("90s"), 90000);
  assert.equal(parseDuration("5m"), 300000);
  assert.equal(parseDuration("2h"), 7200000);
  assert.equal(parseDuration("1d"), 86400000);
  assert.equal(parseDuration("0s"), 0);
});

test("parseDuration: several parts, spaces", () => {
  assert.equal(parseDuration("1h30m"), 5400000);
  assert.equal(parseDuration("1h 30m"), 5400000);
  assert.equal(parseDuration("2 d 4 h"), 187200000);
  assert.equal(parseDuration("  1m 5s 1ms  "), 65001);
  assert.equal(parseDuration("1d2h3m4s5ms"), 93784005);
});

test("parseDuration: decimals and rounding to whole ms", () => {
  assert.equal(parseDuration("1.5h"), 5400000);
  assert.equal(parseDuration("0.25s"), 250);
  assert.equal(parseDuration("1.5ms"), 2);
  assert.equal(parseDuration("1.4ms"), 1);
});

test("parseDuration: negatives", () => {
  assert.equal(parseDuration("-2m"), -120000);
  assert.equal(parseDuration(" - 1h 30m"), -5400000);
});

test("parseDuration: invalid input", () => {
  for (const bad of ["", "   ", "-", "abc", "5", "h", "1h xyz", "1x", "30m1h", "1h1h", "1s 1s", "1h,30m", ".5h"]) {
    assert.throws(() => parseDuration(bad), SyntaxError, JSON.stringify(bad));
  }
  for (const bad of [5, null, undefined, {}]) assert.throws(() => parseDuration(bad), TypeError);
});

test("formatDuration: units, zeros left out", () => {
  assert.equal(formatDuration(0), "0s");
  assert.equal(formatDuration(1), "1ms");
  assert.equal(formatDuration(1000), "1s");
  assert.equal(formatDuration(60000), "1m");
  assert.equal(formatDuration(3600000), "1h");
  assert.equal(formatDuration(86400000), "1d");
  assert.equal(formatDuration(3605000), "1h 5s");
  assert.equal(formatDuration(93784005), "1d 2h 3m 4s 5ms");
});

test("formatDuration: sign and fractions", () => {
  assert.equal(formatDuration(-90061001), "-1d 1h 1m 1s 1ms");
  assert.equal(formatDuration(1.5), "2ms");
  assert.equal(formatDuration(1.4), "1ms");
  assert.equal(formatDuration(999.6), "1s");
  assert.equal(formatDuration(0.4), "0s");
});

test("formatDuration: largest drops the rest without rounding", () => {
  assert.equal(formatDuration(7199999, { largest: 1 }), "1h");
  assert.equal(formatDuration(5400000, { largest: 1 }), "1h");
  assert.equal(formatDuration(93784005, { largest: 2 }), "1d 2h");
  assert.equal(formatDuration(3605000, { largest: 2 }), "1h 5s");
  assert.equal(formatDuration(-93784005, { largest: 3 }), "-1d 2h 3m");
  assert.equal(formatDuration(1000, { largest: 5 }), "1s");
});

test("formatDuration: separator", () => {
  assert.equal(formatDuration(93784005, { separator: "" }), "1d2h3m4s5ms");
  assert.equal(formatDuration(3605000, { separator: ", " }), "1h, 5s");
});

test("formatDuration: bad input", () => {
  for (const bad of [NaN, Infinity, "5", null]) assert.throws(() => formatDuration(bad), RangeError);
  for (const largest of [0, -1, 1.5]) assert.throws(() => formatDuration(1000, { largest }), RangeError);
});

test("round trip", () => {
  for (const ms of [1, 999, 65001, 5400000, 93784005]) assert.equal(parseDuration(formatDuration(ms)), ms);
});

test("sumDurations", () => {
  assert.equal(sumDurations([]), 0);
  assert.equal(sumDurations(["1h", "30m", "-15m"]), 4500000);
  assert.throws(() => sumDurations(["1h", "nope"]), SyntaxError);
});

test("addToDate", () => {
  const start = new Date("2025-03-01T00:00:00Z");
  const later = addToDate(start, "1d 2h");
  assert.equal(later.toISOString(), "2025-03-02T02:00:00.000Z");
  assert.equal(start.toISOString(), "2025-03-01T00:00:00.000Z");
  assert.notEqual(later, start);
  assert.equal(addToDate(start, "-90s").toISOString(), "2025-02-28T23:58:30.000Z");
  assert.throws(() => addToDate(new Date("nope"), "1s"), TypeError);
  assert.throws(() => addToDate("2025-03-01", "1s"), TypeError);
});
