"use strict";

const VERSION =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;

/**
 * Parse a version string ("1.2.3", "v1.2.3-rc.1+build.5").
 * Returns { major, minor, patch, prerelease: string[], build: string[], raw } or null.
 */
function parse(text) {
  if (typeof text !== "string") return null;
  const m = VERSION.exec(text.trim());
  if (!m) return null;
  const prerelease = m[4] ? m[4].split(".") : [];
  if (prerelease.some((id) => /^0\d+$/.test(id))) return null; // no leading zeros in numeric ids
  return {
    major: Number(m[1]),
    minor: Number(m[2]),
    patch: Number(m[3]),
    prerelease,
    build: m[5] ? m[5].split(".") : [],
    raw: text.trim(),
  };
}

function format(v) {
  let out = `${v.major}.${v.minor}.${v.patch}`;
  if (v.prerelease.length) out += `-${v.prerelease.join(".")}`;
  if (v.build.length) out += `+${v.build.join(".")}`;
  return out;
}

module.exports = { parse, format };
