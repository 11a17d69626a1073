"use strict";

// The prices table (a JSON file standing in for the database in development and tests): prices
// in cents by SKU. Every call takes `delayMs`, like a round trip to the database would.

const fs = require("node:fs");

class NotFound extends Error {}

class PriceStore {
  constructor(prices = {}, { delayMs = 0 } = {}) {
    this.prices = new Map(Object.entries(prices));
    this.delayMs = delayMs;
  }

  static fromFile(path, options) {
    return new PriceStore(JSON.parse(fs.readFileSync(path, "utf8")), options);
  }

  /** The price of sku as it is when the query runs; resolved after the round trip. */
  async get(sku) {
    const found = this.prices.has(sku);
    const cents = this.prices.get(sku);
    await this._roundTrip();
    if (!found) throw new NotFound(`no price for ${sku}`);
    return cents;
  }

  async set(sku, cents) {
    if (!Number.isInteger(cents) || cents < 0) throw new RangeError(`not a price in cents: ${cents}`);
    await this._roundTrip();
    this.prices.set(sku, cents);
  }

  _roundTrip() {
    return this.delayMs > 0 ? new Promise((resolve) => setTimeout(resolve, this.delayMs)) : Promise.resolve();
  }
}

module.exports = { PriceStore, NotFound };
