#!/bin/sh
# Every fault fake_gcs can inject, on every storage operation, behind the
# HTTP API: never a 500, every 503 carries Retry-After, no double grant, no
# release lost, and both retry ambiguities resolved (an insert whose answer
# was dropped is still granted once; a delete whose answer was dropped is
# still a release).  Always runs on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
LG_ENV="LOCKGATE_GCS_RETRY_TOTAL_MS=800"
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
out=$LG_TMP/out
hdr=$LG_TMP/hdr

# req WHO METHOD PATH: one API call; sets $code.  Fails on a 500, on a 503
# without Retry-After.
req() {
	code=$(lg_curl -o "$out" -D "$hdr" -w '%{http_code}' -X "$2" -H "$1" \
	    "$LG_URL$3") || lg_fail "curl $2 $3"
	[ "$code" -lt 500 ] || [ "$code" = 503 ] || lg_fail "HTTP $code on $2 $3 ($ctx)"
	if [ "$code" = 503 ]; then
		grep -qi '^Retry-After: [0-9]' "$hdr" ||
		    lg_fail "503 without Retry-After on $2 $3 ($ctx)"
	fi
}

objects() { lg_fake_count objects; }

# A whole lease cycle with one transient fault queued on OP: everything
# succeeds, the lock is granted once and released for good.
n=0
for op in insert get patch delete list; do
	for kind in 503 429 reset drop latency; do
		n=$((n + 1))
		ctx="$kind on $op"
		name=f/t$n
		lg_fake clear-faults >/dev/null
		lg_fake "fault?op=$op&kind=$kind&count=1&ms=300" >/dev/null
		req "$A" POST "/v1/locks/$name:acquire?ttl=30"
		lg_eq "$code" 200 "acquire ($ctx)"
		lease=$(lg_jget lease_id "$out")
		tok=$(lg_jget fencing_token "$out")
		req "$B" POST "/v1/locks/$name:acquire?ttl=30"
		lg_eq "$code" 409 "second owner is refused ($ctx)"
		req "$A" POST "/v1/locks/$name:refresh?lease_id=$lease"
		lg_eq "$code" 200 "refresh ($ctx)"
		lg_eq "$(lg_jget fencing_token "$out")" "$tok" "refresh keeps the token ($ctx)"
		req "$B" GET "/v1/locks/$name"
		lg_eq "$code" 200 "inspect ($ctx)"
		lg_eq "$(lg_jget owner "$out")" alice "inspect owner ($ctx)"
		req "$B" GET "/v1/locks?prefix=f/t$n"
		lg_eq "$code" 200 "list ($ctx)"
		req "$A" POST "/v1/locks/$name:release?lease_id=$lease"
		lg_eq "$code" 204 "release ($ctx)"
		lg_eq "$(objects)" 0 "nothing left in the bucket after release ($ctx)"
		req "$B" GET "/v1/locks/$name"
		lg_eq "$code" 404 "released lock is gone ($ctx)"
	done
done

# Faults that outlive the retries: 503 with Retry-After, never a 500; once
# they stop, the state is what the answers said.  503 on every operation,
# 429 on the writes, resets on the reads.
lg_fake clear-faults >/dev/null
name=f/p
req "$A" POST "/v1/locks/$name:acquire?ttl=60"
lg_eq "$code" 200 "acquire before persistent faults"
lease=$(lg_jget lease_id "$out")
for case in insert:503 insert:429 patch:503 patch:429 get:503 get:reset \
    list:503 list:reset delete:503 delete:429; do
	op=${case%:*}
	kind=${case#*:}
	ctx="persistent $kind on $op"
	lg_fake "fault?op=$op&kind=$kind&count=-1" >/dev/null
	case $op in
	insert)
		req "$A" POST "/v1/locks/f/p-new:acquire?ttl=30"
		lg_eq "$code" 503 "acquire ($ctx)"
		lg_fake clear-faults >/dev/null
		lg_eq "$(objects)" 1 "a refused acquire left nothing ($ctx)"
		;;
	patch)
		req "$A" POST "/v1/locks/$name:refresh?lease_id=$lease"
		lg_eq "$code" 503 "refresh ($ctx)"
		lg_fake clear-faults >/dev/null
		req "$A" POST "/v1/locks/$name:refresh?lease_id=$lease"
		lg_eq "$code" 200 "refresh after $ctx"
		;;
	get)
		req "$B" GET "/v1/locks/$name"
		[ "$code" = 503 ] || [ "$code" = 200 ] || lg_fail "inspect ($ctx): $code"
		req "$B" POST "/v1/locks/$name:acquire?ttl=30"
		[ "$code" = 503 ] || [ "$code" = 409 ] || lg_fail "contended acquire ($ctx): $code"
		lg_fake clear-faults >/dev/null
		;;
	list)
		req "$B" GET "/v1/locks?prefix=f/"
		lg_eq "$code" 503 "list ($ctx)"
		code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/readyz")
		lg_eq "$code" 503 "readyz ($ctx)"
		lg_fake clear-faults >/dev/null
		code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/readyz")
		lg_eq "$code" 200 "readyz after $ctx"
		;;
	delete)
		# A refused release is not a lost one: the lease still
		# holds and can be released once storage answers.
		req "$A" POST "/v1/locks/$name:release?lease_id=$lease"
		lg_eq "$code" 503 "release ($ctx)"
		lg_fake clear-faults >/dev/null
		req "$B" POST "/v1/locks/$name:acquire?ttl=30"
		lg_eq "$code" 409 "still held after a refused release ($ctx)"
		;;
	esac
done
req "$A" POST "/v1/locks/$name:release?lease_id=$lease"
lg_eq "$code" 204 "release after the persistent faults"
lg_eq "$(objects)" 0 "released for good"

