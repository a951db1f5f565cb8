#!/bin/sh
# Issue 20, 7: a holder is served under a flood.  With 10,000
# authenticated waiters (wait=60) parked on one lock and 4,000 connections
# trickling half a request head, the holder's refresh (which keeps the
# lease), inspect and release are each answered, and the release wakes the
# first waiter; a parked waiter costs at most 20 KiB of RSS.  See
# edge_flood.py for the steps and bounds.  Then the flood leaves at once:
# the 9,999 waiters and 4,000 half-open connections that went away are
# counted in /metrics and logged in aggregate, a few lines, not one each.
#
# mem:// is enough: what is measured is the HTTP edge and the waiter queue
# (connections, requests, waiters), which are the same whatever the store;
# a parked waiter holds no store call (only the head of the queue polls).
#
# The release build, not the AddressSanitizer one: ASan's shadow memory,
# redzones and quarantine of freed blocks would make RSS measure ASan.
# The limits are raised for the flood (about 14,000 connections; the
# server's open-file limit is raised to its hard limit, 20,000 here), and
# the head timeout is longer than the test, so that the half-open
# connections stay open throughout.
LG_BIN=${LG_FLOOD_BIN:-build/lockgate}
. tests/e2e/lib.sh
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=20000
[ "$hard" -ge 16000 ] ||
	lg_skip "the open-file hard limit is $hard; this test needs 16000"
ulimit -n "$hard" || lg_fail "cannot raise the open-file limit to $hard"
LG_ENV="LOCKGATE_MAX_CONNECTIONS=15500 LOCKGATE_MAX_WAITERS=10000
    LOCKGATE_MAX_OWNER_WAITERS=10000 LOCKGATE_HEAD_TIMEOUT=300" lg_start
H=$(lg_token holder)
W=$(lg_token flood)
out=$LG_TMP/out

code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "Authorization: Bearer $H" \
    "$LG_URL/v1/locks/flood/held:acquire?ttl=60")
lg_eq "$code" 200 "the holder acquires"
L=$(lg_json lease_id <"$out")

python3 tests/e2e/edge_flood.py --port "${LG_URL##*:}" --pid "$LG_PID" \
    --name flood/held --holder-token "$H" --lease "$L" --waiter-token "$W" \
    --waiters 10000 --half-open 4000 || lg_fail "flood"

# The burst of leaving: counted (the sweeper notices hung-up waiters
# within a quarter of a second; bounded loop) ...
i=0
while [ $i -lt 100 ]; do
	lg_curl -o "$out" -H "Authorization: Bearer $H" "$LG_URL/metrics"
	gone=$(sed -n 's/^lockgate_waiters_abandoned_total //p' "$out")
	dropped=$(sed -n 's/^lockgate_heads_dropped_total //p' "$out")
	[ "$gone" = 9999 ] && [ "$dropped" = 4000 ] && break
	sleep 0.1
	i=$((i + 1))
done
lg_eq "$gone" 9999 "waiters whose client left, counted"
lg_eq "$dropped" 4000 "half-open connections dropped, counted"
lg_eq "$(sed -n 's/^lockgate_waiters //p' "$out")" 0 "no waiter left"
lg_stop
# ... and logged in aggregate: no line per waiter, a few lines in all,
# which add up to the counts.
n=$(grep -c '"status":499' "$LG_LOG")
lg_eq "$n" 0 "request lines for waiters that left"
lines=$(grep -c '"severity":"WARNING"' "$LG_LOG")
[ "$lines" -le 8 ] || lg_fail "$lines warning lines for one burst: want a few"
sum() {
	sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$LG_LOG" |
	    awk '{ s += $1 } END { print s + 0 }'
}
lg_eq "$(sum waiters_abandoned)" 9999 "waiters that left, in the log"
lg_eq "$(sum heads_dropped)" 4000 "half-open connections dropped, in the log"
echo ok
