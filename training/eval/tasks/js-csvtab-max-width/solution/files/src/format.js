"use strict";

const { displayWidth } = require("./table");

function padCell(text, width, align) {
  const gap = " ".repeat(Math.max(0, width - displayWidth(text)));
  return align === "right" ? gap + text : text + gap;
}

function textTable({ header, rows, widths, align }) {
  const line = (cells) =>
    cells
      .map((c, i) => padCell(c, widths[i], align[i]))
      .join(" | ")
      .replace(/\s+$/, "");
  const out = [];
  if (header) {
    out.push(line(header));
    out.push(widths.map((w) => "-".repeat(w)).join("-+-"));
  }
  for (const row of rows) out.push(line(row));
  return out.join("\n");
}

function escapeMarkdown(text) {
  return text.replace(/\\/g, "\\\\").replace(/\|/g, "\\|");
}

function markdownTable({ header, rows, widths, align }) {
  const cells = (row) => row.map(escapeMarkdown);
  const escapedRows = rows.map(cells);
  const head = header ? cells(header) : widths.map(() => "");
  const w = widths.map((_, i) =>
    Math.max(3, displayWidth(head[i]), ...escapedRows.map((r) => displayWidth(r[i])))
  );
  const line = (row) => `| ${row.map((c, i) => padCell(c, w[i], align[i])).join(" | ")} |`;
  const rule = w.map((n, i) => (align[i] === "right" ? "-".repeat(n - 1) + ":" : "-".repeat(n)));
  return [line(head), `| ${rule.join(" | ")} |`, ...escapedRows.map(line)].join("\n");
}

const FORMATS = { text: textTable, markdown: markdownTable };

function formatTable(table, format = "text") {
  const fn = FORMATS[format];
  if (!fn) throw new Error(`unknown format ${JSON.stringify(format)} (text or markdown)`);
  return fn(table);
}

module.exports = { formatTable, FORMATS, padCell };
