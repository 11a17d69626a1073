#!/usr/bin/env bash
# Install missing Debian packages. Arguments are package:command pairs; a package counts as
# present when its command is on PATH. As root with apt-get, missing ones are installed;
# otherwise the script says what to install and carries on (`opencomposer doctor` then shows
# what works without them).
set -euo pipefail

missing=()
for pair in "$@"; do
  package=${pair%%:*}
  command=${pair#*:}
  command -v "$command" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "opencomposer: missing system packages: ${missing[*]}" >&2
  echo "  install them with: sudo apt-get install ${missing[*]}" >&2
  echo "  (continuing; 'opencomposer doctor' shows what works without them)" >&2
fi
