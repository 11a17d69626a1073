import { readFile } from "fs";

export const API_URL = "https://example.com";
const cache = new Map();

export function loadConfig(path) {
  return readFile(path);
}

function* ids() { yield 1; }

export const fetchJson = async (url) => {
  const parse = (text) => JSON.parse(text);
  return parse(await fetch(url));
};

let legacy = function (a, b) { return a + b; };

export default class Store extends Base {
  static instances = 0;
  onChange = () => this.emit("change");

  constructor(name) {
    super();
    this.name = name;
  }

  get size() { return cache.size; }

  async save() {}
}
