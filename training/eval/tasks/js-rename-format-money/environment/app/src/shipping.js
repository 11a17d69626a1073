import { fmtMoney as money } from "./money.js";

const ZONES = {
  DE: { price: 495, freeFrom: 5000 },
  AT: { price: 695, freeFrom: 7500 },
  FR: { price: 795, freeFrom: 7500 },
  CH: { price: 1495, freeFrom: null },
  GB: { price: 1295, freeFrom: null },
};

export function quoteShipping(country, orderTotal, currency = "EUR") {
  const zone = ZONES[country];
  if (!zone) throw new RangeError(`we do not ship to ${country}`);
  const free = zone.freeFrom !== null && orderTotal >= zone.freeFrom;
  const price = free ? 0 : zone.price;
  let note = free ? "free shipping" : `shipping ${money(price, currency)}`;
  if (!free && zone.freeFrom !== null) {
    note += ` (free from ${money(zone.freeFrom, currency)})`;
  }
  return { price, note };
}
