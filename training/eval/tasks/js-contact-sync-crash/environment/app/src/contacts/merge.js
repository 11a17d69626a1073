"use strict";

const { normalizeEmail } = require("./normalize");

/**
 * Merge contact lists: contacts with the same e-mail address (compared by normalizeEmail)
 * become one, whose fields come from the first of them that has the field, and whose
 * sources are all of theirs. Contacts without an e-mail address are kept as they are and
 * never merged. Returns them sorted by name, then id.
 */
function mergeContacts(lists) {
  const byEmail = new Map();
  const loose = [];
  lists.flat().forEach((contact) => {
    if (contact.email === null) {
      loose.push({ ...contact, sources: [...contact.sources] });
      return;
    }
    const key = normalizeEmail(contact.email);
    const seen = byEmail.get(key);
    if (!seen) {
      byEmail.set(key, { ...contact, email: key, sources: [...contact.sources] });
      return;
    }
    for (const field of ["name", "phone"]) {
      if (seen[field] == null || seen[field] === "") seen[field] = contact[field];
    }
    for (const s of contact.sources) if (!seen.sources.includes(s)) seen.sources.push(s);
  });
  return [...byEmail.values(), ...loose].sort(
    (a, b) => a.name.localeCompare(b.name, "en") || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

module.exports = { mergeContacts };
