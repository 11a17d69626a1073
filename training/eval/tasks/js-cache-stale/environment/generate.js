"use strict";
// Deterministic generator of logs/ (run by setup.sh in /app): five days of the price service's
// debug log, replayed from a model of the service as it runs in production (the cache of
// src/cache.js as it is). Thousands of harmless lines around the few that matter.
const fs = require("node:fs");
const path = require("node:path");

let seed = 20250310;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

const db = new Map(Object.entries(JSON.parse(fs.readFileSync("data/prices.json", "utf8"))));
const skus = [...db.keys()];
const HOT = ["SKU-1043", "SKU-0217", "SKU-2205"]; // polled by the price-comparison sites
const RACE = "SKU-0854"; // the spring-sale item
const normal = skus.filter((s) => !HOT.includes(s) && s !== RACE);
const TTL = 300000;
const DAY = 86400000;
const START = Date.parse("2025-03-10T00:00:00.000Z");
const BOOT = Date.parse("2025-03-10T06:12:40.118Z");
const RACE_AT = Date.parse("2025-03-13T14:03:12.141Z");
const USERS = ["j.weber", "m.okafor", "s.lindqvist", "a.rossi"];

// Events: [time, kind, data], replayed in time order.
const events = [];
const at = (t, kind, data = {}) => events.push([t, kind, data]);
for (const sku of HOT) for (let t = BOOT + int(1000, 60000); t < START + 5 * DAY; t += int(20000, 280000)) at(t, "get", { sku, ua: "pricebot" });
for (let t = BOOT + 5000; t < START + 5 * DAY; t += int(60000, 900000)) at(t, "get", { sku: pick(normal) });
for (let t = START + 5000; t < START + 5 * DAY; t += int(150000, 1200000)) at(t, "order", {});
for (let t = BOOT + int(200, 900); t < START + 5 * DAY; t += int(30000, 90000)) at(t, "health");
for (let t = BOOT + 60000; t < START + 5 * DAY; t += 300000) at(t, "metrics");
for (let t = START + int(0, 3600000); t < START + 5 * DAY; t += int(600000, 3600000)) at(t, "noise");
for (let d = 0; d < 5; d++) {
  if (d > 0) at(START + d * DAY + 2 * 3600000 + int(0, 600000), "import", { hot: HOT[d % HOT.length] });
  for (let k = int(4, 8); k > 0; k--) at(START + d * DAY + int(8, 18) * 3600000 + int(0, 3599999), "admin", { sku: pick(normal) });
}
// The spring sale: the item is in the newsletter, everyone looks at it.
at(RACE_AT, "race", {});
for (let t = RACE_AT + 27861; t < START + 5 * DAY; t += int(15000, 240000)) at(t, "get", { sku: RACE, hot: true });
for (let t = RACE_AT + 600000; t < START + 5 * DAY; t += int(900000, 2400000)) at(t, "order", { sku: RACE });
events.sort((a, b) => a[0] - b[0]);

// The cache as the service runs it: a read of a live entry pushes its expiry out again.
const cache = new Map(); // sku -> { value, storedAt, expiresAt }
const lines = [];
const line = (t, level, text) => lines.push([t, `${new Date(t).toISOString()} ${level.padEnd(5)} ${text}`]);

function served(sku, t) {
  const e = cache.get(sku);
  return e && t < e.expiresAt ? e.value : db.get(sku);
}

function request(t, sku) {
  const e = cache.get(sku);
  if (e && t < e.expiresAt) {
    e.expiresAt = t + TTL;
    line(t + int(0, 2), "INFO", `http: GET /price/${sku} 200 ${int(0, 2)}ms cache=hit age=${Math.round((t - e.storedAt) / 1000)}s price=${e.value}`);
    return;
  }
  const took = int(14, 60);
  cache.delete(sku);
  line(t, "DEBUG", `cache: load price:${sku} started`);
  if (rand() < 0.01) line(t + took - 3, "WARN", `db: slow query (${int(500, 1500)}ms): SELECT cents FROM prices WHERE sku = $1`);
  cache.set(sku, { value: db.get(sku), storedAt: t + took, expiresAt: t + took + TTL });
  line(t + took, "DEBUG", `cache: load price:${sku} stored`);
  line(t + took, "INFO", `http: GET /price/${sku} 200 ${took + 1}ms cache=miss price=${db.get(sku)}`);
}

