"use strict";

/** The key two addresses are compared by: no surrounding space, lower case. */
function normalizeEmail(email) {
  return email.trim().toLowerCase();
}

/** Digits and a leading "+", or the text as it was when it is not a phone number. */
function normalizePhone(phone) {
  if (phone == null) return null;
  const text = String(phone).trim();
  const compact = text.replace(/\(0\)/g, "").replace(/[\s().\/-]/g, "");
  if (!/^\+?\d{4,15}$/.test(compact)) return { raw: text, ok: false };
  return { value: compact, ok: true };
}

function cleanName(name) {
  return String(name ?? "").replace(/\s+/g, " ").trim();
}

module.exports = { normalizeEmail, normalizePhone, cleanName };
