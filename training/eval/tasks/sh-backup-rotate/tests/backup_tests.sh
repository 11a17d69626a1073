#!/bin/bash
# The hidden tests of bin/backup.sh and bin/restore.sh: awkward file names, shared archive
# folders, rotation. Each test runs in a fresh folder whose path has spaces in it.
set -u
APP=${BACKUP_APP:-/app}
BACKUP="$APP/bin/backup.sh"
RESTORE="$APP/bin/restore.sh"
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/backup tests.XXXXXX")
trap 'rm -rf -- "$ROOT"' EXIT
failed=0
passed=0

# A failed check marks its test failed even where the test goes on after it.
fail() { echo "    FAIL: $*"; : > "$WORK.failed"; return 1; }

# What a tree holds, NUL-safe: each non-folder entry with its type and content (or target).
manifest() {
  (cd -- "$1" && find . -mindepth 1 ! -type d -print0 | LC_ALL=C sort -z |
    while IFS= read -r -d '' p; do
      if [ -L "$p" ]; then printf 'L %s -> %s\n' "$p" "$(readlink -- "$p")"
      else printf 'F %s %s\n' "$p" "$(cksum < "$p")"; fi
    done) | od -An -c
}

same_tree() {
  local a b
  a=$(manifest "$1"); b=$(manifest "$2")
  [ -n "$a" ] || { fail "$1 is empty"; return 1; }
  [ "$a" = "$b" ] || { fail "$2 differs from $1"; diff <(manifest "$1") <(manifest "$2") | head -20; return 1; }
}

# The archives in a folder (base names, sorted), one per line.
archives() { (cd -- "$1" && LC_ALL=C ls -1A | grep '\.tar\.gz$' || true); }

weird_tree() {
  local d=$1
  mkdir -p -- "$d/dir with space/-nested" "$d/--" "$d/sub"
  printf 'plain\n' > "$d/plain.txt"
  printf 'spaces\n' > "$d/with  two spaces.txt"
  printf 'dash\n' > "$d/-rf"
  printf 'help\n' > "$d/--help"
  printf 'n\n' > "$d/-n"
  printf 'newline\n' > "$d/new
line.txt"
  printf 'tab\n' > "$d/tab	here"
  printf 'glob\n' > "$d/star*.log"
  printf 'brackets\n' > "$d/[abc].txt"
  printf 'backslash\n' > "$d/back\\slash"
  printf 'quote\n' > "$d/it's \"quoted\""
  printf 'unicode\n' > "$d/ünïcødé €.txt"
  printf 'hidden\n' > "$d/.hidden"
  : > "$d/empty file"
  printf 'deep\n' > "$d/dir with space/-nested/-x y"
  printf 'dd\n' > "$d/--/--"
  head -c 20000 /dev/urandom > "$d/sub/random.bin"
  ln -s -- "plain.txt" "$d/link to plain"
}

run_test() {
  local name=$1
  WORK="$ROOT/$name"
  mkdir -p -- "$WORK"
  if (cd -- "$WORK" && "$name") > "$WORK.log" 2>&1 && [ ! -e "$WORK.failed" ]; then
    passed=$((passed + 1)); echo "ok   $name"
  else
    failed=$((failed + 1)); echo "FAIL $name"; sed 's/^/    /' "$WORK.log" | tail -30
  fi
}

test_awkward_names_survive_the_round_trip() {
  weird_tree "$WORK/My Documents"
  BACKUP_NOW=20250301-020000 bash "$BACKUP" "$WORK/My Documents" "$WORK/back ups" || fail "backup.sh exited $?" || return 1
  [ "$(archives "$WORK/back ups")" = "My Documents-20250301-020000.tar.gz" ] || fail "archives: $(archives "$WORK/back ups")" || return 1
  mkdir "$WORK/plain tar"
  tar -xzf "$WORK/back ups/My Documents-20250301-020000.tar.gz" -C "$WORK/plain tar" || fail "tar cannot unpack it" || return 1
  same_tree "$WORK/My Documents" "$WORK/plain tar" || return 1
  bash "$RESTORE" -n "My Documents" "$WORK/back ups" "$WORK/restored here" || fail "restore.sh exited $?" || return 1
  same_tree "$WORK/My Documents" "$WORK/restored here"
}

