#!/bin/sh
# A wait ends by its deadline even when the storage stops answering while
# it waits.  More waiters than the instance has pollers (SRV_WAIT_THREADS,
# 4) queue on held locks; then every storage read is held by the fake far
# longer than the store's retry budget (10 s).  Each waiter must still get
# its answer (409, the holder it saw) at about its wait, not when the
# storage call of a poller gives up: before, a poller's read ran for the
# whole budget, and the waiters no free poller swept waited for it, so a
# wait=2 was answered after 10 to 30 s.  Always runs on gs:// against the
# fake.
LG_STORE=gs
. tests/e2e/lib.sh
N=6            # waiters, on 6 locks: more than the 4 pollers
WAIT=2         # s each waits
BOUND=6        # s: WAIT plus room for a slow machine, well under 10
HOLD_MS=30000  # each storage read held by the fake
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"

i=0
while [ $i -lt $N ]; do
	code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/wd/h$i:acquire?ttl=60")
	lg_eq "$code" 200 "alice holds wd/h$i"
	i=$((i + 1))
done
pids=""
i=0
while [ $i -lt $N ]; do
	(
		lg_curl -o "$LG_TMP/w$i.body" -w '%{http_code} %{time_total}' \
		    -X POST -H "$B" "$LG_URL/v1/locks/wd/h$i:acquire?wait=$WAIT" \
		    >"$LG_TMP/w$i.out"
	) &
	pids="$pids $!"
	i=$((i + 1))
done
sleep 0.5 # each has made its first attempt and waits
lg_fake "fault?op=get&kind=latency&count=-1&ms=$HOLD_MS" >/dev/null
for p in $pids; do
	wait "$p"
done
i=0
while [ $i -lt $N ]; do
	code=$(cut -d' ' -f1 "$LG_TMP/w$i.out")
	secs=$(cut -d' ' -f2 "$LG_TMP/w$i.out")
	lg_eq "$code" 409 "waiter $i: the wait ran out ($(head -c 200 "$LG_TMP/w$i.body"))"
	awk -v s="$secs" -v b="$BOUND" 'BEGIN { exit !(s < b) }' ||
	    lg_fail "waiter $i answered after $secs s, want under $BOUND (wait=$WAIT)"
	i=$((i + 1))
done
lg_fake clear-faults >/dev/null

# The same when the pollers are held by writes, which keep the store's
# budget: leases that expire make every poller take one over, and the
# fake holds each insert past the budget.  The waiters no poller is
# working on are answered by the sweeper at their deadline; before, they
# waited for a poller to come back from the storage (10 s).
WAIT2=4
i=0
while [ $i -lt $N ]; do
	code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/wd2/h$i:acquire?ttl=2")
	lg_eq "$code" 200 "alice holds wd2/h$i for 2 s"
	i=$((i + 1))
done
pids=""
i=0
while [ $i -lt $N ]; do
	(
		lg_curl -o "$LG_TMP/v$i.body" -w '%{http_code} %{time_total}' \
		    -X POST -H "$B" "$LG_URL/v1/locks/wd2/h$i:acquire?wait=$WAIT2" \
		    >"$LG_TMP/v$i.out"
	) &
	pids="$pids $!"
	i=$((i + 1))
done
sleep 0.5 # each has made its first attempt (refused) and waits
lg_fake "fault?op=insert&kind=latency&count=-1&ms=$HOLD_MS" >/dev/null
for p in $pids; do
	wait "$p"
done
on_time=0
i=0
while [ $i -lt $N ]; do
	code=$(cut -d' ' -f1 "$LG_TMP/v$i.out")
	secs=$(cut -d' ' -f2 "$LG_TMP/v$i.out")
	[ "$code" = 200 ] && lg_fail "waiter $i granted though every insert was held"
	if awk -v s="$secs" -v b="$((WAIT2 + 2))" 'BEGIN { exit !(s < b) }'; then
		on_time=$((on_time + 1))
	fi
	i=$((i + 1))
done
# At most 4 pollers are held by an insert; the others' waiters are swept.
[ "$on_time" -ge $((N - 4)) ] ||
    lg_fail "$on_time of $N waiters answered by their wait ($WAIT2 s) + 2 s, want at least $((N - 4))"
lg_fake clear-faults >/dev/null
lg_stop
echo ok
