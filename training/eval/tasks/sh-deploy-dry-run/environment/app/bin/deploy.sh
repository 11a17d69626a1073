#!/bin/bash
# Deploy a release tarball into TARGET_DIR: unpack it into a new release folder, link the shared
# files in, run its hooks, switch `current` to it, prune old releases, restart the service.
set -eu
. "$(dirname "$0")/../lib/deploy-lib.sh"

usage() {
  echo "usage: deploy.sh [-k KEEP] [-r RESTART_CMD] TARBALL TARGET_DIR" >&2
  exit 2
}

keep=5
restart_cmd=${DEPLOY_RESTART_CMD:-}
while getopts "k:r:" opt; do
  case $opt in
    k) keep=$OPTARG ;;
    r) restart_cmd=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
tarball=$1
target=$2

case $keep in '' | *[!0-9]* | 0) die "KEEP must be a whole number of at least 1" ;; esac
[ -f "$tarball" ] || die "no such tarball: $tarball"
tar -tzf "$tarball" > /dev/null 2>&1 || die "not a gzipped tar archive: $tarball"
stamp=$(timestamp)
release="$target/releases/$stamp"
[ ! -e "$release" ] || die "release $stamp exists already"

mkdir -p "$target/releases" "$target/shared"
take_lock "$target"
trap 'release_lock "$target"' EXIT

log "unpacking $(basename "$tarball") into $release"
mkdir "$release"
tar -xzf "$tarball" -C "$release"

# Config and data that outlive releases: each entry of shared/ replaces the release's own.
for item in "$target"/shared/*; do
  [ -e "$item" ] || continue
  name=$(basename "$item")
  rm -rf -- "${release:?}/$name"
  ln -s "../../shared/$name" "$release/$name"
  log "linked shared/$name"
done

run_hook "$release" pre-deploy

# Switch atomically: a new link, renamed over the old one.
ln -sfn "releases/$stamp" "$target/current.tmp"
mv -T "$target/current.tmp" "$target/current"
log "current -> releases/$stamp"

run_hook "$release" post-deploy

prune_releases "$target" "$keep"

if [ -n "$restart_cmd" ]; then
  log "restarting: $restart_cmd"
  sh -c "$restart_cmd"
fi

printf '%s deployed %s (sha256 %s)\n' "$stamp" "$(basename "$tarball")" \
  "$(sha256sum < "$tarball" | cut -d' ' -f1)" >> "$target/deploy.log"
log "deployed $stamp"
