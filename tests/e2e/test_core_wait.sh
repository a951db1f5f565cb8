#!/bin/sh
# Long-poll waiting: a waiter is granted after a release on the same
# instance (how long after is printed, not asserted: a busy machine is no
# bug, and a poll would grant it within 1 s anyway); waiters are served first come, first served; a wait that
# runs out answers 409 with Retry-After; expiry (ttl=2) lets a waiter take
# over; a client that hangs up stops waiting (and is not granted); a keyed
# retry that finds its own lease is answered at once, not queued.
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
C="Authorization: Bearer $(lg_token carol)"
out=$LG_TMP/out

lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/w:acquire?ttl=60" >/dev/null
LEASE=$(lg_json lease_id <"$out")

# bob waits first, carol second.
curl -sS --max-time 30 -o "$LG_TMP/bob" -X POST -H "$B" \
    "$LG_URL/v1/locks/w:acquire?ttl=60&wait=20" &
bobpid=$!
sleep 0.3
curl -sS --max-time 30 -o "$LG_TMP/carol" -X POST -H "$C" \
    "$LG_URL/v1/locks/w:acquire?ttl=60&wait=20" &
carolpid=$!
sleep 0.3
t0=$(date +%s%N)
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/w:release?lease_id=$LEASE")
lg_eq "$code" 204 "release"
wait $bobpid
t1=$(date +%s%N)
woke_ms=$(( (t1 - t0) / 1000000 ))
echo "waiter granted ${woke_ms} ms after the release was sent"
lg_eq "$(lg_json owner <"$LG_TMP/bob")" bob "first waiter first"
kill -0 $carolpid 2>/dev/null || lg_fail "second waiter was answered early"
BL=$(lg_json lease_id <"$LG_TMP/bob")
lg_curl -o /dev/null -X POST -H "$B" "$LG_URL/v1/locks/w:release?lease_id=$BL"
wait $carolpid
lg_eq "$(lg_json owner <"$LG_TMP/carol")" carol "second waiter next"

