"use strict";

// GET /price/:sku -> { sku, cents }; PUT /admin/prices/:sku { cents } ; POST /checkout { id, items }

const http = require("node:http");
const path = require("node:path");
const { Cache } = require("./cache");
const { PriceService } = require("./pricing");
const { PriceStore, NotFound } = require("./store");
const { charge } = require("./checkout");
const { createLogger } = require("./log");

function createServer({ store, log, ttlMs = 300000, max = 5000 }) {
  const cache = new Cache({ ttlMs, max, log });
  const prices = new PriceService({ store, cache, log });

  const send = (res, status, body) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const readBody = async (req) => {
    let text = "";
    for await (const chunk of req) text += chunk;
    return text ? JSON.parse(text) : {};
  };

  const server = http.createServer(async (req, res) => {
    const started = Date.now();
    try {
      let m;
      if (req.method === "GET" && (m = /^\/price\/([\w-]+)$/.exec(req.url))) {
        const { cents, cached, ageMs } = await prices.lookup(m[1]);
        send(res, 200, { sku: m[1], cents });
        const cacheInfo = cached ? `cache=hit age=${Math.round(ageMs / 1000)}s` : "cache=miss";
        log.info(`http: GET ${req.url} 200 ${Date.now() - started}ms ${cacheInfo} price=${cents}`);
      } else if (req.method === "PUT" && (m = /^\/admin\/prices\/([\w-]+)$/.exec(req.url))) {
        const body = await readBody(req);
        await prices.updatePrice(m[1], body.cents, req.headers["x-user"] || "admin");
        send(res, 204, {});
      } else if (req.method === "POST" && req.url === "/checkout") {
        send(res, 200, { total: await charge(await readBody(req), { store, log }) });
      } else if (req.url === "/healthz") {
        send(res, 200, { ok: true, cache: cache.size, ...cache.stats });
      } else {
        send(res, 404, { error: "not found" });
      }
    } catch (err) {
      if (err instanceof NotFound) return send(res, 404, { error: err.message });
      log.error(`http: ${req.method} ${req.url} failed: ${err.stack}`);
      send(res, 500, { error: "internal error" });
    }
  });
  return { server, prices, cache };
}

if (require.main === module) {
  const log = createLogger({ level: process.env.LOG_LEVEL || "info" });
  const store = PriceStore.fromFile(path.join(__dirname, "..", "data", "prices.json"), { delayMs: 20 });
  const { server } = createServer({ store, log });
  const port = Number(process.env.PORT || 8080);
  server.listen(port, () => log.info(`server: pricesvc listening on :${port} (cache ttl=300s, max=5000)`));
}

module.exports = { createServer };
