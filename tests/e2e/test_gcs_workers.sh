#!/bin/sh
# gs:// storage calls run as event-loop tasks: no thread waits for the
# storage, so concurrent requests all reach the storage at once, more of
# them than the 64 storage workers that used to cap it, and requests that
# do not wait behind them are answered meanwhile.  With every insert held
# by the fake for a while, N concurrent acquires must all be at the fake
# together, and while they are held /healthz, an inspect (a storage read)
# and a list are answered.  Counts, not timings: the fake reports the most
# requests it held at once, and that it has applied none of the inserts
# when the other answers arrive.  Always runs on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
N=100          # clients, each on its own connection (> the old 64 workers)
HOLD_MS=4000   # each insert held by the fake; the clients start well within
lg_start
# The fake counts from here, not lockgate's start-up question about its
# preconditions (gcs/referee.c: two inserts, a patch, two deletes).
lg_fake reset >/dev/null
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
# Every insert has arrived at the fake (and is held there).
i=0
while [ "$(lg_fake_count insert)" -lt $N ] && [ $i -lt 200 ]; do
	sleep 0.02
	i=$((i + 1))
done
lg_eq "$(lg_fake_count insert)" $N "inserts arrived at the storage"
# Meanwhile the same instance answers what does not wait behind them.
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/healthz")" 200 \
    "healthz while $N storage calls are held"
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' -H "$AUTH" \
    "$LG_URL/v1/locks/w/other")" 404 "inspect (a storage read) meanwhile"
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' -H "$AUTH" \
    "$LG_URL/v1/locks?prefix=w/")" 200 "list meanwhile"
lg_eq "$(lg_fake_count objects)" 0 "no insert applied yet: all still held"
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
lg_eq "$(lg_fake_count objects)" $N "every grant is in the store"
lg_stop
echo ok