# A wait that runs out: 409 locked, Retry-After, the holder.
code=$(lg_curl -D "$LG_TMP/h" -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/w:acquire?wait=1")
lg_eq "$code" 409 "wait ran out"
grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "no Retry-After"
lg_eq "$(lg_json error.lock.owner <"$out")" carol "holder shown"

# Expiry: a ttl=2 lease nobody refreshes is taken over by a waiter.
lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/exp:acquire?ttl=2" >/dev/null
T1=$(lg_json fencing_token <"$out")
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/exp:acquire?ttl=10&wait=10")
lg_eq "$code" 200 "takeover after expiry"
lg_eq "$(lg_json owner <"$out")" bob "new owner after expiry"
[ "$(lg_json fencing_token <"$out")" -gt "$T1" ] || lg_fail "token did not grow on takeover"

# A waiter that hangs up is dropped and never granted.
lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/hang:acquire?ttl=60" >/dev/null
HL=$(lg_json lease_id <"$out")
curl -sS --max-time 1 -o /dev/null -X POST -H "$C" \
    "$LG_URL/v1/locks/hang:acquire?ttl=60&wait=20" 2>/dev/null
sleep 0.6
lg_curl -o /dev/null -X POST -H "$A" "$LG_URL/v1/locks/hang:release?lease_id=$HL"
sleep 0.5
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/hang")
lg_eq "$code" 404 "the departed waiter was not granted the lock"
# Counted, and logged in the aggregate line of clients that went away
# (not a request line each: they leave in thousands when a flood ends).
n=$(lg_curl -H "$A" "$LG_URL/metrics" | sed -n 's/^lockgate_waiters_abandoned_total //p')
lg_eq "$n" 1 "the departed waiter counted"
grep -q '"waiters_abandoned":1,' "$LG_LOG" || lg_fail "the departed waiter not logged"

# A retry with its lease_id (the idempotency key) whose first answer was
# lost finds its own lease at once, even with wait and others waiting:
# it is not queued behind them (they wait for that very lease).  A keyed
# request that does not hold the lock still waits its turn.
lg_curl -o "$out" -X POST -H "$A" \
    "$LG_URL/v1/locks/key:acquire?ttl=60&lease_id=JOBKEY0001" >/dev/null
KL=$(lg_json lease_id <"$out")
KT=$(lg_json fencing_token <"$out")
curl -sS --max-time 30 -o "$LG_TMP/bob" -X POST -H "$B" \
    "$LG_URL/v1/locks/key:acquire?ttl=60&wait=20" &
bobpid=$!
sleep 0.3
curl -sS --max-time 30 -o "$LG_TMP/carol" -X POST -H "$C" \
    "$LG_URL/v1/locks/key:acquire?ttl=60&wait=20&lease_id=CAROLKEY01" &
carolpid=$!
sleep 0.3
# Queued, it would wait out its 8 s and get 409: a 200 is the answer at
# once.
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/key:acquire?ttl=60&wait=8&lease_id=JOBKEY0001")
lg_eq "$code" 200 "a keyed retry behind waiters"
lg_eq "$(lg_json lease_id <"$out")" "$KL" "the keyed retry's lease"
lg_eq "$(lg_json fencing_token <"$out")" "$KT" "the keyed retry's token"
kill -0 $bobpid 2>/dev/null || lg_fail "the first waiter was answered early"
kill -0 $carolpid 2>/dev/null || lg_fail "the keyed waiter was answered early"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/key:release?lease_id=$KL")
lg_eq "$code" 204 "the keyed holder releases"
wait $bobpid
lg_eq "$(lg_json owner <"$LG_TMP/bob")" bob "the first waiter before the keyed one"
kill -0 $carolpid 2>/dev/null || lg_fail "the keyed waiter jumped the queue"
BL=$(lg_json lease_id <"$LG_TMP/bob")
lg_curl -o /dev/null -X POST -H "$B" "$LG_URL/v1/locks/key:release?lease_id=$BL"
wait $carolpid
lg_eq "$(lg_json owner <"$LG_TMP/carol")" carol "the keyed waiter in its turn"
CL=$(lg_json lease_id <"$LG_TMP/carol")
lg_curl -o /dev/null -X POST -H "$C" "$LG_URL/v1/locks/key:release?lease_id=$CL"

# wait beyond the maximum is refused.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/w:acquire?wait=100000")
lg_eq "$code" 400 "wait above the maximum"
lg_stop

# The waiter caps: 3 waiters in all, 2 of one owner; past them an acquire
# that would wait is answered 429 too_many_waiters at once, with
# Retry-After, and a holder is still served.
LG_ENV="LOCKGATE_MAX_WAITERS=3 LOCKGATE_MAX_OWNER_WAITERS=2" lg_start
lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/cap:acquire?ttl=60" >/dev/null
CL=$(lg_json lease_id <"$out")
pids=""
for who in "$B" "$B" "$C"; do
	lg_curl -o /dev/null -X POST -H "$who" "$LG_URL/v1/locks/cap:acquire?wait=10" &
	pids="$pids $!"
	sleep 0.3 # in this order
done
code=$(lg_curl -o "$out" -D "$LG_TMP/h" -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/cap:acquire?wait=10")
lg_eq "$code" 429 "a third waiter of one owner"
lg_eq "$(lg_json error.code <"$out")" too_many_waiters "its code"
grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "no Retry-After with the 429"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$C" \
    "$LG_URL/v1/locks/cap:acquire?wait=10")
lg_eq "$code" 429 "a fourth waiter in all"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/cap:refresh?lease_id=$CL")
lg_eq "$code" 200 "the holder refreshes meanwhile"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/cap:release?lease_id=$CL")
lg_eq "$code" 204 "and releases"
for p in $pids; do wait "$p"; done
lg_curl -H "$A" "$LG_URL/metrics" | grep -q 'outcome="too_many_waiters"} 2$' ||
    lg_fail "the refused waits are not counted"
lg_stop
echo ok
