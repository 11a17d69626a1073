"use strict";
// Deterministic generator of data/ (run by setup.sh in /app): five months of order exports.
const fs = require("node:fs");

let seed = 7310225;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const weighted = (pairs) => {
  let r = rand() * pairs.reduce((a, [, w]) => a + w, 0);
  for (const [v, w] of pairs) if ((r -= w) < 0) return v;
  return pairs[0][0];
};

const MONTHS = ["2025-03", "2025-04", "2025-05", "2025-06", "2025-07"];
const RATES = {};
for (const [i, m] of MONTHS.entries()) {
  RATES[m] = {
    USD: +(1.07 + 0.012 * i + rand() * 0.01).toFixed(4),
    GBP: +(0.842 - 0.004 * i + rand() * 0.004).toFixed(4),
    CHF: +(0.953 + 0.006 * i + rand() * 0.004).toFixed(4),
    PLN: +(4.28 + 0.03 * i + rand() * 0.02).toFixed(4),
  };
}
fs.mkdirSync("data/exports", { recursive: true });
fs.writeFileSync(
  "data/rates.json",
  JSON.stringify({ base: "EUR", note: "units of each currency per 1 EUR, one rate per calendar month (UTC)", monthly: RATES }, null, 2) + "\n"
);

const COUNTRIES = [["DE", 45], ["AT", 15], ["FR", 12], ["NL", 10], ["PL", 8], ["CH", 6], ["GB", 4]];
const NAMES = { DE: "Germany", AT: "Austria", FR: "France", NL: "Netherlands", PL: "Poland", CH: "Switzerland", GB: "United Kingdom" };
const CURRENCY = { DE: [["EUR", 80], ["USD", 10], ["GBP", 5], ["CHF", 5]], AT: [["EUR", 1]], FR: [["EUR", 1]], NL: [["EUR", 1]], PL: [["PLN", 3], ["EUR", 1]], CH: [["CHF", 1]], GB: [["GBP", 1]] };
const OFFSETS = ["+00:00", "+01:00", "+02:00", "-04:00", "+05:30", "Z"];

function iso(ms, offset) {
  const mins = offset === "Z" ? 0 : (offset[0] === "-" ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4)));
  const local = new Date(ms + mins * 60000).toISOString().slice(0, 19);
  return local + offset;
}

const START = Date.UTC(2025, 2, 1);
const END = Date.UTC(2025, 7, 1);
const orders = [];
let next = 100001;
function makeOrder(ms, forced = {}) {
  const country = forced.country ?? weighted(COUNTRIES);
  const currency = forced.currency ?? weighted(CURRENCY[country]);
  const cents = forced.cents ?? int(900, 42000) * (currency === "PLN" ? 4 : 1);
  const o = { id: `ORD-${next++}`, placed: ms, offset: forced.offset ?? pick(OFFSETS), country, currency, cents, status: weighted([["paid", 40], ["shipped", 45], ["cancelled", 8], ["refunded", 7]]) };
  orders.push(o);
  return o;
}
for (let ms = START; ms < END; ms += int(40, 200) * 60000) makeOrder(ms);
// Orders near the quarter's edges, where the local date and the UTC date differ.
const edge = (y, mo, d, h, mi, offset, cents, currency = "EUR") =>
  makeOrder(Date.UTC(y, mo, d, h, mi), { country: "DE", currency, cents, offset });
edge(2025, 2, 31, 22, 40, "+02:00", 185000); // 1 Apr local, still March in UTC
edge(2025, 2, 31, 23, 55, "+01:00", 99000);
edge(2025, 3, 1, 0, 20, "-04:00", 143000); // 31 Mar local, April in UTC
edge(2025, 5, 30, 23, 30, "+02:00", 211000, "USD"); // 1 Jul local, still June in UTC
edge(2025, 6, 1, 1, 15, "-04:00", 176000); // 30 Jun local, July in UTC
edge(2025, 6, 1, 0, 5, "-04:00", 98000, "GBP");
for (const o of orders.slice(-6)) o.status = "paid";

// Export batches: every few hours the orders placed since the last one; some orders come
// again later with their new status (paid -> shipped, refunds, cancellations).
orders.sort((a, b) => a.placed - b.placed);
const batches = [];
let i = 0;
for (let t = START + 6 * 3600000; i < orders.length || t < END + 86400000 * 3; t += int(4, 14) * 3600000) {
  const fresh = [];
  const before = i;
  while (i < orders.length && orders[i].placed <= t - 1800000) fresh.push({ ...orders[i++] });
  const again = [];
  for (let k = Math.max(0, before - 400); k < before; k++) {
    const o = orders[k];
    if (o.placed < t - 86400000 * 20 || rand() > 0.02) continue;
    if (o.status === "paid") o.status = weighted([["shipped", 8], ["refunded", 1], ["cancelled", 1]]);
    else if (o.status === "shipped" && rand() < 0.15) o.status = "refunded";
    again.push({ ...o });
  }
  if (!fresh.length && !again.length) continue;
  batches.push({ t, orders: [...fresh, ...again] });
  if (batches.length > 1000) break;
}
const MIGRATION = Date.UTC(2025, 4, 12, 9);
batches.forEach((b, n) => {
  const schema = b.t < MIGRATION ? 1 : 2;
  const out = {
    schema,
    exported_at: new Date(b.t).toISOString(),
    orders: b.orders.map((o) =>
      schema === 1
        ? { order_id: o.id, placed_at: iso(o.placed, o.offset), country: NAMES[o.country], currency: o.currency, total: (o.cents / 100).toFixed(2), status: o.status }
        : { id: o.id, placed_at: iso(o.placed, o.offset), ship_to: { country: rand() < 0.1 ? o.country.toLowerCase() : o.country, city: "—" }, amount: { currency: o.currency, total_cents: o.cents }, state: o.status.toUpperCase() }
    ),
  };
  fs.writeFileSync(`data/exports/batch-${String(n + 1).padStart(4, "0")}.json`, JSON.stringify(out) + "\n");
});