# A dropped answer to a contended takeover delete: the expired lease is
# replaced once, never twice.
lg_fake clear-faults >/dev/null
req "$A" POST "/v1/locks/f/exp:acquire?ttl=2"
lg_eq "$code" 200 "short lease"
sleep 4.2
lg_fake "fault?op=delete&kind=drop&count=1" >/dev/null
lg_fake "fault?op=insert&kind=drop&count=1" >/dev/null
req "$B" POST "/v1/locks/f/exp:acquire?ttl=30"
lg_eq "$code" 200 "takeover of an expired lease through dropped answers"
lg_eq "$(lg_jget owner "$out")" bob "bob holds it"
req "$A" POST "/v1/locks/f/exp:acquire?ttl=30"
lg_eq "$code" 409 "alice is refused after bob's takeover"
lg_eq "$(objects)" 1 "one object"

# A waiter waits out storage trouble: with every insert failing (503,
# past the 800 ms of retries) an acquire with wait=N is held, not refused,
# and is granted once the storage answers again; if it never does, the
# wait ends with a 503 that says why, after the wait and not before.
lg_fake clear-faults >/dev/null
lg_fake "fault?op=insert&kind=503&count=-1" >/dev/null
(
	lg_curl -o "$LG_TMP/w1.out" -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/f/outage:acquire?ttl=30&wait=10" >"$LG_TMP/w1.code"
) &
wpid=$!
sleep 2
lg_fake clear-faults >/dev/null
wait "$wpid"
lg_eq "$(cat "$LG_TMP/w1.code")" 200 "waiter granted after the outage"
lg_eq "$(lg_jget owner "$LG_TMP/w1.out")" alice "the waiter holds it"
lg_fake "fault?op=insert&kind=503&count=-1" >/dev/null
t0=$(date +%s)
req "$B" POST "/v1/locks/f/outage2:acquire?ttl=30&wait=2"
t1=$(date +%s)
lg_fake clear-faults >/dev/null
lg_eq "$code" 503 "a wait through an outage that lasts ends in 503"
[ $((t1 - t0)) -ge 2 ] || lg_fail "the 503 came before the wait ran out"
lg_eq "$(lg_jget code "$out")" storage_unavailable "it says the storage is unavailable"

# One request, one lease_id, on every attempt.  A waiting acquire whose
# insert is applied but whose answer is lost, and whose retries then fail
# (503s past the 800 ms of retries), leaves a lease nobody was told of; its
# next poll must know that lease for its own and be granted, not wait
# behind it until the TTL and answer 409 "held by alice" to alice.
lg_fake clear-faults >/dev/null
before=$(objects)
lg_fake "fault?op=insert&kind=drop&count=1" >/dev/null
lg_fake "fault?op=insert&kind=503&count=-1" >/dev/null
(
	lg_curl -o "$LG_TMP/w2.out" -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/f/orphan:acquire?ttl=20&wait=8" >"$LG_TMP/w2.code"
) &
wpid=$!
sleep 2
lg_fake clear-faults >/dev/null
wait "$wpid"
lg_eq "$(cat "$LG_TMP/w2.code")" 200 "a waiter knows the lease its lost answer left: $(cat "$LG_TMP/w2.out")"
lg_eq "$(objects)" $((before + 1)) "one lease, granted once"
lease=$(lg_jget lease_id "$LG_TMP/w2.out")
req "$A" POST "/v1/locks/f/orphan:release?lease_id=$lease"
lg_eq "$code" 204 "the lease_id granted is the one stored"
lg_eq "$(objects)" "$before" "released"

# A group lease's lease_id stays its holder's (design §2).  A semaphore's
# second lease is the object "NAME#LEASE_ID"; a 503 whose storage message
# names that object says "f/sem#…", to the holder's own refresh and to an
# admin's forceRelease alike, and neither answer nor the log line carries
# the lease_id.
lg_fake clear-faults >/dev/null
ADM="Authorization: Bearer $(lg_token root admin)"
req "$B" POST "/v1/locks/f/sem:acquire?ttl=30&limit=2"
lg_eq "$code" 200 "a semaphore's first lease"
blease=$(lg_jget lease_id "$out")
req "$A" POST "/v1/locks/f/sem:acquire?ttl=30&limit=2"
lg_eq "$code" 200 "a semaphore's second lease"
lease=$(lg_jget lease_id "$out")
tok=$(lg_jget fencing_token "$out")
lg_fake "fault?op=patch&kind=503&count=-1" >/dev/null
lg_fake "fault?op=delete&kind=503&count=-1" >/dev/null
ctx="a semaphore through 503s"
req "$A" POST "/v1/locks/f/sem:refresh?lease_id=$lease"
lg_eq "$code" 503 "refresh ($ctx)"
grep -q "$lease" "$out" && lg_fail "the lease_id in a 503: $(cat "$out")"
grep -q 'f/sem#…' "$out" || lg_fail "the 503 names no object: $(cat "$out")"
req "$ADM" POST "/v1/locks/f/sem:forceRelease?fencing_token=$tok"
lg_eq "$code" 503 "forceRelease ($ctx)"
grep -q "$lease" "$out" && lg_fail "alice's lease_id in an admin's 503: $(cat "$out")"
lg_fake clear-faults >/dev/null
grep -q "$lease" "$LG_LOG" && lg_fail "a lease_id in the log"
req "$A" POST "/v1/locks/f/sem:release?lease_id=$lease"
lg_eq "$code" 204 "release ($ctx, after)"
req "$B" POST "/v1/locks/f/sem:release?lease_id=$blease"
lg_eq "$code" 204 "release of the first lease ($ctx, after)"

grep -q '"status":500' "$LG_LOG" && lg_fail "a 500 in the log"
lg_stop
echo ok
