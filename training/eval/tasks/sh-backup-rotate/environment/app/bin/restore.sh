#!/bin/bash
# Unpack the newest archive of a backup set into a folder.
set -eu
. "$(dirname "$0")/../lib/common.sh"

name=
while getopts "n:" opt; do
  case $opt in
    n) name=$OPTARG ;;
    *) echo "usage: restore.sh -n NAME DEST_DIR TARGET_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: restore.sh -n NAME DEST_DIR TARGET_DIR" >&2; exit 2; }
dest=$1
target=$2
[ -d $dest ] || die "no such folder: $dest"
[ -n "$name" ] || die "-n NAME is needed"

latest=$(ls -1 $dest/$name-*.tar.gz 2>/dev/null | sort | tail -n 1)
[ -n "$latest" ] || die "no archive of $name in $dest"
mkdir -p $target
tar -xzf $latest -C $target
log "restored $(basename $latest) into $target"
