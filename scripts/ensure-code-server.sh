#!/usr/bin/env bash
# code-server (VS Code's workbench served to a browser), installed locally under DIR for the
# VS Code extension's tests in a real workbench; a no-op once installed.
#
# 4.100.3 is the newest release whose engines.node accepts Node 20 (4.103+ need Node 22). The
# install must not reach anything but the npm registry:
# - node-gyp builds node-pty and friends against Debian's Node headers (npm_config_nodedir),
#   and node-pty's postinstall runs `npx node-gyp` (npm_config_yes answers npx's prompt);
# - @vscode/ripgrep's postinstall downloads rg from GitHub unless its cache holds the archive:
#   it is filled with the rg that the Python package installs (any rg will do for VS Code);
# - a global install (-g --prefix) breaks code-server's own postinstall, hence a local one.
# A failed install fails CI; elsewhere it is reported and the workbench tests skip.
set -euo pipefail

VERSION=4.100.3
RIPGREP_CACHE=vscode-ripgrep-cache-1.15.11
RIPGREP_ARCHIVE=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz

dir=${1:?usage: ensure-code-server.sh DIR RG}
rg=${2:?usage: ensure-code-server.sh DIR RG}
stamp=$dir/.installed-$VERSION
[ -f "$stamp" ] && exit 0

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$scratch/$RIPGREP_CACHE" "$scratch/rg"
cp "$(command -v "$rg")" "$scratch/rg/rg"
tar -C "$scratch/rg" -czf "$scratch/$RIPGREP_CACHE/$RIPGREP_ARCHIVE" rg

echo "installing code-server $VERSION under $dir (once; a few minutes)"
echo '{"private": true}' > "$dir/package.json"
cd "$dir"
if ! TMPDIR=$scratch npm_config_nodedir=/usr npm_config_yes=true npm_config_unsafe_perm=true \
    npm install --no-audit --no-fund --foreground-scripts --loglevel=error \
    "code-server@$VERSION" > "$scratch/install.log" 2>&1; then
  tail -40 "$scratch/install.log" >&2
  echo "code-server $VERSION failed to install (log above)" >&2
  [ "${CI:-}" = true ] && exit 1
  echo "  (continuing: the tests in a real VS Code will skip)" >&2
  rm -rf node_modules
  exit 0
fi
node_modules/.bin/code-server --version > /dev/null
touch ".installed-$VERSION"
