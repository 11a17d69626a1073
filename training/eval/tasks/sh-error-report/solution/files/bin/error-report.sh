#!/bin/bash
# 5xx errors per endpoint over the web tier's access logs. See README.md.
set -euo pipefail
export LC_ALL=C

usage() { echo "usage: error-report.sh [-f FROM] [-t TO] LOG_DIR" >&2; exit 2; }

from=$(date -u -d '7 days ago' +%Y-%m-%d)
to=$(date -u -d 'yesterday' +%Y-%m-%d)
while getopts "f:t:" opt; do
  case $opt in
    f) from=$OPTARG ;;
    t) to=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
logs=$1
[ -d "$logs" ] || { echo "error-report.sh: no such folder: $logs" >&2; exit 1; }

# Dates compared as numbers, YYYYMMDD (the log's 02/Jun/2025 does not sort).
from_day=$(date -u -d "$from" +%Y%m%d) || usage
to_day=$(date -u -d "$to" +%Y%m%d) || usage

# Every log, the rotated and gzipped ones too (gzip -f passes plain files through).
shopt -s nullglob
files=("$logs"/*/access.log*)
[ ${#files[@]} -gt 0 ] || { echo "error-report.sh: no access logs in $logs" >&2; exit 1; }

# Split on the quotes: the part before the request holds X-Forwarded-For, which has one
# address or several ("client, cdn edge"), so whitespace fields do not line up.
gzip -cdf -- "${files[@]}" |
  awk -F'"' -v from="$from_day" -v to="$to_day" '
    BEGIN {
      split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", names, " ")
      for (i = 1; i <= 12; i++) month[names[i]] = i
    }
    {
      at = index($1, "[")
      if (!at || NF < 3) next
      stamp = substr($1, at + 1, 11)
      if (substr(stamp, 3, 1) != "/" || !(substr(stamp, 4, 3) in month)) next
      day = substr(stamp, 8, 4) * 10000 + month[substr(stamp, 4, 3)] * 100 + substr(stamp, 1, 2)
      if (day < from || day > to) next
      if (split($2, request, " ") != 3) next
      split($3, after, " ")
      status = after[1]
      if (status !~ /^[0-9][0-9][0-9]$/) next
      path = request[2]
      sub(/\?.*/, "", path)
      n = split(path, seg, "/")
      endpoint = ""
      for (i = 2; i <= n; i++) endpoint = endpoint "/" (seg[i] ~ /^[0-9]+$/ ? ":id" : seg[i])
      if (endpoint == "") endpoint = "/"
      requests[endpoint]++
      if (status ~ /^5/) errors[endpoint]++
    }
    END {
      for (e in requests) printf "%s %d %d %.2f\n", e, requests[e], errors[e], 100 * errors[e] / requests[e]
    }' |
  sort -k2,2nr -k1,1 |
  awk 'BEGIN { printf "%-32s %10s %10s %14s\n", "endpoint", "requests", "errors_5xx", "error_rate_pct" }
       { printf "%-32s %10d %10d %14s\n", $1, $2, $3, $4 }'
