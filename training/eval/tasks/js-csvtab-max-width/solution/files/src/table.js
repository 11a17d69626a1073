"use strict";

const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;

/** Cells as display strings: embedded newlines shown as spaces, tabs expanded. */
function cellText(value) {
  return String(value ?? "").replace(/\r?\n|\r/g, " ").replace(/\t/g, "    ");
}

/** Characters on screen (code points, so an emoji or accented letter counts once). */
function displayWidth(text) {
  return Array.from(text).length;
}

/** `text` cut to `maxWidth` characters, its last one "…", when it is longer (null: no limit). */
function truncate(text, maxWidth) {
  if (maxWidth == null) return text;
  const chars = Array.from(text);
  if (chars.length <= maxWidth) return text;
  return chars.slice(0, maxWidth - 1).join("") + "…";
}

/** Pick columns by name (from the header) or 1-based number. */
function selectColumns(header, rows, columns) {
  if (!columns || !columns.length) return { header, rows };
  const width = Math.max(header ? header.length : 0, ...rows.map((r) => r.length));
  const indexes = columns.map((col) => {
    const name = String(col).trim();
    if (/^\d+$/.test(name)) {
      const n = Number(name);
      if (n < 1 || n > width) throw new Error(`no column ${n}`);
      return n - 1;
    }
    const at = header ? header.indexOf(name) : -1;
    if (at < 0) throw new Error(`no column named ${JSON.stringify(name)}`);
    return at;
  });
  const pick = (row) => indexes.map((i) => row[i] ?? "");
  return { header: header ? pick(header) : null, rows: rows.map(pick) };
}

/**
 * Lay out a table: { header: string[] | null, rows: string[][], widths: number[],
 * align: ("left"|"right")[] }. Short rows are padded with empty cells;
 * with maxWidth, every cell (header included) is cut to at most that many characters.
 */
function layout(records, { header = true, columns = null, maxWidth = null } = {}) {
  if (maxWidth != null && !(Number.isInteger(maxWidth) && maxWidth >= 1)) {
    throw new Error(`maxWidth must be a whole number of at least 1, not ${maxWidth}`);
  }
  const all = records.map((r) => r.map(cellText));
  let head = header && all.length ? all[0] : null;
  let body = header ? all.slice(1) : all;
  // Columns are picked by their full names; only then are the cells cut.
  ({ header: head, rows: body } = selectColumns(head, body, columns));
  const cut = (r) => r.map((cell) => truncate(cell, maxWidth));
  head = head ? cut(head) : null;
  body = body.map(cut);
  const count = Math.max(head ? head.length : 0, ...body.map((r) => r.length), 0);
  const pad = (r) => Array.from({ length: count }, (_, i) => r[i] ?? "");
  head = head ? pad(head) : null;
  body = body.map(pad);
  const widths = Array.from({ length: count }, (_, i) =>
    Math.max(head ? displayWidth(head[i]) : 0, ...body.map((r) => displayWidth(r[i])), 0)
  );
  const align = widths.map((_, i) => {
    const cells = body.map((r) => r[i]).filter((c) => c.trim() !== "");
    return cells.length && cells.every((c) => NUMBER.test(c.trim())) ? "right" : "left";
  });
  return { header: head, rows: body, widths, align };
}

module.exports = { layout, cellText, displayWidth, selectColumns, truncate };
