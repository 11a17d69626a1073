"use strict";

const { parseCsv } = require("./csv");
const { layout } = require("./table");
const { formatTable, FORMATS } = require("./format");

/**
 * Render parsed CSV rows as a table string.
 * options: format ("text" | "markdown"), header (boolean, default true),
 *          columns (names or 1-based numbers, to pick and order columns),
 *          maxWidth (cells longer than this many characters are cut, ending in "…")
 */
function render(records, { format = "text", header = true, columns = null, maxWidth = null } = {}) {
  if (!FORMATS[format]) throw new Error(`unknown format ${JSON.stringify(format)} (text or markdown)`);
  return formatTable(layout(records, { header, columns, maxWidth }), format);
}

module.exports = { parseCsv, render };
