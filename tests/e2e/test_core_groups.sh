#!/bin/sh
# Semaphores (limit=N) and shared locks (mode=shared) over HTTP: bad
# values are 400 and change nothing; a limit=3 semaphore grants three and
# refuses the fourth naming its holders; another limit is 409
# limit_mismatch; inspect and list show mode, limit and holders and never
# a lease_id; refresh, release and forceRelease work per lease; a release
# wakes as many waiters as there are free slots, a holder that stops
# refreshing loses its slot to a waiter after its TTL, and a waiting
# writer holds back new readers on this instance, but not a keyed
# reader's retry that finds its own lease.
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
ADM="Authorization: Bearer $(lg_token root admin)"
out=$LG_TMP/out

post() { # post AUTH PATH -> status, body in $out
	lg_curl -o "$out" -w '%{http_code}' -X POST -H "$1" "$LG_URL/v1/locks/$2"
}

# No lease_id anywhere in a document (inspect, list, errors).
no_lease_id() {
	grep -q '"lease_id"' "$out" && lg_fail "$1: a lease_id was shown"
	return 0
}

count_holders() { # count_holders PATH-IN-JSON < JSON
	python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    d = d[int(k)] if isinstance(d, list) else d[k]
print(len(d))
' "$1"
}

# --- bad values: 400, and nothing changes ------------------------------
for q in "limit=0" "limit=1001" "limit=two" "mode=readers" \
    "mode=shared&limit=3" "limit=" "mode="; do
	code=$(post "$A" "bad:acquire?$q")
	lg_eq "$code" 400 "acquire with $q"
	[ -n "$(lg_json error.message <"$out")" ] || lg_fail "no message for $q"
done
lg_eq "$(lg_json error.code <"$out")" bad_mode "empty mode"
post "$A" "bad:acquire?mode=shared&limit=3" >/dev/null
lg_eq "$(lg_json error.code <"$out")" bad_limit "shared with a limit"
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/bad")
lg_eq "$code" 404 "a refused acquire left nothing"
# mode=shared with limit=1 is fine, as is mode=exclusive.
lg_eq "$(post "$A" "okshared:acquire?mode=shared&limit=1")" 200 "shared limit=1"
lg_eq "$(post "$A" "okexcl:acquire?mode=exclusive")" 200 "mode=exclusive"
lg_eq "$(lg_json limit <"$out")" 1 "exclusive limit"
lg_eq "$(lg_json mode <"$out")" exclusive "exclusive mode"
lg_eq "$(count_holders holders <"$out")" 1 "an exclusive lease's holders"

# --- a semaphore of 3 ----------------------------------------------------
L1= L2= L3= T=""
for i in 1 2 3; do
	lg_eq "$(post "$A" "sem:acquire?limit=3&ttl=60&holder=job$i")" 200 \
	    "semaphore lease $i"
	eval "L$i=\$(lg_json lease_id <\"\$out\")"
	T="$T $(lg_json fencing_token <"$out")"
done
lg_eq "$(echo $T | tr ' ' '\n' | sort -u | wc -l)" 3 "distinct fencing tokens"
lg_eq "$(post "$B" "sem:acquire?limit=3")" 409 "fourth lease"
lg_eq "$(lg_json error.code <"$out")" locked "fourth: locked"
lg_eq "$(count_holders error.lock.holders <"$out")" 3 "refusal names holders"
no_lease_id "refusal"
lg_eq "$(post "$B" "sem:acquire?limit=2")" 409 "another limit"
lg_eq "$(lg_json error.code <"$out")" limit_mismatch "another limit: code"
lg_json error.message <"$out" | grep -q 'limit=3' ||
	lg_fail "limit_mismatch names the current limit"
lg_eq "$(post "$B" "sem:acquire?mode=shared")" 409 "reader on a semaphore"
lg_eq "$(lg_json error.code <"$out")" limit_mismatch "reader: code"
lg_eq "$(post "$B" "sem:acquire")" 409 "exclusive on a semaphore"
lg_eq "$(lg_json error.code <"$out")" limit_mismatch "exclusive: code"

