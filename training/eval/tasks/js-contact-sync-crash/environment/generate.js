"use strict";
// Deterministic generator of data/ and logs/ (run by setup.sh in /app).
const fs = require("node:fs");
const path = require("node:path");

let seed = 20250517;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

const FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Dennis", "Margaret", "Linus", "Radia", "John", "Sophie", "Tim", "Hedy", "Karen", "Niklaus", "Anita", "Guido", "Joan", "Leslie", "Shafi", "Whitfield", "Mary", "Lynn", "Yukihiro", "Bjarne", "Adele", "Ivan"];
const LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Ritchie", "Hamilton", "Torvalds", "Perlman", "McCarthy", "Wilson", "Berners-Lee", "Lamarr", "Jones", "Wirth", "Borg", "van Rossum", "Clarke", "Lamport", "Goldwasser", "Diffie", "Keller", "Conway", "Matsumoto", "Stroustrup", "Goldberg", "Sutherland"];
const DOMAINS = ["example.org", "mail.example.com", "corp.example.net", "uni.example.edu"];

const people = [];
for (let i = 0; i < 700; i++) {
  const first = pick(FIRST);
  const last = pick(LAST);
  const local = `${first}.${last}`.toLowerCase().replace(/[^a-z.]/g, "") + (i % 7 === 0 ? "" : String(i));
  people.push({ name: `${first} ${last}`, email: `${local}@${pick(DOMAINS)}`, phone: rand() < 0.7 ? `+49 30 ${int(100000, 999999)}` : null });
}
const variant = (email) => {
  const r = rand();
  if (r < 0.2) return email.toUpperCase();
  if (r < 0.35) return email[0].toUpperCase() + email.slice(1);
  if (r < 0.45) return ` ${email} `;
  return email;
};
const phoneText = (p) => {
  if (!p) return null;
  const r = rand();
  if (r < 0.05) return pick(["ask reception", "ext. 12", "n/a"]);
  if (r < 0.3) return p.replace("+49 30 ", "+49 (0) 30 ");
  return p;
};

fs.mkdirSync("data/google", { recursive: true });
fs.mkdirSync("data/carddav", { recursive: true });
fs.mkdirSync("data/csv", { recursive: true });

let gid = 1000;
for (let f = 1; f <= 24; f++) {
  const connections = [];
  for (let k = int(15, 30); k > 0; k--) {
    const p = pick(people);
    const person = { resourceName: `people/c${gid++}`, names: [{ displayName: p.name }] };
    if (rand() < 0.9) {
      person.emailAddresses = [{ value: variant(p.email), metadata: { primary: true } }];
      if (rand() < 0.2) person.emailAddresses.unshift({ value: `old.${p.email}`, metadata: { primary: false } });
    }
    const phone = phoneText(p.phone);
    if (phone) person.phoneNumbers = [{ value: phone }];
    connections.push(person);
  }
  fs.writeFileSync(`data/google/page-${String(f).padStart(3, "0")}.json`, JSON.stringify({ connections, nextPageToken: f < 24 ? `t${f}` : null }, null, 1));
}

let uid = 1;
const noEmailFiles = new Set([9, 22, 31]);
for (let f = 1; f <= 36; f++) {
  const cards = [];
  for (let k = int(12, 25); k > 0; k--) {
    const p = pick(people);
    const card = { uid: `urn:uuid:${(0x5a000000 + uid++).toString(16)}-card`, fn: p.name };
    card.emails = [{ value: variant(p.email), pref: rand() < 0.5 }];
    if (rand() < 0.25) card.emails.push({ value: `${p.email.split("@")[0]}@home.example.org`, pref: false });
    const phone = phoneText(p.phone);
    if (phone) card.tels = [{ value: phone, type: "work" }];
    cards.push(card);
  }
  if (noEmailFiles.has(f)) {
    for (let k = 0; k < 3; k++) {
      const card = { uid: `urn:uuid:${(0x5a000000 + uid++).toString(16)}-card`, fn: pick(["Front desk", "Building security", "Pizza Napoli", "Taxi Central"]) };
      if (k !== 1) card.emails = [];
      card.tels = [{ value: `+49 30 ${int(100000, 999999)}` }];
      cards.splice(int(0, cards.length), 0, card);
    }
  }
  fs.writeFileSync(`data/carddav/book-${String(f).padStart(3, "0")}.json`, JSON.stringify({ addressBook: "work", cards }, null, 1));
}

