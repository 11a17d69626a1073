"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

const APP = "/app";
const DATA = path.join(APP, "data");
const { runSync } = require(path.join(APP, "src/sync.js"));
const { fromCardDav } = require(path.join(APP, "src/providers/carddav.js"));
const { fromGoogle } = require(path.join(APP, "src/providers/google.js"));
const { mergeContacts } = require(path.join(APP, "src/contacts/merge.js"));

const quiet = { info() {}, warn() {}, error() {} };

/** The records of the exports, read independently: [{ id, email (raw) or null }]. */
function records() {
  const out = [];
  const dir = (name) => fs.readdirSync(path.join(DATA, name)).sort().map((f) => path.join(DATA, name, f));
  for (const f of dir("google")) {
    for (const p of JSON.parse(fs.readFileSync(f, "utf8")).connections) {
      const list = p.emailAddresses ?? [];
      const e = list.find((x) => x.metadata?.primary) ?? list[0];
      out.push({ id: `google:${p.resourceName.slice("people/".length)}`, email: e ? e.value : null });
    }
  }
  for (const f of dir("carddav")) {
    for (const c of JSON.parse(fs.readFileSync(f, "utf8")).cards) {
      const list = c.emails ?? [];
      const e = list.find((x) => x.pref) ?? list[0];
      out.push({ id: `carddav:${c.uid}`, email: e ? e.value : null });
    }
  }
  for (const f of dir("csv")) {
    const [head, ...lines] = fs.readFileSync(f, "utf8").split("\n").filter((l) => l.trim());
    const at = head.split(",").indexOf("email");
    for (const line of lines) {
      const cells = line.split(",");
      out.push({ id: `crm:${cells[0].trim()}`, email: cells[at].trim() || null });
    }
  }
  return out;
}

test("the nightly sync over the exports runs through", async () => {
  const all = records();
  const withEmail = new Set(all.filter((r) => r.email).map((r) => r.email.trim().toLowerCase()));
  const without = all.filter((r) => !r.email);
  assert.ok(without.some((r) => r.id.startsWith("carddav:")), "the data lost its cards without e-mail");
  const { read, contacts } = await runSync(DATA, null, quiet);
  assert.equal(read, all.length);
  assert.equal(contacts.length, withEmail.size + without.length);
  const ids = new Set(contacts.map((c) => c.id));
  for (const r of without) assert.ok(ids.has(r.id), `${r.id} (no e-mail) was dropped`);
  const emails = contacts.filter((c) => c.email).map((c) => c.email);
  assert.equal(new Set(emails).size, emails.length, "an address appears twice");
  assert.deepEqual(new Set(emails), withEmail);
});

test("bin/sync.js writes every contact, with email null where there is none", () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sync-")), "contacts.json");
  const done = spawnSync(process.execPath, [path.join(APP, "bin/sync.js"), DATA, out], { cwd: APP, encoding: "utf8", timeout: 60000 });
  assert.equal(done.status, 0, (done.stderr || "").slice(-2000));
  const contacts = JSON.parse(fs.readFileSync(out, "utf8"));
  const all = records();
  assert.equal(contacts.filter((c) => c.id.startsWith("carddav:") && c.email === null).length, all.filter((r) => r.id.startsWith("carddav:") && !r.email).length);
  for (const c of contacts) {
    assert.ok("email" in c && (c.email === null || typeof c.email === "string"), `${c.id}: email ${JSON.stringify(c.email)}`);
    assert.ok(Array.isArray(c.sources) && c.sources.length > 0, c.id);
  }
});

test("a card without an address ends up as a contact with email null", () => {
  for (const card of [
    { uid: "u1", fn: "Front desk", emails: [], tels: [{ value: "+49 30 123456" }] },
    { uid: "u2", fn: "Taxi Central" },
  ]) {
    const c = fromCardDav(card, quiet);
    assert.ok(c.email == null || c.email === "", `${card.uid}: email ${JSON.stringify(c.email)}`);
    const [merged, ...rest] = mergeContacts([[c]]);
    assert.equal(rest.length, 0);
    assert.equal(merged.email, null, card.uid);
    assert.equal(c.id, `carddav:${card.uid}`);
    assert.equal(c.name, card.fn);
  }
  assert.equal(fromCardDav({ uid: "u1", fn: "A", tels: [{ value: "+49 30 123456" }] }, quiet).phone, "+4930123456");
});

test("cards still use their preferred address", () => {
  const c = fromCardDav({ uid: "u3", fn: "Ada", emails: [{ value: "a@home.example.org" }, { value: "Ada@Example.org", pref: true }] }, quiet);
  assert.equal(c.email, "Ada@Example.org");
  assert.equal(fromCardDav({ uid: "u4", fn: "B", emails: [{ value: "b@x.org" }, { value: "c@x.org" }] }, quiet).email, "b@x.org");
});

test("contacts without an address are kept apart, the rest still merge", () => {
  const cards = [
    fromCardDav({ uid: "a", fn: "Front desk", emails: [] }, quiet),
    fromCardDav({ uid: "b", fn: "Front desk" }, quiet),
    fromCardDav({ uid: "c", fn: "Ada Lovelace", emails: [{ value: " ADA@example.org" }] }, quiet),
  ];
  const people = [
    fromGoogle({ resourceName: "people/c1", names: [{ displayName: "Ada L." }], emailAddresses: [{ value: "ada@example.org", metadata: { primary: true } }], phoneNumbers: [{ value: "+44 20 7946 0000" }] }, quiet),
    fromGoogle({ resourceName: "people/c2", names: [{ displayName: "Front desk" }] }, quiet),
  ];
  const out = mergeContacts([cards, people]);
  assert.equal(out.length, 4);
  const ada = out.find((c) => c.email === "ada@example.org");
  assert.deepEqual(ada, { id: "carddav:c", name: "Ada Lovelace", email: "ada@example.org", phone: "+442079460000", sources: ["carddav", "google"] });
  const desk = out.filter((c) => c.name === "Front desk");
  assert.deepEqual(desk.map((c) => c.id), ["carddav:a", "carddav:b", "google:c2"]);
  assert.ok(desk.every((c) => c.email === null && c.sources.length === 1));
});
