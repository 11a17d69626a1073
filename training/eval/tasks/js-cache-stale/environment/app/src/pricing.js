"use strict";

// Prices for the shop's pages and the checkout: read through the cache, written to the store
// (the admin UI's price changes), after which the cached price is dropped.

const { Cache } = require("./cache");

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

class PriceService {
  constructor({ store, cache = new Cache(), log = quiet }) {
    this.store = store;
    this.cache = cache;
    this.log = log;
  }

  static key(sku) {
    return `price:${sku}`;
  }

  /** The price of sku in cents (cached). */
  getPrice(sku) {
    return this.cache.getOrLoad(PriceService.key(sku), () => this.store.get(sku));
  }

  /** { cents, cached, ageMs } for the page and the logs. */
  async lookup(sku) {
    const key = PriceService.key(sku);
    const cached = this.cache.has(key);
    const cents = await this.getPrice(sku);
    return { cents, cached, ageMs: cached ? this.cache.age(key) : 0 };
  }

  /** A new price from the admin UI. */
  async updatePrice(sku, cents, who = "admin") {
    await this.store.set(sku, cents);
    const key = PriceService.key(sku);
    const dropped = this.cache.delete(key);
    this.log.info(`admin: price of ${sku} set to ${cents} by ${who}`);
    this.log.debug(`cache: drop ${key}${dropped ? "" : " (not cached)"}`);
  }

  /** The total in cents of [{ sku, qty }] at the current prices. */
  async total(items) {
    const prices = await Promise.all(items.map((item) => this.getPrice(item.sku)));
    return items.reduce((sum, item, i) => sum + item.qty * prices[i], 0);
  }
}

module.exports = { PriceService };
