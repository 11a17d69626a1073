import { fmtMoney, sum } from "./money.js";
import { applyDiscounts, describeDiscount } from "./discounts.js";
import { quoteShipping } from "./shipping.js";

export function lineTotal(line) {
  return line.unitPrice * line.quantity;
}

/** The cart's totals, all in minor units. */
export function cartTotals(cart) {
  const subtotal = sum(cart.lines.map(lineTotal));
  const { total: discounted, applied } = applyDiscounts(subtotal, cart.discounts ?? []);
  const shipping = quoteShipping(cart.shipTo ?? "DE", discounted, cart.currency).price;
  return { subtotal, discount: subtotal - discounted, shipping, total: discounted + shipping, applied };
}

/** The lines shown in the cart drawer. */
export function cartSummary(cart) {
  const cur = cart.currency;
  const totals = cartTotals(cart);
  const lines = cart.lines.map(
    (l) => `${l.quantity} × ${l.name} @ ${fmtMoney(l.unitPrice, cur)} = ${fmtMoney(lineTotal(l), cur)}`
  );
  lines.push(`Subtotal: ${fmtMoney(totals.subtotal, cur)}`);
  for (const d of totals.applied) lines.push(`Discount: ${describeDiscount(d, cur)}`);
  lines.push(`Shipping: ${totals.shipping ? fmtMoney(totals.shipping, cur) : "free"}`);
  lines.push(`Total: ${fmtMoney(totals.total, cur)}`);
  return lines;
}
