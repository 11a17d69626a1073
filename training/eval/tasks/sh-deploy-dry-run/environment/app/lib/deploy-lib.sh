# Shared helpers of deploy.sh (sourced).

log() {
  printf '%s deploy: %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
  log "error: $*"
  exit 1
}

# YYYYmmdd-HHMMSS, or DEPLOY_NOW when set.
timestamp() {
  if [ -n "${DEPLOY_NOW:-}" ]; then
    echo "$DEPLOY_NOW"
  else
    date +%Y%m%d-%H%M%S
  fi
}

# One deploy at a time per target.
take_lock() {
  mkdir "$1/.deploy.lock" 2>/dev/null ||
    die "another deploy is running in $1 (remove $1/.deploy.lock if it is not)"
}

release_lock() {
  rmdir "$1/.deploy.lock" 2>/dev/null || true
}

# run_hook RELEASE NAME: the release's hooks/NAME, if it has one, run in the release folder.
run_hook() {
  local hook="$1/hooks/$2"
  [ -f "$hook" ] || return 0
  log "running hook $2"
  (cd "$1" && DEPLOY_RELEASE="$1" bash "hooks/$2") || die "hook $2 failed"
}

# The releases of a target, oldest first (the time stamps sort by name).
list_releases() {
  ls -1 "$1/releases" | LC_ALL=C sort
}

# prune_releases TARGET KEEP: remove all but the KEEP newest releases, never the current one.
prune_releases() {
  local target=$1 keep=$2 current old
  current=$(readlink "$target/current" || true)
  current=${current#releases/}
  list_releases "$target" | head -n -"$keep" | while IFS= read -r old; do
    [ "$old" = "$current" ] && continue
    rm -rf -- "${target:?}/releases/$old"
    log "removed release $old"
  done
}
