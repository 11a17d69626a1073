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
[ -d $src ] || die "no such folder: $src"
[ -n "$name" ] || name=$(basename $src)
mkdir -p $dest
dest=$(cd $dest && pwd)
archive=$dest/$name-$(timestamp).tar.gz

files=$(cd $src && find . -type f -o -type l | sed 's|^\./||')
(cd $src && tar -czf $archive $files)
log "wrote $archive ($(echo "$files" | wc -l) files)"

# Keep the $keep newest archives of this set (the time stamp sorts by name).
for old in $(ls -1 $dest | grep "^$name-" | sort -r | tail -n +$((keep + 1))); do
  rm -f $dest/$old
  log "removed $old"
done
