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

# The archives of backup set $2 in folder $1 (base names), newest first, one per line.
# Only NAME-YYYYmmdd-HHMMSS.tar.gz counts: another set whose name starts with NAME- does not.
set_archives() {
  local dir=$1 name=$2 f base stamp
  local -a found=()
  shopt -s nullglob
  for f in "$dir"/*.tar.gz; do
    base=${f##*/}
    [[ $base == "$name"-*.tar.gz ]] || continue
    stamp=${base:${#name}+1}
    stamp=${stamp%.tar.gz}
    [[ $stamp =~ ^[0-9]{8}-[0-9]{6}$ ]] || continue
    found+=("$base")
  done
  shopt -u nullglob
  [ ${#found[@]} -gt 0 ] || return 0
  printf '%s\n' "${found[@]}" | sort -r
}
