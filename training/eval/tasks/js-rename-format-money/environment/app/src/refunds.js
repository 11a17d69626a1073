import { fmtMoney, sum } from "./money.js";
import { lineTotal } from "./cart.js";

/** What a refund of some returned lines gives back, and the note for the customer. */
export function refundFor(order, returned) {
  const byName = new Map(order.lines.map((l) => [l.name, l]));
  const amounts = returned.map(({ name, quantity }) => {
    const line = byName.get(name);
    if (!line) throw new RangeError(`not in the order: ${name}`);
    if (quantity > line.quantity) throw new RangeError(`only ${line.quantity} × ${name} ordered`);
    return lineTotal({ ...line, quantity });
  });
  const total = sum(amounts);
  return {
    total,
    note: `Refund of ${fmtMoney(total, order.currency)} for ${returned.length} returned article(s)`,
    signed: fmtMoney(-total, order.currency, { sign: "always" }),
  };
}
