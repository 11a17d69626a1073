#!/bin/bash
# Deterministic auth logs of 40 servers, 2025-09-15 to 2025-11-09, rotated weekly (run in /app).
set -euo pipefail
hosts=40
start=2025-09-15   # a Monday
weeks=8
for h in $(seq 1 "$hosts"); do mkdir -p "logs/$(printf 'srv-%02d' "$h")"; done
awk -v hosts="$hosts" -v weeks="$weeks" -v start="$(date -u -d "$start" +%s)" '
  function rnd() { seed = (seed * 16807) % 2147483647; return seed / 2147483647 }
  function ri(lo, hi) { return lo + int(rnd() * (hi - lo + 1)) }
  function ext_ip() { return (rnd() < 0.12) ? sprintf("2001:db8:%x::%x", ri(1, 65535), ri(1, 65535)) : ri(11, 223) "." ri(0, 255) "." ri(0, 255) "." ri(1, 254) }
  BEGIN {
    seed = 424242
    # attackers: an address, the hosts it tries and the days it is active
    n = 0
    for (a = 0; a < 260; a++) {
      n++; ip[n] = ext_ip()
      k = ri(1, 6); hostsOf[n] = ""
      for (j = 0; j < k; j++) hostsOf[n] = hostsOf[n] " " ri(1, hosts)
      d0[n] = ri(0, weeks * 7 - 1); len[n] = ri(0, 12)
      style[n] = ri(1, 10)   # 1-6 plain, 7-8 invalid user, 9 repeated, 10 mixed
    }
    # internal machines with stale passwords: many hosts, every day
    for (a = 0; a < 6; a++) {
      n++; ip[n] = "10." ri(0, 255) "." ri(0, 255) "." ri(1, 254)
      hostsOf[n] = ""; for (j = 0; j < 8; j++) hostsOf[n] = hostsOf[n] " " ri(1, hosts)
      d0[n] = 0; len[n] = weeks * 7; style[n] = 1
    }
    # scanners that only ever get as far as the key exchange / preauth
    for (a = 0; a < 40; a++) {
      n++; ip[n] = ext_ip(); hostsOf[n] = ""
      for (j = 0; j < 5; j++) hostsOf[n] = hostsOf[n] " " ri(1, hosts)
      d0[n] = ri(0, weeks * 7 - 1); len[n] = ri(0, 20); style[n] = 0
    }
    split("root admin ubuntu deploy test oracle postgres git user pi", users, " ")
    split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", mon, " ")
    for (h = 1; h <= hosts; h++) {
      host = sprintf("srv-%02d", h)
      for (w = 0; w < weeks; w++) {
        file = "logs/" host "/auth.log" ((weeks - 1 - w) ? "." (weeks - 1 - w) : "")
        printf "" > file
        for (d = w * 7; d < w * 7 + 7; d++) {
          t0 = start + d * 86400
          cnt = 0
          # noise and attacks for this day, sorted later by time
          for (i = 0; i < ri(20, 45); i++) {
            ev[++cnt] = ri(0, 86399) SUBSEP noise(host)
          }
          for (a = 1; a <= n; a++) {
            if (d < d0[a] || d > d0[a] + len[a]) continue
            if (index(hostsOf[a] " ", " " h " ") == 0) continue
            if (rnd() < 0.5 && style[a] != 1) continue
            tries = ri(1, 4)
            for (i = 0; i < tries; i++) ev[++cnt] = ri(0, 86399) SUBSEP attack(a)
          }
          for (i = 1; i <= cnt; i++) { split(ev[i], parts, SUBSEP); key[i] = parts[1]; msg[i] = parts[2] }
          # insertion sort by second of the day
          for (i = 2; i <= cnt; i++) { k = key[i]; m = msg[i]; j = i - 1
            while (j > 0 && key[j] > k) { key[j + 1] = key[j]; msg[j + 1] = msg[j]; j-- }
            key[j + 1] = k; msg[j + 1] = m }
          for (i = 1; i <= cnt; i++) {
            ts = t0 + key[i]
            cmd = ""
            printf "%s %s %s\n", stamp(ts), host, msg[i] >> file
          }
          delete ev; delete key; delete msg
        }
        close(file)
      }
    }
  }
  function stamp(ts,    days, y, m, dd, rem, mdays, i) {
    # UTC calendar date of a 2025 timestamp, syslog style ("Oct  3 14:22:01")
    days = int((ts - 1735689600) / 86400); rem = ts % 86400
    split("31 28 31 30 31 30 31 31 30 31 30 31", mdays, " ")
    for (i = 1; days >= mdays[i]; i++) days -= mdays[i]
    return sprintf("%s %2d %02d:%02d:%02d", mon[i], days + 1, int(rem / 3600), int(rem / 60) % 60, rem % 60)
  }
  function pid() { return ri(1000, 65000) }
  function noise(host,    r, u) {
    r = rnd(); u = users[ri(1, 4)]
    if (r < 0.3) return "sshd[" pid() "]: Accepted publickey for " u " from 10." ri(0, 255) "." ri(0, 255) "." ri(1, 254) " port " ri(30000, 65000) " ssh2: ED25519 SHA256:" sprintf("%08x", ri(1, 2147483646))
    if (r < 0.5) return "sshd[" pid() "]: pam_unix(sshd:session): session opened for user " u "(uid=" ri(1000, 1010) ") by (uid=0)"
    if (r < 0.65) return "sshd[" pid() "]: pam_unix(sshd:session): session closed for user " u
    if (r < 0.85) return "CRON[" pid() "]: pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)"
    if (r < 0.95) return "sudo:   " u " : TTY=pts/" ri(0, 4) " ; PWD=/home/" u " ; USER=root ; COMMAND=/usr/bin/systemctl restart app"
    return "systemd-logind[" ri(400, 900) "]: New session " ri(1, 9999) " of user " u "."
  }
  function attack(a,    s, u, p) {
    s = style[a]; u = users[ri(1, 10)]; p = ri(30000, 65000)
    if (s == 10) s = ri(1, 9)
    if (s == 0) {
      if (rnd() < 0.5) return "sshd[" pid() "]: Connection closed by authenticating user " u " " ip[a] " port " p " [preauth]"
      return "sshd[" pid() "]: Invalid user " u " from " ip[a] " port " p
    }
    if (s <= 6) return "sshd[" pid() "]: Failed password for " u " from " ip[a] " port " p " ssh2"
    if (s <= 8) {
      if (rnd() < 0.1) return "sshd[" pid() "]: Failed password for invalid user  from " ip[a] " port " p " ssh2"
      return "sshd[" pid() "]: Failed password for invalid user " u "x from " ip[a] " port " p " ssh2"
    }
    return "sshd[" pid() "]: message repeated " ri(2, 5) " times: [ Failed password for " u " from " ip[a] " port " p " ssh2]"
  }
' /dev/null
for f in logs/*/auth.log.[2-9]; do gzip -n -9 "$f"; done
