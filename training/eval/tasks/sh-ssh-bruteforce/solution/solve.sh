#!/bin/bash
# Every file (the gzipped weeks too), October lines only, both "Failed password" forms and
# the "message repeated" ones; the address is the field before "port"; 10.x left out.
set -euo pipefail
cd /app
gzip -cdf -- logs/*/auth.log* |
  awk '$1 == "Oct" && / sshd\[[0-9]+\]: (message repeated [0-9]+ times: \[ )?Failed password for / {
         for (i = NF; i > 1; i--) if ($i == "port") { ip = $(i - 1); break }
         if (ip !~ /^10\./) print ip, $4
       }' |
  sort -u | awk '{ n[$1]++ } END { for (ip in n) if (n[ip] >= 3) c++; print c + 0 }' > answer.txt
cat answer.txt
