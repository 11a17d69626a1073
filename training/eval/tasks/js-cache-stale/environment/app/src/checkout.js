"use strict";

// The checkout charges the database's price, never the cached one, and warns when the price the
// customer was shown (the quote) differs from it.

async function charge(order, { store, log }) {
  let total = 0;
  for (const item of order.items) {
    const price = await store.get(item.sku);
    if (item.quoted !== undefined && item.quoted !== price) {
      log.warn(`checkout: price mismatch on order ${order.id}: ${item.sku} quoted ${item.quoted}, charged ${price}`);
    }
    total += item.qty * price;
  }
  log.info(`checkout: order ${order.id} paid (${order.items.length} items, ${total} cents)`);
  return total;
}

module.exports = { charge };
