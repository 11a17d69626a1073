#!/bin/bash
# The hidden tests of bin/deploy.sh's dry run (and of the real run it must leave working). Each
# test runs in a fresh folder; a dry run must leave every byte of it as it was.
set -u
APP=${DEPLOY_APP:-/app}
DEPLOY="$APP/bin/deploy.sh"
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/deploy tests.XXXXXX")
trap 'rm -rf -- "$ROOT"' EXIT
failed=0
passed=0
STAMP=20250601-120000

# A failed check marks its test failed even where the test goes on after it.
fail() { echo "    FAIL: $*"; : > "$WORK.failed"; return 1; }

# Everything about a tree: each entry's type, mode, size, mtime, link target and content.
snapshot() {
  (cd -- "$1" && find . -printf '%y %m %s %T@ %p -> %l\n' | LC_ALL=C sort &&
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r cksum)
}

# A release tarball; with hooks that leave a mark in $WORK/marks when they run.
make_tarball() {
  local out=$1 hooks=$2 src="$WORK/build"
  rm -rf -- "$src"
  mkdir -p "$src/app" "$src/hooks"
  printf 'print("v2")\n' > "$src/app/main.py"
  printf 'default: true\n' > "$src/config.yml"
  if [ "$hooks" = yes ]; then
    printf 'echo pre >> "%s/marks"\n' "$WORK" > "$src/hooks/pre-deploy"
    printf 'echo post >> "%s/marks"\n' "$WORK" > "$src/hooks/post-deploy"
  else
    printf 'nothing to see\n' > "$src/hooks/README"
  fi
  tar -czf "$out" -C "$src" .
  rm -rf -- "$src"
}

# A target that has seen six deploys, with shared config and logs.
make_target() {
  local t=$1 s
  mkdir -p "$t/releases" "$t/shared/logs"
  printf 'db: prod\n' > "$t/shared/config.yml"
  printf 'old log\n' > "$t/shared/logs/app.log"
  for s in 20250101-000000 20250201-000000 20250301-000000 20250401-000000 20250501-000000 20250515-000000; do
    mkdir -p "$t/releases/$s/app"
    printf 'print("%s")\n' "$s" > "$t/releases/$s/app/main.py"
    printf '%s deployed app-%s.tar.gz (sha256 0)\n' "$s" "$s" >> "$t/deploy.log"
  done
  ln -s releases/20250515-000000 "$t/current"
  touch -d '2025-05-15 00:00:00' "$t/deploy.log" "$t/releases" "$t"
}

# The lines of the dry run's stdout that start with "would ", the test's own folder left out.
would_lines() { grep -E '^would ' "$WORK/out" | sed "s|$WORK|WORK|g" || true; }

# would_line_with TEXT: the number of the first "would" line holding TEXT (or fails).
would_line_with() {
  local n
  n=$(grep -nE '^would ' "$WORK/out" | grep -F -- "$1" | head -n 1 | cut -d: -f1)
  [ -n "$n" ] || { fail "no 'would' line mentions $1"; return 1; }
  echo "$n"
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

dry_run() {
  DEPLOY_NOW=$STAMP DEPLOY_RESTART_CMD="touch '$WORK/restarted'" bash "$DEPLOY" "$@" > "$WORK/out" 2> "$WORK/err"
}

test_dry_run_changes_nothing() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" yes
  local before after
  before=$(snapshot "$WORK/srv")
  dry_run --dry-run -k 3 "$WORK/app-2.0.tar.gz" "$WORK/srv/app" || fail "exit $? (stderr: $(cat "$WORK/err"))" || return 1
  after=$(snapshot "$WORK/srv")
  [ "$before" = "$after" ] || { fail "the target changed"; diff <(echo "$before") <(echo "$after") | head -20; return 1; }
  [ ! -e "$WORK/marks" ] || fail "a hook ran: $(cat "$WORK/marks")"
  [ ! -e "$WORK/restarted" ] || fail "the restart command ran"
  [ -n "$(would_lines)" ] || fail "it printed no 'would' lines: $(cat "$WORK/out")"
}

test_dry_run_says_what_it_would_do() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" yes
  dry_run -k 3 --dry-run "$WORK/app-2.0.tar.gz" "$WORK/srv/app" || fail "exit $? (stderr: $(cat "$WORK/err"))" || return 1
  local release pre current post restart item old
  release=$(would_line_with "releases/$STAMP") || return 1
  pre=$(would_line_with "pre-deploy") || return 1
  current=$(would_line_with "current") || return 1
  post=$(would_line_with "post-deploy") || return 1
  restart=$(would_line_with "$WORK/restarted") || return 1
  for item in config.yml logs; do would_line_with "shared/$item" > /dev/null || return 1; done
  [ "$release" -le "$pre" ] && [ "$pre" -lt "$current" ] && [ "$current" -lt "$post" ] ||
    fail "out of order: release line $release, pre-deploy $pre, current $current, post-deploy $post"
  # -k 3 with the new release: the four oldest go, 20250501 and 20250515 stay.
  for old in 20250101-000000 20250201-000000 20250301-000000 20250401-000000; do
    would_line_with "$old" > /dev/null || return 1
  done
  if would_lines | grep -q 20250501-000000; then fail "it would touch 20250501-000000, which is kept: $(would_lines | grep 20250501)"; fi
  [ ! -e "$WORK/srv/app/releases/$STAMP" ] || fail "it created the release"
}

