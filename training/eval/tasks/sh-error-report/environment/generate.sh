#!/bin/bash
# Deterministic access logs for 8 web servers, 2025-05-12 to 2025-06-20 (run in /app).
set -euo pipefail
hosts=8
first=2025-05-12
days=40
for h in $(seq 1 "$hosts"); do mkdir -p "logs/web-$h"; done
for d in $(seq 0 $((days - 1))); do
  day=$(date -u -d "$first + $d days" +%Y-%m-%d)
  next=$(date -u -d "$day + 1 day" +%Y%m%d)
  stamp=$(LC_ALL=C date -u -d "$day" +%d/%b/%Y)
  nstamp=$(LC_ALL=C date -u -d "$day + 1 day" +%d/%b/%Y)
  for h in $(seq 1 "$hosts"); do
    if [ "$d" -eq $((days - 1)) ]; then out="logs/web-$h/access.log"; else out="logs/web-$h/access.log-$next"; fi
    awk -v seed=$((d * 977 + h * 131 + 7)) -v stamp="$stamp" -v nstamp="$nstamp" -v day="$d" -v host="$h" '
      function rnd() { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
      function ri(lo, hi) { return lo + int(rnd() * (hi - lo + 1)) }
      function ip() { return ri(1, 223) "." ri(0, 255) "." ri(0, 255) "." ri(1, 254) }
      function two(n) { return n < 10 ? "0" n : n }
      function line(ts, sec,    cdn, r, method, path, status, ua, err, client, bytes) {
        cdn = rnd() < 0.35
        r = rnd()
        method = "GET"; err = 0.004
        if (r < 0.22) { method = "POST"; path = "/api/login"; err = cdn ? 0.11 : 0.003
                        if (rnd() < 0.4) path = path "?next=%2Faccount%2Forders" }
        else if (r < 0.40) { path = "/api/orders/" ri(10000, 99999); err = 0.01 }
        else if (r < 0.50) { path = "/api/orders"; if (rnd() < 0.5) path = path "?page=" ri(1, 9); err = 0.006 }
        else if (r < 0.60) { method = (rnd() < 0.5) ? "POST" : "GET"; path = "/api/cart"; err = cdn ? 0.03 : 0.008 }
        else if (r < 0.72) { path = "/api/search?q=" (rnd() < 0.5 ? "shoes" : "red%20dress") "&page=" ri(1, 4); err = 0.02 }
        else if (r < 0.78) { path = "/api/users/" ri(1, 5000) "/addresses/" ri(1, 9); err = 0.015 }
        else if (r < 0.92) { path = "/static/app." ri(1, 3) ".js"; err = 0.0005 }
        else { path = "/healthz"; err = 0.001 }
        if (day >= 33 && day <= 35 && path ~ /^\/api\/login/) err = err * 3
        status = 200
        if (method == "POST" && path ~ /login/ && rnd() < 0.08) status = 401
        if (rnd() < 0.03) status = 304
        if (rnd() < err) status = (rnd() < 0.6) ? 502 : ((rnd() < 0.5) ? 503 : 504)
        else if (rnd() < 0.01) status = 499
        ua = cdn ? "ShopApp/4.2 (iPhone; iOS 17.5)" : "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0 Safari/537.36"
        client = cdn ? ip() ", 10.20." ri(0, 9) "." ri(1, 254) : (rnd() < 0.02 ? "-" : ip())
        bytes = (status >= 500) ? ri(150, 600) : ri(200, 48000)
        printf "%s - - [%s:%s:%s:%s +0000] \"%s %s HTTP/1.1\" %d %d \"-\" \"%s\" %.3f\n", client, ts, two(int(sec / 3600)), two(int(sec / 60) % 60), two(sec % 60), method, path, status, bytes, ua, rnd() * (status >= 500 ? 30 : 0.8)
      }
      BEGIN {
        for (k = 0; k < 10; k++) rnd()
        n = ri(280, 340); sec = 0
        for (i = 0; i < n; i++) {
          sec += ri(1, int(2 * 86400 / n)); if (sec > 86399) sec = 86399
          line(stamp, sec)
          if (rnd() < 0.004) printf "%s - - [%s:%s:%s:%s +0000] \"-\" 400 0 \"-\" \"-\" 0.000\n", ip(), stamp, two(int(sec / 3600)), two(int(sec / 60) % 60), two(sec % 60)
        }
        # the first seconds after midnight land in the file before the rotation
        for (i = 0; i < 3; i++) line(nstamp, i)
      }' > "$out"
    if [ "$d" -lt $((days - 2)) ]; then gzip -n -9 "$out"; fi
  done
done
