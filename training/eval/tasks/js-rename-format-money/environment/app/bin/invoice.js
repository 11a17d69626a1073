#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { renderInvoice, fmtMoney, cartTotals } from "../src/index.js";

const [file, flag] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: invoice.js ORDER.json [--total]\n");
  process.exit(2);
}
const order = JSON.parse(readFileSync(file, "utf8"));
if (flag === "--total") {
  process.stdout.write(`${fmtMoney(cartTotals(order).total, order.currency)}\n`);
} else {
  process.stdout.write(`${renderInvoice(order)}\n`);
}
