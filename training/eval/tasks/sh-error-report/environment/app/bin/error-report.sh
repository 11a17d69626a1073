#!/bin/bash
# 5xx errors per endpoint over the web tier's access logs. See README.md.
set -euo pipefail

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

# The log's dates look like 02/Jun/2025.
from_day=$(LC_ALL=C date -u -d "$from" +%d/%b/%Y)
to_day=$(LC_ALL=C date -u -d "$to" +%d/%b/%Y)

cat "$logs"/*/access.log* |
  awk -v from="$from_day" -v to="$to_day" '
    {
      day = substr($4, 2, 11)
      if (day < from || day > to) next
      path = $7
      status = $9
      if (status !~ /^[0-9][0-9][0-9]$/) next
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
