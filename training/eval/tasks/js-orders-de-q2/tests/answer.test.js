"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const APP = "/app";
const DATA = path.join(APP, "data");
const Q2_START = Date.UTC(2025, 3, 1);
const Q2_END = Date.UTC(2025, 6, 1);

/** Q2 2025 net revenue in EUR of the orders shipped to Germany, recomputed from the exports. */
function expected() {
  const rates = JSON.parse(fs.readFileSync(path.join(DATA, "rates.json"), "utf8")).monthly;
  const latest = new Map();
  const files = fs.readdirSync(path.join(DATA, "exports")).filter((f) => f.endsWith(".json"));
  assert.ok(files.length >= 300, `only ${files.length} exports`);
  for (const file of files) {
    const batch = JSON.parse(fs.readFileSync(path.join(DATA, "exports", file), "utf8"));
    const at = Date.parse(batch.exported_at);
    for (const o of batch.orders) {
      let rec;
      if (batch.schema === 1) {
        rec = { id: o.order_id, placed: o.placed_at, country: o.country === "Germany" ? "DE" : o.country, currency: o.currency, cents: Math.round(Number(o.total) * 100), status: o.status };
      } else {
        assert.equal(batch.schema, 2);
        rec = { id: o.id, placed: o.placed_at, country: o.ship_to.country.toUpperCase(), currency: o.amount.currency, cents: o.amount.total_cents, status: o.state.toLowerCase() };
      }
      const seen = latest.get(rec.id);
      if (!seen || seen.at <= at) latest.set(rec.id, { ...rec, at });
    }
  }
  let total = 0;
  let count = 0;
  for (const o of latest.values()) {
    if (o.country !== "DE" || o.status === "cancelled" || o.status === "refunded") continue;
    const placed = new Date(o.placed);
    if (!(placed.getTime() >= Q2_START && placed.getTime() < Q2_END)) continue;
    const month = placed.toISOString().slice(0, 7);
    const rate = o.currency === "EUR" ? 1 : rates[month][o.currency];
    assert.ok(rate > 0, `${o.currency} ${month}`);
    total += o.cents / 100 / rate;
    count++;
  }
  assert.ok(count > 300, `only ${count} orders`);
  return total;
}

function answer() {
  const file = path.join(APP, "answer.txt");
  assert.ok(fs.existsSync(file), "no answer.txt");
  const raw = fs.readFileSync(file, "utf8");
  const text = raw.trim().replace(/^(EUR|€)\s*/i, "").replace(/\s*(EUR|€)$/i, "").replace(/,(?=\d{3}(\D|$))/g, "");
  assert.match(text, /^-?\d+(\.\d+)?$/, `answer.txt should hold just the amount, not ${JSON.stringify(raw.slice(0, 200))}`);
  return Number(text);
}

test("answer.txt holds the German Q2 revenue in EUR", () => {
  const want = expected();
  assert.ok(want > 20000, `expected ${want}`);
  const got = answer();
  assert.ok(Math.abs(got - want) <= 0.5, `answer.txt says ${got}; the exports give about ${Math.round(want)}`);
});
