"use strict";

const { cleanName, normalizePhone } = require("../contacts/normalize");

/** A People API person ({ resourceName, names, emailAddresses, phoneNumbers }) as a contact. */
function fromGoogle(person, log) {
  const name = cleanName(person.names?.[0]?.displayName);
  const primary = (person.emailAddresses ?? []).find((e) => e.metadata?.primary) ?? person.emailAddresses?.[0];
  const phone = normalizePhone(person.phoneNumbers?.[0]?.value);
  if (phone && !phone.ok) log.warn(`phone: could not parse ${JSON.stringify(phone.raw)} (${person.resourceName}), keeping it as it is`);
  return {
    id: `google:${person.resourceName.replace(/^people\//, "")}`,
    name,
    email: primary?.value ?? null,
    phone: phone ? (phone.ok ? phone.value : phone.raw) : null,
    sources: ["google"],
  };
}

module.exports = { fromGoogle };
