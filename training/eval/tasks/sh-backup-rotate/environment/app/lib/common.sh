# Shared helpers of the backup scripts (sourced).

log() {
  printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
  log "error: $*"
  exit 1
}

# YYYYmmdd-HHMMSS, or BACKUP_NOW when set.
timestamp() {
  if [ -n "${BACKUP_NOW:-}" ]; then
    echo "$BACKUP_NOW"
  else
    date +%Y%m%d-%H%M%S
  fi
}