lg_curl -o "$out" -H "$A" "$LG_URL/v1/locks/sem" >/dev/null
lg_eq "$(lg_json mode <"$out")" exclusive "inspect mode"
lg_eq "$(lg_json limit <"$out")" 3 "inspect limit"
lg_eq "$(count_holders holders <"$out")" 3 "inspect holders"
lg_eq "$(lg_json holder <"$out")" job1 "earliest lease on top"
no_lease_id "inspect"
lg_curl -o "$out" -H "$A" "$LG_URL/v1/locks?prefix=sem" >/dev/null
lg_eq "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(",".join(l["name"] for l in d["locks"]))' <"$out")" \
    sem "list shows the lock once, no lease objects"
lg_eq "$(count_holders locks.0.holders <"$out")" 3 "list holders"
no_lease_id "list"

# Refresh and release per lease.
lg_eq "$(post "$A" "sem:refresh?lease_id=$L2&ttl=30")" 200 "refresh one"
lg_eq "$(lg_json ttl <"$out")" 30 "refreshed ttl"
lg_eq "$(post "$A" "sem:release?lease_id=$L2")" 204 "release one"
lg_eq "$(post "$A" "sem:refresh?lease_id=$L2")" 404 "refresh a released lease"
lg_eq "$(post "$B" "sem:acquire?limit=3")" 200 "a slot again"
LB=$(lg_json lease_id <"$out")
TB=$(lg_json fencing_token <"$out")

# forceRelease: a group needs the fencing token; with it, that lease only.
lg_eq "$(post "$ADM" "sem:forceRelease")" 400 "forceRelease without token"
lg_json error.message <"$out" | grep -q fencing_token ||
	lg_fail "forceRelease: says to name the lease by fencing_token"
lg_eq "$(post "$ADM" "sem:forceRelease?fencing_token=$TB")" 204 "forceRelease one"
lg_eq "$(post "$B" "sem:refresh?lease_id=$LB")" 404 "forced lease gone"
lg_curl -o "$out" -H "$A" "$LG_URL/v1/locks/sem" >/dev/null
lg_eq "$(count_holders holders <"$out")" 2 "two left"

# --- a release wakes as many waiters as there are free slots -------------
lg_eq "$(post "$B" "sem:acquire?limit=3&ttl=60")" 200 "full again"
L4=$(lg_json lease_id <"$out")
curl -sS --max-time 30 -o "$LG_TMP/w1" -X POST -H "$B" \
    "$LG_URL/v1/locks/sem:acquire?limit=3&ttl=60&wait=20" &
w1=$!
curl -sS --max-time 30 -o "$LG_TMP/w2" -X POST -H "$B" \
    "$LG_URL/v1/locks/sem:acquire?limit=3&ttl=60&wait=20" &
w2=$!
sleep 0.5
lg_eq "$(post "$A" "sem:release?lease_id=$L1")" 204 "release for waiters"
lg_eq "$(post "$A" "sem:release?lease_id=$L3")" 204 "release for waiters"
wait $w1
wait $w2
[ -n "$(lg_json lease_id <"$LG_TMP/w1")" ] || lg_fail "first waiter not granted"
[ -n "$(lg_json lease_id <"$LG_TMP/w2")" ] || lg_fail "second waiter not granted"
for f in w1 w2; do
	l=$(lg_json lease_id <"$LG_TMP/$f")
	lg_eq "$(post "$B" "sem:release?lease_id=$l")" 204 "release $f"
done
lg_eq "$(post "$B" "sem:release?lease_id=$L4")" 204 "release last"
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/sem")" \
    404 "a group with no lease is not held"

# --- a holder that stops refreshing loses its slot to a waiter ----------
lg_eq "$(post "$A" "crash:acquire?limit=2&ttl=2")" 200 "a lease nobody refreshes"
lg_eq "$(post "$A" "crash:acquire?limit=2&ttl=60")" 200 "a live lease"
LIVE=$(lg_json lease_id <"$out")
lg_eq "$(post "$B" "crash:acquire?limit=2&ttl=60&wait=15")" 200 \
    "a waiter gets the slot after the TTL"
lg_eq "$(lg_json owner <"$out")" bob "the waiter's lease"
lg_curl -o "$out" -H "$A" "$LG_URL/v1/locks/crash" >/dev/null
lg_eq "$(count_holders holders <"$out")" 2 "the live lease and the waiter's"
lg_eq "$(post "$A" "crash:release?lease_id=$LIVE")" 204 "release the live one"