test_rotation_keeps_the_newest_of_its_own_set_only() {
  local d="$WORK/shared dest" s
  mkdir -p "$d" "$WORK/app"
  printf 'v1\n' > "$WORK/app/config -v.yml"
  for s in 20240101-000000 20240201-000000 20240301-000000 20240401-000000 20240501-000000; do
    printf 'old %s\n' "$s" > "$d/app-$s.tar.gz"
  done
  printf 'x\n' > "$d/app-staging-20230101-000000.tar.gz"
  printf 'x\n' > "$d/app-staging-20230201-000000.tar.gz"
  printf 'x\n' > "$d/app-20240101-000000.tar.gz.sha256"
  printf 'x\n' > "$d/app-notes.tar.gz"
  printf 'x\n' > "$d/README -- keep.txt"
  printf 'x\n' > "$d/-app-20190101-000000.tar.gz"
  BACKUP_NOW=20250601-000000 bash "$BACKUP" -k 3 "$WORK/app" "$d" || fail "backup.sh exited $?" || return 1
  local want
  want=$(printf '%s\n' -app-20190101-000000.tar.gz app-20240401-000000.tar.gz app-20240501-000000.tar.gz \
    app-20250601-000000.tar.gz app-notes.tar.gz app-staging-20230101-000000.tar.gz app-staging-20230201-000000.tar.gz | LC_ALL=C sort)
  [ "$(archives "$d")" = "$want" ] || { fail "left: $(archives "$d" | tr '\n' ' ')"; return 1; }
  [ -f "$d/README -- keep.txt" ] && [ -f "$d/app-20240101-000000.tar.gz.sha256" ] || fail "other files were removed"
}

test_names_with_regex_characters() {
  local d="$WORK/dest"
  mkdir -p "$d" "$WORK/db.prod"
  printf 'rows\n' > "$WORK/db.prod/dump.sql"
  printf 'x\n' > "$d/dbXprod-20200101-000000.tar.gz"
  printf 'x\n' > "$d/db.prod-20200101-000000.tar.gz"
  BACKUP_NOW=20250101-000000 bash "$BACKUP" -k 1 "$WORK/db.prod" "$d" || fail "backup.sh exited $?" || return 1
  [ "$(archives "$d" | tr '\n' ' ')" = "db.prod-20250101-000000.tar.gz dbXprod-20200101-000000.tar.gz " ] || fail "left: $(archives "$d" | tr '\n' ' ')"
}

test_restore_takes_the_newest_archive_of_the_named_set() {
  local d="$WORK/dest"
  mkdir -p "$WORK/app" "$WORK/app-staging"
  printf 'staging\n' > "$WORK/app-staging/which"
  BACKUP_NOW=20250102-000000 bash "$BACKUP" "$WORK/app-staging" "$d" || fail "backup.sh exited $?" || return 1
  printf 'first\n' > "$WORK/app/which"
  BACKUP_NOW=20250101-000000 bash "$BACKUP" "$WORK/app" "$d" || fail "backup.sh exited $?" || return 1
  printf 'second\n' > "$WORK/app/which"
  BACKUP_NOW=20250101-120000 bash "$BACKUP" "$WORK/app" "$d" || fail "backup.sh exited $?" || return 1
  bash "$RESTORE" -n app "$d" "$WORK/out" || fail "restore.sh exited $?" || return 1
  [ "$(cat "$WORK/out/which")" = "second" ] || fail "restored $(cat "$WORK/out/which")"
  [ "$(archives "$d" | wc -l)" -eq 3 ] || fail "archives: $(archives "$d" | tr '\n' ' ')"
}

test_relative_paths_that_start_with_a_dash() {
  mkdir -p -- "-src dir"
  weird_tree "-src dir"
  BACKUP_NOW=20250101-000000 bash "$BACKUP" -k 2 -n nightly -- "-src dir" "-dest dir" || fail "backup.sh exited $?" || return 1
  BACKUP_NOW=20250102-000000 bash "$BACKUP" -k 2 -n nightly -- "-src dir" "-dest dir" || fail "second run exited $?" || return 1
  BACKUP_NOW=20250103-000000 bash "$BACKUP" -k 2 -n nightly -- "-src dir" "-dest dir" || fail "third run exited $?" || return 1
  [ "$(archives "-dest dir" | tr '\n' ' ')" = "nightly-20250102-000000.tar.gz nightly-20250103-000000.tar.gz " ] || fail "left: $(archives "-dest dir")" || return 1
  bash "$RESTORE" -n nightly -- "-dest dir" "-restored" || fail "restore.sh exited $?" || return 1
  same_tree "-src dir" "-restored"
}

test_a_missing_source_fails_and_writes_nothing() {
  mkdir "$WORK/dest"
  if BACKUP_NOW=20250101-000000 bash "$BACKUP" "$WORK/no such dir" "$WORK/dest" 2>/dev/null; then
    fail "backup.sh succeeded"; return 1
  fi
  [ -z "$(ls -A "$WORK/dest")" ] || fail "it left $(ls -A "$WORK/dest")"
}

for t in $(declare -F | awk '{print $3}' | grep '^test_'); do run_test "$t"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
