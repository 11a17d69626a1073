"use strict";

const { cleanName, normalizePhone } = require("../contacts/normalize");

/** Rows of the CRM's CSV export: id,name,email,phone (no quoting; the CRM strips commas). */
function parseCrmCsv(text) {
  const [head, ...lines] = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const cols = head.split(",").map((c) => c.trim().toLowerCase());
  return lines.map((line) => {
    const cells = line.split(",");
    return Object.fromEntries(cols.map((c, i) => [c, (cells[i] ?? "").trim()]));
  });
}

function fromCsv(row, log) {
  const phone = normalizePhone(row.phone || null);
  if (phone && !phone.ok) log.warn(`phone: could not parse ${JSON.stringify(phone.raw)} (crm ${row.id}), keeping it as it is`);
  return {
    id: `crm:${row.id}`,
    name: cleanName(row.name),
    email: row.email || null,
    phone: phone ? (phone.ok ? phone.value : phone.raw) : null,
    sources: ["crm"],
  };
}

module.exports = { parseCrmCsv, fromCsv };