# --- shared and exclusive ------------------------------------------------
lg_eq "$(post "$A" "rw:acquire?ttl=60")" 200 "writer"
WL=$(lg_json lease_id <"$out")
lg_eq "$(post "$B" "rw:acquire?mode=shared")" 409 "reader behind a writer"
lg_eq "$(lg_json error.code <"$out")" locked "reader behind a writer: code"
for i in 1 2 3; do
	curl -sS --max-time 30 -o "$LG_TMP/r$i" -X POST -H "$B" \
	    "$LG_URL/v1/locks/rw:acquire?mode=shared&ttl=60&wait=20" &
	eval "r$i=\$!"
done
sleep 0.5
lg_eq "$(post "$A" "rw:release?lease_id=$WL")" 204 "writer leaves"
wait $r1
wait $r2
wait $r3
for i in 1 2 3; do
	lg_eq "$(lg_json mode <"$LG_TMP/r$i")" shared "reader $i granted"
done
lg_curl -o "$out" -H "$A" "$LG_URL/v1/locks/rw" >/dev/null
lg_eq "$(count_holders holders <"$out")" 3 "three readers"
lg_eq "$(lg_json limit <"$out")" "" "a shared lock's limit is null"

# A writer waits; a new reader without wait is refused meanwhile.
curl -sS --max-time 30 -o "$LG_TMP/wr" -X POST -H "$A" \
    "$LG_URL/v1/locks/rw:acquire?ttl=60&wait=20" &
wr=$!
sleep 0.5
lg_eq "$(post "$B" "rw:acquire?mode=shared")" 409 "reader behind a waiting writer"
for i in 1 2 3; do
	l=$(lg_json lease_id <"$LG_TMP/r$i")
	lg_eq "$(post "$B" "rw:release?lease_id=$l")" 204 "reader $i leaves"
done
wait $wr
lg_eq "$(lg_json owner <"$LG_TMP/wr")" alice "the writer got it"
lg_eq "$(lg_json mode <"$LG_TMP/wr")" exclusive "the writer's mode"
WL=$(lg_json lease_id <"$LG_TMP/wr")
lg_eq "$(post "$A" "rw:refresh?lease_id=$WL")" 200 "writer refreshes"
lg_eq "$(post "$A" "rw:release?lease_id=$WL")" 204 "writer releases"
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/rw")" \
    404 "free after the writer"

# A keyed reader's retry (its first answer lost) finds its own shared
# lease while a writer waits, with or without wait: the writer waits for
# that very lease.  A keyed reader that holds nothing is still held back.
lg_eq "$(post "$B" "rk:acquire?mode=shared&ttl=60&lease_id=READKEY001")" 200 \
    "a keyed reader"
RL=$(lg_json lease_id <"$out")
RT=$(lg_json fencing_token <"$out")
curl -sS --max-time 30 -o "$LG_TMP/wr" -X POST -H "$A" \
    "$LG_URL/v1/locks/rk:acquire?ttl=60&wait=20" &
wr=$!
sleep 0.5
for q in "" "&wait=8"; do
	lg_eq "$(post "$B" "rk:acquire?mode=shared&ttl=60&lease_id=READKEY001$q")" \
	    200 "a keyed reader's retry ($q) behind a waiting writer"
	lg_eq "$(lg_json lease_id <"$out")" "$RL" "the keyed reader's lease ($q)"
	lg_eq "$(lg_json fencing_token <"$out")" "$RT" "the keyed reader's token ($q)"
done
lg_eq "$(post "$B" "rk:acquire?mode=shared&ttl=60&lease_id=READKEY002")" 409 \
    "another keyed reader behind a waiting writer"
kill -0 $wr 2>/dev/null || lg_fail "the writer was answered early"
lg_eq "$(post "$B" "rk:release?lease_id=$RL")" 204 "the keyed reader leaves"
wait $wr
lg_eq "$(lg_json owner <"$LG_TMP/wr")" alice "the writer after the keyed reader"
WL=$(lg_json lease_id <"$LG_TMP/wr")
lg_eq "$(post "$A" "rk:release?lease_id=$WL")" 204 "the writer releases"
lg_stop
echo "PASS test_core_groups ($LG_STORE)"
