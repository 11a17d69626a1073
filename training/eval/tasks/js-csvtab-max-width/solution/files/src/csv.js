"use strict";

/**
 * Parse CSV text (RFC 4180: quoted fields may hold the delimiter, "" and newlines) into an
 * array of rows, each an array of strings. A trailing newline does not make an empty row.
 */
function parseCsv(text, { delimiter = "," } = {}) {
  if (delimiter.length !== 1) throw new Error("the delimiter must be one character");
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  let i = 0;
  if (text.charCodeAt(0) === 0xfeff) i = 1; // BOM
  for (; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += ch;
    } else if (ch === '"' && field === "") quoted = true;
    else if (ch === delimiter) {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += ch;
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

module.exports = { parseCsv };
