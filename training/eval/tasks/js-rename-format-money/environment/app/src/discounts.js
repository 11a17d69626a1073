import { fmtMoney, percentOf } from "./money.js";

/**
 * Apply discounts in order: { kind: "percent", rate } or { kind: "fixed", amount } (minor units).
 * The total never goes below zero. Returns the new total and the discounts with what each took.
 */
export function applyDiscounts(subtotal, discounts) {
  let total = subtotal;
  const applied = [];
  for (const d of discounts) {
    const off = d.kind === "percent" ? percentOf(total, d.rate) : Math.min(d.amount, total);
    total -= off;
    applied.push({ ...d, off });
  }
  return { total, applied };
}

export function describeDiscount(d, currency) {
  if (d.kind === "percent") return `${d.rate}% off (${fmtMoney(-d.off, currency)})`;
  return `${fmtMoney(d.amount, currency)} off (${fmtMoney(-d.off, currency)})`;
}
