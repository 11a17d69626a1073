#!/usr/bin/env node
// Revenue per month and country, as of March 2025 (used for the Q1 board deck).
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const dir = path.join(__dirname, "..", "data", "exports");
const totals = {};
for (const file of fs.readdirSync(dir).sort()) {
  const batch = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
  for (const o of batch.orders) {
    if (o.status === "cancelled") continue;
    const month = o.placed_at.slice(0, 7);
    const key = `${month} ${o.country}`;
    totals[key] = (totals[key] ?? 0) + Number(o.total);
  }
}
for (const key of Object.keys(totals).sort()) console.log(`${key}\t${totals[key].toFixed(2)}`);
