"use strict";

const { parseDuration } = require("./duration");

/** Delays (ms) before each retry: exponential from `initial`, capped at `max`. */
function backoff({ initial = "1s", factor = 2, max = "5m", retries = 5 } = {}) {
  const first = parseDuration(initial);
  const cap = parseDuration(max);
  return Array.from({ length: retries }, (_, i) => Math.min(cap, Math.round(first * factor ** i)));
}

module.exports = { backoff };
