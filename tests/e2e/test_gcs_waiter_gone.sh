#!/bin/sh
# A waiter is never granted a lease nobody will be told of (issue 18, 3).
#  1. Its client hangs up while the waiter's insert is on its way (the
#     fake holds it 3 s): the grant that completes afterwards is given
#     back at once, so the lock is free again, not held for its TTL.
#  2. Its wait runs out, and a release on the same instance wakes it
#     within the sweeper's 250 ms period: it is answered 409 (the wait
#     ran out), not granted late.  (The release must reach the server
#     after the waiter's deadline: 60 ms of room for two curl starts.)
# Always runs on gs:// against the fake, whose faults make the timing.
LG_STORE=gs
. tests/e2e/lib.sh
lg_start
# The fake counts from here, not lockgate's start-up question about its
# preconditions (gcs/referee.c: two inserts, a patch, two deletes).
lg_fake reset >/dev/null
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
out=$LG_TMP/out

# hold NAME: alice takes NAME (ttl 60); prints its lease_id.
hold() {
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/$1:acquire?ttl=60")
	lg_eq "$code" 200 "alice holds $1"
	lg_json lease_id <"$out"
}

# release NAME LEASE
release() {
	code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/$1:release?lease_id=$2")
	lg_eq "$code" 204 "alice releases $1"
}

abandoned() {
	lg_curl -H "$A" "$LG_URL/metrics" |
	    sed -n 's/^lockgate_lock_outcomes_total{outcome="abandoned"} //p'
}

# 1. The client leaves while its grant is being written.
L=$(hold gone)
lg_curl -o /dev/null --max-time 2 -X POST -H "$B" \
    "$LG_URL/v1/locks/gone:acquire?ttl=60&wait=30" &
waiter=$!
sleep 0.5 # bob's first attempt was refused; he waits
lg_fake "fault?op=insert&kind=latency&ms=3000" >/dev/null
release gone "$L"
wait "$waiter" 2>/dev/null || true # curl gave up after 2 s
# The held insert is applied about 3.5 s after the release; the grant is
# then given back: a second delete.
i=0
while [ $i -lt 40 ] && [ "$(lg_fake_count delete)" -lt 2 ]; do
	sleep 0.25
	i=$((i + 1))
done
lg_eq "$(lg_fake_count delete)" 2 "the abandoned grant was given back"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/gone")
lg_eq "$code" 404 "the lock is free ($(head -c 300 "$out"))"
lg_eq "$(abandoned)" 1 "the given-back grant is counted"
# And anyone may take it now.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/gone:acquire?ttl=5")
lg_eq "$code" 200 "the lock can be taken again"

# 2. The wait runs out just before a release wakes the waiter: 409.  Three
# rounds: before, a waiter was granted when no sweep (every 250 ms) came
# between its deadline and the release, which happened in most rounds.
for r in 1 2 3; do
	L=$(hold "late$r")
	lg_curl -o "$LG_TMP/late.body" -w '%{http_code}' -X POST -H "$B" \
	    "$LG_URL/v1/locks/late$r:acquire?ttl=60&wait=2" >"$LG_TMP/late" &
	waiter=$!
	sleep 2.06 # past bob's deadline, within the sweeper's period
	release "late$r" "$L"
	wait "$waiter" 2>/dev/null || true
	lg_eq "$(cat "$LG_TMP/late")" 409 "round $r: the waiter whose wait ran out ($(head -c 300 "$LG_TMP/late.body"))"
	code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/late$r")
	lg_eq "$code" 404 "round $r: nobody holds late$r"
done
lg_stop
echo ok