function newPrice(old) {
  return Math.max(99, old + pick([-500, -250, -100, -50, 50, 100, 200]));
}

let orderId = 88001;
line(BOOT - 9000, "INFO", "server: SIGTERM, draining connections");
line(BOOT - 8200, "INFO", "server: pricesvc 2.3.0 stopped");
line(BOOT, "INFO", "server: pricesvc 2.3.1 listening on :8080 (cache ttl=300s, max=5000, log=debug)");
for (const [t, kind, data] of events) {
  if (kind === "get") request(t, data.sku);
  else if (kind === "health") line(t, "INFO", `http: GET /healthz 200 0ms`);
  else if (kind === "metrics") line(t, "INFO", `metrics: flushed ${int(900, 2400)} samples to statsd`);
  else if (kind === "noise") {
    const r = rand();
    if (r < 0.3) line(t, "WARN", `http: client closed the connection before the response (GET /price/${pick(normal)})`);
    else if (r < 0.5) line(t, "ERROR", `payments: gateway timeout after 10000ms, retrying (attempt ${int(1, 3)})`);
    else if (r < 0.7) line(t, "INFO", `gc: heap ${int(150, 230)}MB -> ${int(90, 140)}MB in ${int(8, 40)}ms`);
    else if (r < 0.85) line(t, "WARN", `db: connection pool at ${int(18, 20)}/20, waiting`);
    else line(t, "WARN", `http: 429 for ${int(1, 254)}.${int(0, 255)}.${int(0, 255)}.${int(1, 254)} (rate limit 50/s)`);
  } else if (kind === "admin") {
    const old = db.get(data.sku);
    const cents = newPrice(old);
    db.set(data.sku, cents);
    line(t, "INFO", `admin: price of ${data.sku} set to ${cents} by ${pick(USERS)}`);
    line(t + 1, "DEBUG", `cache: drop price:${data.sku}${cache.delete(data.sku) ? "" : " (not cached)"}`);
  } else if (kind === "import") {
    const changed = [data.hot, ...Array.from({ length: int(20, 40) }, () => pick(normal))];
    line(t, "INFO", "import: nightly price import started (supplier feed 2025-03)");
    for (const sku of new Set(changed)) db.set(sku, newPrice(db.get(sku)));
    line(t + int(4000, 9000), "INFO", `import: nightly price import done, ${new Set(changed).size} prices changed in the database`);
  } else if (kind === "race") {
    // A page load of the sale item starts; the sale price is set while its query runs.
    const old = db.get(RACE);
    cache.delete(RACE);
    line(t, "DEBUG", `cache: load price:${RACE} started`);
    db.set(RACE, 999);
    line(t + 22, "INFO", `admin: price of ${RACE} set to 999 by j.weber`);
    line(t + 23, "DEBUG", `cache: drop price:${RACE} (not cached)`);
    cache.set(RACE, { value: old, storedAt: t + 47, expiresAt: t + 47 + TTL });
    line(t + 47, "DEBUG", `cache: load price:${RACE} stored`);
    line(t + 47, "INFO", `http: GET /price/${RACE} 200 48ms cache=miss price=${old}`);
  } else if (kind === "order") {
    const items = data.sku ? [data.sku] : [];
    for (let k = int(1, 3) - items.length; k > 0; k--) {
      const sku = rand() < 0.06 ? pick(HOT) : pick(normal);
      if (!items.includes(sku)) items.push(sku);
    }
    const id = orderId++;
    let total = 0;
    for (const sku of items) {
      const quoted = served(sku, t);
      const charged = db.get(sku);
      if (quoted !== charged) line(t + 5, "WARN", `checkout: price mismatch on order ${id}: ${sku} quoted ${quoted}, charged ${charged}`);
      total += charged;
    }
    line(t + 6, "INFO", `checkout: order ${id} paid (${items.length} items, ${total} cents)`);
  }
}

lines.sort((a, b) => a[0] - b[0]);
fs.mkdirSync("logs", { recursive: true });
for (let d = 0; d < 5; d++) {
  const day = new Date(START + d * DAY).toISOString().slice(0, 10);
  const text = lines.filter(([t]) => t >= START + d * DAY && t < START + (d + 1) * DAY).map(([, l]) => l);
  fs.writeFileSync(path.join("logs", `pricesvc-${day}.log`), text.join("\n") + "\n");
}
