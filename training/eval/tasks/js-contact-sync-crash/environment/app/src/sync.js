"use strict";

const fs = require("node:fs/promises");
const path = require("node:path");
const { fromGoogle } = require("./providers/google");
const { fromCardDav } = require("./providers/carddav");
const { parseCrmCsv, fromCsv } = require("./providers/csv");
const { mergeContacts } = require("./contacts/merge");

async function files(dir, ext) {
  try {
    return (await fs.readdir(dir)).filter((f) => f.endsWith(ext)).sort().map((f) => path.join(dir, f));
  } catch (err) {
    if (err.code === "ENOENT") return [];
    throw err;
  }
}

/** Every provider's contacts under dataDir, merged; written to outFile when given. */
async function runSync(dataDir, outFile = null, log = console) {
  const lists = [];
  for (const file of await files(path.join(dataDir, "google"), ".json")) {
    const { connections = [] } = JSON.parse(await fs.readFile(file, "utf8"));
    log.info(`sync: provider=google file=${path.relative(dataDir, file)} people=${connections.length}`);
    lists.push(connections.map((p) => fromGoogle(p, log)));
  }
  for (const file of await files(path.join(dataDir, "carddav"), ".json")) {
    const { cards = [] } = JSON.parse(await fs.readFile(file, "utf8"));
    log.info(`sync: provider=carddav file=${path.relative(dataDir, file)} cards=${cards.length}`);
    lists.push(cards.map((c) => fromCardDav(c, log)));
  }
  for (const file of await files(path.join(dataDir, "csv"), ".csv")) {
    const rows = parseCrmCsv(await fs.readFile(file, "utf8"));
    log.info(`sync: provider=crm file=${path.relative(dataDir, file)} rows=${rows.length}`);
    lists.push(rows.map((r) => fromCsv(r, log)));
  }
  const contacts = mergeContacts(lists);
  if (outFile) {
    await fs.mkdir(path.dirname(outFile), { recursive: true });
    await fs.writeFile(outFile, JSON.stringify(contacts, null, 2) + "\n");
  }
  const read = lists.reduce((n, l) => n + l.length, 0);
  log.info(`sync: done, ${read} records in, ${contacts.length} contacts out`);
  return { read, contacts };
}

module.exports = { runSync };
