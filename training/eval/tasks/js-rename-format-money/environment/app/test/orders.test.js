import test from "node:test";
import assert from "node:assert/strict";
import { cartSummary, renderReceipt, fmtMoney, cartTotals } from "../src/index.js";

const ORDER = {
  number: "T-1001",
  date: "2025-03-14",
  currency: "EUR",
  shipTo: "DE",
  lines: [
    { name: "Espresso cups (set of 4)", unitPrice: 2400, quantity: 1 },
    { name: "Coffee beans 1 kg", unitPrice: 1899, quantity: 2 },
  ],
  discounts: [{ kind: "percent", rate: 10 }],
};

test("cart summary", () => {
  const lines = cartSummary(ORDER);
  assert.equal(lines[0], "1 × Espresso cups (set of 4) @ €24.00 = €24.00");
  assert.equal(lines.at(-1), `Total: ${fmtMoney(cartTotals(ORDER).total, "EUR")}`);
});

test("receipt", () => {
  const receipt = renderReceipt(ORDER, 10000);
  assert.match(receipt, /CHANGE\s+€/);
});
