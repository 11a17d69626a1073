"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { mergeContacts } = require("../src/contacts/merge");
const { normalizePhone } = require("../src/contacts/normalize");

const c = (id, name, email, phone, source) => ({ id, name, email, phone, sources: [source] });

test("same address, different case and spaces, is one contact", () => {
  const out = mergeContacts([
    [c("google:1", "Ada Lovelace", "Ada@Example.org", null, "google")],
    [c("crm:7", "A. Lovelace", " ada@example.org ", "+4930123456", "crm")],
  ]);
  assert.equal(out.length, 1);
  assert.deepEqual(out[0], { id: "google:1", name: "Ada Lovelace", email: "ada@example.org", phone: "+4930123456", sources: ["google", "crm"] });
});

test("contacts without an address are kept apart", () => {
  const out = mergeContacts([[c("crm:1", "Bob", null, null, "crm"), c("crm:2", "Bob", null, null, "crm")]]);
  assert.equal(out.length, 2);
});

test("phones", () => {
  assert.deepEqual(normalizePhone("+49 (0) 30 123-456"), { value: "+4930123456", ok: true });
  assert.equal(normalizePhone("ask reception").ok, false);
});
