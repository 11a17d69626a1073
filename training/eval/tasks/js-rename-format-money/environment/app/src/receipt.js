import * as money from "./money.js";
import { cartTotals } from "./cart.js";

/** The short till receipt: one line per article, then the total and what was paid. */
export function renderReceipt(order, paid) {
  const cur = order.currency;
  const totals = cartTotals(order);
  const lines = order.lines.map((l) => `${l.name.slice(0, 20).padEnd(20)} ${money.fmtMoney(l.unitPrice * l.quantity, cur, { symbol: false }).padStart(10)}`);
  lines.push(`${"TOTAL".padEnd(20)} ${money.fmtMoney(totals.total, cur).padStart(10)}`);
  if (paid !== undefined) {
    lines.push(`${"PAID".padEnd(20)} ${money.fmtMoney(paid, cur).padStart(10)}`);
    lines.push(`${"CHANGE".padEnd(20)} ${money.fmtMoney(paid - totals.total, cur).padStart(10)}`);
  }
  return lines.join("\n");
}
