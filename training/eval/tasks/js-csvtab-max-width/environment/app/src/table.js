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
 * align: ("left"|"right")[] }. Short rows are padded with empty cells.
 */
function layout(records, { header = true, columns = null } = {}) {
  const all = records.map((r) => r.map(cellText));
  let head = header && all.length ? all[0] : null;
  let body = header ? all.slice(1) : all;
  ({ header: head, rows: body } = selectColumns(head, body, columns));
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

module.exports = { layout, cellText, displayWidth, selectColumns };
