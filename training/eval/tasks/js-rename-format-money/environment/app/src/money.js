// Money is integer cents (minor units) everywhere; these helpers are the only place that
// turns it into text or back.

const CURRENCIES = {
  EUR: { symbol: "€", digits: 2 },
  USD: { symbol: "$", digits: 2 },
  GBP: { symbol: "£", digits: 2 },
  CHF: { symbol: "CHF ", digits: 2 },
  JPY: { symbol: "¥", digits: 0 },
  SEK: { symbol: "kr ", digits: 2 },
};

export function currencyInfo(code) {
  const info = CURRENCIES[code];
  if (!info) throw new RangeError(`unknown currency ${code}`);
  return info;
}

function groupThousands(digits, separator) {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, separator);
}

/**
 * Display string for an amount in minor units: fmtMoney(123456, "EUR") is "€1,234.56".
 * options.sign: "auto" (default, "-" for negatives), "always" ("+" for positives too).
 * options.symbol: false to leave out the currency symbol.
 */
export function fmtMoney(cents, currency = "EUR", { sign = "auto", symbol = true } = {}) {
  if (!Number.isInteger(cents)) throw new TypeError(`amount must be integer minor units, got ${cents}`);
  const { symbol: sym, digits } = currencyInfo(currency);
  const abs = Math.abs(cents);
  const scale = 10 ** digits;
  const whole = groupThousands(String(Math.floor(abs / scale)), ",");
  const minor = digits ? "." + String(abs % scale).padStart(digits, "0") : "";
  const prefix = cents < 0 ? "-" : sign === "always" && cents > 0 ? "+" : "";
  return `${prefix}${symbol ? sym : ""}${whole}${minor}`;
}

/** Minor units from a decimal string ("12.5" is 1250 for EUR). */
export function parseMoney(text, currency = "EUR") {
  const { digits } = currencyInfo(currency);
  const m = /^\s*(-)?(\d+)(?:\.(\d+))?\s*$/.exec(String(text));
  if (!m) throw new TypeError(`not an amount: ${text}`);
  const frac = (m[3] ?? "").padEnd(digits, "0");
  if (frac.length > digits) throw new RangeError(`too many decimals for ${currency}: ${text}`);
  const value = Number(m[2]) * 10 ** digits + Number(frac || 0);
  return m[1] ? -value : value;
}

/** `cents` times `rate` (a percentage, e.g. 19 for 19 %), rounded half away from zero. */
export function percentOf(cents, rate) {
  const exact = (cents * rate) / 100;
  return Math.sign(exact) * Math.round(Math.abs(exact));
}

export function sum(amounts) {
  return amounts.reduce((a, b) => a + b, 0);
}
