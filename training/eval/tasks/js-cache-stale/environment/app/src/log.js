"use strict";

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 };

/** A logger writing "2025-03-10T14:03:12.204Z INFO  message" lines to a stream. */
function createLogger({ level = "info", stream = process.stderr, now = () => new Date() } = {}) {
  const min = LEVELS[level] ?? LEVELS.info;
  const log = {};
  for (const [name, rank] of Object.entries(LEVELS)) {
    log[name] = (message) => {
      if (rank >= min) stream.write(`${now().toISOString()} ${name.toUpperCase().padEnd(5)} ${message}\n`);
    };
  }
  return log;
}

module.exports = { createLogger };