test_no_hooks_no_restart_nothing_to_prune() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" no
  DEPLOY_NOW=$STAMP bash "$DEPLOY" -n "$WORK/app-2.0.tar.gz" "$WORK/srv/app" > "$WORK/out" 2> "$WORK/err" ||
    fail "exit $? (stderr: $(cat "$WORK/err"))" || return 1
  would_line_with "releases/$STAMP" > /dev/null || return 1
  would_line_with "current" > /dev/null || return 1
  if would_lines | grep -qE 'pre-deploy|post-deploy'; then fail "hooks the tarball does not have: $(would_lines)"; fi
  # The default keeps 5: with the new one there are 7, so only the two oldest go.
  would_line_with 20250101-000000 > /dev/null && would_line_with 20250201-000000 > /dev/null || return 1
  if would_lines | grep -qE '20250301-000000|20250401-000000|20250501-000000'; then fail "prunes too much: $(would_lines)"; fi
  if would_lines | grep -qiE 'restart'; then fail "no restart command was given: $(would_lines)"; fi
}

test_dry_run_into_a_fresh_target() {
  make_tarball "$WORK/app-1.0.tar.gz" yes
  mkdir "$WORK/srv"
  local before
  before=$(snapshot "$WORK/srv")
  dry_run --dry-run -r "touch '$WORK/restarted-r'" "$WORK/app-1.0.tar.gz" "$WORK/srv/new app" ||
    fail "exit $? (stderr: $(cat "$WORK/err"))" || return 1
  [ ! -e "$WORK/srv/new app" ] || fail "it created the target"
  [ "$before" = "$(snapshot "$WORK/srv")" ] || fail "something changed under srv/"
  would_line_with "releases/$STAMP" > /dev/null || return 1
  would_line_with "pre-deploy" > /dev/null || return 1
  would_line_with "$WORK/restarted-r" > /dev/null || return 1
  [ ! -e "$WORK/marks" ] && [ ! -e "$WORK/restarted-r" ] && [ ! -e "$WORK/restarted" ] || fail "something ran"
}

test_a_dry_run_still_checks_its_input() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" yes
  printf 'not a tarball\n' > "$WORK/broken.tar.gz"
  local before
  before=$(snapshot "$WORK/srv")
  if dry_run --dry-run "$WORK/missing.tar.gz" "$WORK/srv/app"; then fail "a missing tarball passed"; fi
  if dry_run --dry-run "$WORK/broken.tar.gz" "$WORK/srv/app"; then fail "a broken tarball passed"; fi
  if dry_run --dry-run -k 0 "$WORK/app-2.0.tar.gz" "$WORK/srv/app"; then fail "-k 0 passed"; fi
  if dry_run --dry-run "$WORK/app-2.0.tar.gz"; then fail "a missing TARGET_DIR passed"; fi
  if DEPLOY_NOW=20250515-000000 bash "$DEPLOY" --dry-run "$WORK/app-2.0.tar.gz" "$WORK/srv/app" > /dev/null 2>&1; then
    fail "a release that exists already passed"
  fi
  if dry_run --dry-run --bogus "$WORK/app-2.0.tar.gz" "$WORK/srv/app"; then fail "an unknown option passed"; fi
  [ "$before" = "$(snapshot "$WORK/srv")" ] || fail "the target changed"
}

test_a_real_deploy_still_works() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" yes
  DEPLOY_NOW=$STAMP bash "$DEPLOY" -k 3 -r "touch '$WORK/restarted'" "$WORK/app-2.0.tar.gz" "$WORK/srv/app" > "$WORK/out" 2> "$WORK/err" ||
    fail "exit $? (stderr: $(cat "$WORK/err"))" || return 1
  local t="$WORK/srv/app"
  [ "$(readlink "$t/current")" = "releases/$STAMP" ] || fail "current -> $(readlink "$t/current")"
  [ "$(cat "$t/current/app/main.py")" = 'print("v2")' ] || fail "not unpacked"
  [ "$(readlink "$t/current/config.yml")" = "../../shared/config.yml" ] && [ "$(cat "$t/current/config.yml")" = "db: prod" ] || fail "shared config not linked"
  [ -L "$t/current/logs" ] || fail "shared logs not linked"
  [ "$(tr '\n' ' ' < "$WORK/marks")" = "pre post " ] || fail "hooks: $(cat "$WORK/marks" 2>/dev/null)"
  [ -e "$WORK/restarted" ] || fail "no restart"
  [ "$(ls -1 "$t/releases" | tr '\n' ' ')" = "20250501-000000 20250515-000000 $STAMP " ] || fail "releases: $(ls -1 "$t/releases" | tr '\n' ' ')"
  [ "$(wc -l < "$t/deploy.log")" -eq 7 ] && tail -n 1 "$t/deploy.log" | grep -q "^$STAMP deployed app-2.0.tar.gz" || fail "deploy.log: $(tail -n 1 "$t/deploy.log")"
  [ ! -e "$t/.deploy.lock" ] || fail "the lock was left behind"
  if grep -qE '^would ' "$WORK/out"; then fail "a real run printed 'would' lines"; fi
}

test_a_dry_run_then_the_real_run_agree() {
  make_target "$WORK/srv/app"
  make_tarball "$WORK/app-2.0.tar.gz" no
  dry_run -n -k 2 "$WORK/app-2.0.tar.gz" "$WORK/srv/app" || fail "dry run exit $?" || return 1
  local old
  DEPLOY_NOW=$STAMP bash "$DEPLOY" -k 2 "$WORK/app-2.0.tar.gz" "$WORK/srv/app" 2> "$WORK/err" || fail "real run exit $?" || return 1
  for old in 20250101-000000 20250201-000000 20250301-000000 20250401-000000 20250501-000000; do
    [ ! -e "$WORK/srv/app/releases/$old" ] || fail "$old was not pruned"
    would_line_with "$old" > /dev/null || return 1
  done
  [ -d "$WORK/srv/app/releases/20250515-000000" ] || fail "20250515-000000 was pruned"
}

for t in $(declare -F | awk '{print $3}' | grep '^test_'); do run_test "$t"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