const rows = ["id,name,email,phone"];
for (let r = 1; r <= 320; r++) {
  const p = pick(people);
  rows.push([`C${5000 + r}`, p.name, rand() < 0.85 ? variant(p.email).trim() : "", phoneText(p.phone) ?? ""].join(","));
}
fs.writeFileSync("data/csv/crm-export.csv", rows.join("\n") + "\n");

// Logs: two weeks, one file a day.
fs.mkdirSync("logs", { recursive: true });
const TRACE = fs.readFileSync("/environment/crash.txt", "utf8").trimEnd().split("\n");
const routes = ["/admin/contacts", "/admin/contacts?page=2", "/healthz", "/admin/sync/status", "/metrics"];
for (let day = 4; day <= 17; day++) {
  const date = `2025-05-${String(day).padStart(2, "0")}`;
  const lines = [];
  let sec = 0;
  const stamp = () => {
    sec += int(1, 40);
    const h = Math.floor(sec / 3600) % 24, m = Math.floor(sec / 60) % 60, s = sec % 60;
    return `${date}T${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}.${String(int(0, 999)).padStart(3, "0")}Z`;
  };
  const noise = () => {
    const r = rand();
    if (r < 0.45) return `INFO  http: GET ${pick(routes)} 200 ${int(2, 90)}ms`;
    if (r < 0.6) return `INFO  worker: heartbeat ok (rss=${int(80, 140)}MB, queue=0)`;
    if (r < 0.72) return `WARN  google: rate limited (429), retrying in ${int(1, 8)}s (attempt ${int(1, 3)})`;
    if (r < 0.8) return `ERROR google: HTTP 503 from people.googleapis.com, retrying in 2s`;
    if (r < 0.88) return `WARN  phone: could not parse ${JSON.stringify(pick(["ask reception", "ext. 12", "n/a"]))} (people/c${int(1000, 1600)}), keeping it as it is`;
    if (r < 0.94) return `WARN  carddav: server sent no ETag for ${pick(["work", "private"])} address book, full download`;
    return `INFO  http: POST /admin/contacts/${int(1, 900)}/notes 201 ${int(5, 60)}ms`;
  };
  for (let i = 0; i < 260; i++) lines.push(`${stamp()} ${noise()}`);
  lines.push(`${stamp()} INFO  sync: nightly run started (data=/app/data)`);
  const crashes = day >= 15;
  const books = 36;
  for (let g = 1; g <= 24; g++) {
    lines.push(`${stamp()} INFO  sync: provider=google file=google/page-${String(g).padStart(3, "0")}.json people=${int(15, 30)}`);
    if (rand() < 0.3) lines.push(`${stamp()} ${noise()}`);
  }
  for (let b = 1; b <= books; b++) {
    lines.push(`${stamp()} INFO  sync: provider=carddav file=carddav/book-${String(b).padStart(3, "0")}.json cards=${int(12, 28)}`);
    if (rand() < 0.3) lines.push(`${stamp()} ${noise()}`);
  }
  if (crashes) {
    lines.push(`${stamp()} INFO  sync: provider=crm file=csv/crm-export.csv rows=320`);
    lines.push(`${stamp()} ERROR FATAL sync aborted`);
    for (const t of TRACE) lines.push(t);
    lines.push(`${stamp()} ERROR scheduler: job contact-sync exited with code 1`);
  } else {
    lines.push(`${stamp()} INFO  sync: provider=crm file=csv/crm-export.csv rows=320`);
    lines.push(`${stamp()} INFO  sync: done, ${int(1500, 1600)} records in, ${int(650, 700)} contacts out`);
    lines.push(`${stamp()} INFO  scheduler: job contact-sync finished (exit 0)`);
  }
  for (let i = 0; i < 330; i++) lines.push(`${stamp()} ${noise()}`);
  fs.writeFileSync(path.join("logs", `contact-sync-${date}.log`), lines.join("\n") + "\n");
}
