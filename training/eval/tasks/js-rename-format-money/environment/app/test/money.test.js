import test from "node:test";
import assert from "node:assert/strict";
import { fmtMoney, parseMoney, percentOf } from "../src/money.js";

test("fmtMoney", () => {
  assert.equal(fmtMoney(123456, "EUR"), "€1,234.56");
  assert.equal(fmtMoney(-500, "GBP"), "-£5.00");
  assert.equal(fmtMoney(1200, "JPY"), "¥1,200");
  assert.equal(fmtMoney(5, "USD"), "$0.05");
  assert.equal(fmtMoney(250, "EUR", { sign: "always" }), "+€2.50");
  assert.equal(fmtMoney(100000000, "CHF", { symbol: false }), "1,000,000.00");
});

test("parseMoney", () => {
  assert.equal(parseMoney("12.5"), 1250);
  assert.equal(parseMoney("-3"), -300);
  assert.equal(parseMoney("1200", "JPY"), 1200);
  assert.throws(() => parseMoney("1.234"));
});

test("percentOf rounds half away from zero", () => {
  assert.equal(percentOf(250, 10), 25);
  assert.equal(percentOf(5, 10), 1);
  assert.equal(percentOf(-5, 10), -1);
});
