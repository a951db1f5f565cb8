#!/bin/sh
# A wait ends by its deadline even when the storage stops answering while
# it waits.  Waiters queue on 6 held locks (each lock's first waiter has
# its lock polled by a task of its loop); then every storage read is held
# by the fake far longer than the store's retry budget (10 s).  Each
# waiter must still get its answer (409, the holder it saw) at about its
# wait, not when the poll's storage call gives up: the sweeper answers a
# waiter at its deadline even while its lock's read is in flight.  (When
# 4 poller threads did the polling, a poller's read ran for the whole
# budget and a wait=2 was answered after 10 to 30 s.)  Always runs on
# gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
N=6            # waiters, one on each of 6 locks
WAIT=2         # s each waits
BOUND=6        # s: WAIT plus room for a slow machine, well under 10
HOLD_MS=30000  # each storage read held by the fake
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"

# round DIR TTL WAIT OP: alice holds DIR/h0..h{N-1} for TTL s; bob waits
# WAIT s on each; once all wait, the fake holds every OP request for
# HOLD_MS.  Leaves "CODE SECONDS" of waiter i in $LG_TMP/DIR.i.
round() {
	i=0
	while [ $i -lt $N ]; do
		code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
		    "$LG_URL/v1/locks/$1/h$i:acquire?ttl=$2")
		lg_eq "$code" 200 "alice holds $1/h$i"
		i=$((i + 1))
	done
	pids=""
	i=0
	while [ $i -lt $N ]; do
		(
			lg_curl -o "$LG_TMP/$1.$i.body" \
			    -w '%{http_code} %{time_total}' -X POST -H "$B" \
			    "$LG_URL/v1/locks/$1/h$i:acquire?wait=$3" \
			    >"$LG_TMP/$1.$i"
		) &
		pids="$pids $!"
		i=$((i + 1))
	done
	sleep 0.5 # each has made its first attempt (refused) and waits
	lg_fake "fault?op=$4&kind=latency&count=-1&ms=$HOLD_MS" >/dev/null
	for p in $pids; do
		wait "$p"
	done
	lg_fake clear-faults >/dev/null
}

# under SECONDS BOUND: 0 when SECONDS < BOUND.
under() { awk -v s="$1" -v b="$2" 'BEGIN { exit !(s < b) }'; }

round wd 60 "$WAIT" get
i=0
while [ $i -lt $N ]; do
	read -r code secs <<EOT
$(cat "$LG_TMP/wd.$i")
EOT
	lg_eq "$code" 409 "waiter $i: the wait ran out ($(head -c 200 "$LG_TMP/wd.$i.body"))"
	under "$secs" "$BOUND" ||
	    lg_fail "waiter $i answered after $secs s, want under $BOUND (wait=$WAIT)"
	i=$((i + 1))
done

# Writes are another matter: a write may grant, so a waiter whose
# write is in flight at its deadline is answered with that write's
# outcome (README, Waiting), here its failure when the store's budget
# (10 s) runs out.  Leases that expire make every poll try to take one
# over, and the fake holds each insert past the budget.  Every waiter is
# told the storage failed (503), not the 409 of its first look, which
# would be untrue had the insert been applied; and no later than its
# write's budget after its deadline.
WAIT2=4
BUDGET=10 # s: LOCKGATE_GCS_RETRY_TOTAL_MS, the default
round wd2 2 "$WAIT2" insert
i=0
while [ $i -lt $N ]; do
	read -r code secs <<EOT
$(cat "$LG_TMP/wd2.$i")
EOT
	lg_eq "$code" 503 "waiter $i: its write failed ($(head -c 200 "$LG_TMP/wd2.$i.body"))"
	under "$secs" $((WAIT2 + BUDGET + 3)) ||
	    lg_fail "waiter $i answered after $secs s, want under $((WAIT2 + BUDGET + 3))"
	i=$((i + 1))
done
lg_stop
echo ok
