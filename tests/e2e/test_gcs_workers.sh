#!/bin/sh
# Storage workers: an HTTP polling thread never waits for the storage, so
# concurrent requests on distinct connections all reach the storage at once,
# however libmicrohttpd spread the connections over its threads.  With every
# insert held by the fake for a while, N concurrent acquires (N above the
# polling threads, below the workers) must all be at the fake together.
# A count, not a timing: the fake reports the most requests it held at once.
# Always runs on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
N=16           # clients, on 16 connections (> 8 polling threads, < 64 workers)
HOLD_MS=3000   # each insert held by the fake; the clients start well within
lg_start
AUTH="Authorization: Bearer $(lg_token worker)"

lg_fake "fault?op=insert&kind=latency&count=-1&ms=$HOLD_MS" >/dev/null
pids=""
i=0
while [ $i -lt $N ]; do
	(
		lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$AUTH" \
		    "$LG_URL/v1/locks/w/l$i:acquire?ttl=30" >"$LG_TMP/c$i.code"
	) &
	pids="$pids $!"
	i=$((i + 1))
done
for p in $pids; do wait "$p"; done
lg_fake clear-faults >/dev/null

i=0
while [ $i -lt $N ]; do
	lg_eq "$(cat "$LG_TMP/c$i.code")" 200 "client $i granted"
	i=$((i + 1))
done
peak=$(lg_fake_count latency_peak)
echo "    $peak of $N inserts were at the storage at once" >&2
lg_eq "$peak" "$N" "inserts at the storage at once"
lg_stop
echo ok
