#!/bin/bash
# Back up a folder into a time-stamped tar.gz and rotate the old archives of the same set.
set -eu
. "$(dirname "$0")/../lib/common.sh"

keep=7
name=
while getopts "k:n:" opt; do
  case $opt in
    k) keep=$OPTARG ;;
    n) name=$OPTARG ;;
    *) echo "usage: backup.sh [-k KEEP] [-n NAME] SOURCE_DIR DEST_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: backup.sh [-k KEEP] [-n NAME] SOURCE_DIR DEST_DIR" >&2; exit 2; }
case $keep in '' | *[!0-9]* | 0) die "KEEP must be a whole number of at least 1" ;; esac

src=$1
dest=$2
[ -d "$src" ] || die "no such folder: $src"
[ -n "$name" ] || name=$(basename -- "$src")
case $name in */* | '' | . | ..) die "bad backup name: $name" ;; esac
mkdir -p -- "$dest"
dest=$(cd -- "$dest" && pwd)
archive=$dest/$name-$(timestamp).tar.gz

# Everything under SOURCE_DIR, by recursion (no file names on the command line, so spaces,
# newlines and leading dashes are nothing special); written aside, then moved into place.
tmp=$(mktemp "$dest/.backup.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
tar -czf "$tmp" -C "$src" .
mv -f -- "$tmp" "$archive"
trap - EXIT
log "wrote $archive ($(tar -tzf "$archive" | grep -c '[^/]$' || true) entries)"

# Keep the $keep newest archives of this set (the time stamp sorts by name).
n=0
while IFS= read -r old; do
  n=$((n + 1))
  [ "$n" -gt "$keep" ] || continue
  rm -f -- "$dest/$old"
  log "removed $old"
done < <(set_archives "$dest" "$name")
