import { fmtMoney, percentOf, sum } from "./money.js";
import { cartTotals, lineTotal } from "./cart.js";

const VAT_RATE = { DE: 19, AT: 20, FR: 20, CH: 8.1, GB: 20 };

function row(label, amount, width = 44) {
  const gap = Math.max(1, width - label.length - amount.length);
  return label + " ".repeat(gap) + amount;
}

/** The invoice as plain text, the way it is printed and attached to the order e-mail. */
export function renderInvoice(order) {
  const cur = order.currency;
  const totals = cartTotals(order);
  const rate = VAT_RATE[order.shipTo ?? "DE"];
  // Prices include VAT: the VAT part of a gross amount g is g * rate / (100 + rate).
  const vat = Math.round((totals.total * rate) / (100 + rate));
  const out = [`INVOICE ${order.number}`, `Date: ${order.date}`, ""];
  for (const line of order.lines) {
    out.push(row(`${line.quantity} × ${line.name}`, fmtMoney(lineTotal(line), cur)));
  }
  out.push("-".repeat(44));
  out.push(row("Subtotal", fmtMoney(totals.subtotal, cur)));
  if (totals.discount) out.push(row("Discounts", fmtMoney(-totals.discount, cur)));
  out.push(row("Shipping", fmtMoney(totals.shipping, cur)));
  out.push(row("Total", fmtMoney(totals.total, cur)));
  out.push(row(`incl. VAT ${rate}%`, fmtMoney(vat, cur)));
  return out.join("\n");
}

/** Per-line tax breakdown (used by the accounting export). */
export function taxLines(order) {
  const rate = VAT_RATE[order.shipTo ?? "DE"];
  return order.lines.map((l) => ({ name: l.name, net: lineTotal(l) - percentOf(lineTotal(l), (rate * 100) / (100 + rate)) }));
}

export function invoiceTotal(order) {
  return sum(order.lines.map(lineTotal));
}
