"use strict";

const { cleanName, normalizePhone } = require("../contacts/normalize");

/** A CardDAV card, as the exporter writes it ({ uid, fn, emails: [{ value, pref }], tels }). */
function fromCardDav(card, log) {
  const emails = card.emails ?? [];
  const preferred = emails.find((e) => e.pref) ?? emails[0];
  const phone = normalizePhone(card.tels?.[0]?.value);
  if (phone && !phone.ok) log.warn(`phone: could not parse ${JSON.stringify(phone.raw)} (${card.uid}), keeping it as it is`);
  return {
    id: `carddav:${card.uid}`,
    name: cleanName(card.fn),
    email: preferred?.value,
    phone: phone ? (phone.ok ? phone.value : phone.raw) : null,
    sources: ["carddav"],
  };
}

module.exports = { fromCardDav };
