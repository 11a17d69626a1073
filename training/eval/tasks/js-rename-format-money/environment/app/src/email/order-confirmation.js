import { fmtMoney } from "../money.js";
import { cartTotals } from "../cart.js";
import { quoteShipping } from "../shipping.js";

/** Subject and body of the order confirmation e-mail. */
export function orderConfirmation(order, customer) {
  const cur = order.currency;
  const totals = cartTotals(order);
  const shipping = quoteShipping(order.shipTo ?? "DE", totals.total - totals.shipping, cur);
  const subject = `Your order ${order.number} (${fmtMoney(totals.total, cur)})`;
  const body = [
    `Hello ${customer.firstName},`,
    "",
    `thank you for your order ${order.number}. We received your payment of ${fmtMoney(totals.total, cur)}`,
    `and will send the parcel within two working days (${shipping.note}).`,
    "",
    ...order.lines.map((l) => `  - ${l.quantity} × ${l.name}`),
    "",
    "Your tillroll team",
  ].join("\n");
  return { subject, body };
}
