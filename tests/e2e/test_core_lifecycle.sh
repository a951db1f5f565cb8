#!/bin/sh
# The whole lease lifecycle over HTTP: acquire, inspect, conflict, refresh,
# release, idempotent re-acquire, and that a lease_id is never shown to
# anyone but its holder (inspect, list, the 409 body, the log).
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
out=$LG_TMP/out

code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/prod/deploy:acquire?ttl=30&holder=ci-42&purpose=deploy&expected_duration=60")
lg_eq "$code" 200 "acquire"
LEASE=$(lg_json lease_id <"$out")
TOKEN1=$(lg_json fencing_token <"$out")
[ -n "$LEASE" ] || lg_fail "no lease_id"
lg_eq "$(lg_json owner <"$out")" alice "owner is the token subject"
lg_eq "$(lg_json holder <"$out")" ci-42 "holder"
lg_eq "$(lg_json refresh_interval <"$out")" 3 "refresh_interval = ttl/8"
lg_eq "$(lg_json state <"$out")" held "state"

# Inspect by someone else: the holder, no lease_id.
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$B" "$LG_URL/v1/locks/prod/deploy")
lg_eq "$code" 200 "inspect"
lg_eq "$(lg_json purpose <"$out")" deploy "inspect purpose"
grep -q "$LEASE" "$out" && lg_fail "lease_id leaked in inspect"
grep -q lease_id "$out" && lg_fail "lease_id key in inspect"

# Conflict: 409 with Retry-After and the holder, no lease_id.
lg_curl -D "$LG_TMP/h" -o "$out" -X POST -H "$B" "$LG_URL/v1/locks/prod/deploy:acquire" >/dev/null
grep -q '^HTTP/1.1 409' "$LG_TMP/h" || lg_fail "second acquire not 409"
grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "409 without Retry-After"
lg_eq "$(lg_json error.code <"$out")" locked "409 code"
lg_eq "$(lg_json error.lock.holder <"$out")" ci-42 "409 shows the holder"
grep -q "$LEASE" "$out" && lg_fail "lease_id leaked in 409"

# List: contains it, no lease_id.
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$B" "$LG_URL/v1/locks?prefix=prod/")
lg_eq "$code" 200 "list"
python3 - "$out" <<'PY' || lg_fail "list content"
import json, sys
d = json.load(open(sys.argv[1]))
names = [l["name"] for l in d["locks"]]
assert names == ["prod/deploy"], names
assert "lease_id" not in d["locks"][0]
assert d["next_page_token"] is None
PY
grep -q "$LEASE" "$out" && lg_fail "lease_id leaked in list"

# Another owner cannot refresh or release it, even with the lease_id.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/prod/deploy:refresh?lease_id=$LEASE")
lg_eq "$code" 403 "refresh by another owner"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/prod/deploy:release?lease_id=$LEASE")
lg_eq "$code" 403 "release by another owner"

# Refresh with a new ttl, by JSON body this time.
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    -H 'Content-Type: application/json' -d "{\"lease_id\":\"$LEASE\",\"ttl\":40}" \
    "$LG_URL/v1/locks/prod/deploy:refresh")
lg_eq "$code" 200 "refresh"
lg_eq "$(lg_json ttl <"$out")" 40 "refresh sets the new ttl"
lg_eq "$(lg_json fencing_token <"$out")" "$TOKEN1" "refresh keeps the fencing token"

# Re-acquire with the same idempotency key returns the same lease.
KEY=job-1234-attempt-1
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/idem:acquire?lease_id=$KEY&ttl=30")
lg_eq "$code" 200 "acquire with a key"
T=$(lg_json fencing_token <"$out")
L=$(lg_json lease_id <"$out")
[ "$L" != "$KEY" ] || lg_fail "the key was made the lease_id"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/idem:acquire?lease_id=$KEY&ttl=30")
lg_eq "$code" 200 "retried acquire with the same key"
lg_eq "$(lg_json fencing_token <"$out")" "$T" "same lease on retry"
lg_eq "$(lg_json lease_id <"$out")" "$L" "same lease id on retry"
# The key is not the lease_id: a refresh or release by it is the caller's
# mistake (400 lease_id_is_key), not a lost lease, and changes nothing.
for op in refresh release; do
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/idem:$op?lease_id=$KEY")
	lg_eq "$code" 400 "$op by the key"
	lg_eq "$(lg_json error.code <"$out")" lease_id_is_key "$op by the key: code"
done
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/idem:refresh?lease_id=$L")
lg_eq "$code" 200 "the lease lives on after the key's refresh and release"
lg_eq "$(lg_json fencing_token <"$out")" "$T" "the same lease"
# ... but the same key from another owner is not theirs.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/idem:acquire?lease_id=$KEY&ttl=30")
lg_eq "$code" 409 "someone else's key"

# One key, two grants (a re-run job with the same key after its first run
# stalled past its TTL and another holder came and went): the first
# grant's lease_id is lost, and its refresh and release leave the second
# grant alone.
RK=rerun-job-key-1
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/rerun:acquire?lease_id=$RK&ttl=2")
lg_eq "$code" 200 "first run takes rerun"
L1=$(lg_json lease_id <"$out")
sleep 4.2 # past its ttl, the 1 s margin and a Date's 1 s resolution
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/rerun:acquire?ttl=30")
lg_eq "$code" 200 "another takes the expired rerun"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/rerun:release?lease_id=$(lg_json lease_id <"$out")")
lg_eq "$code" 204 "and releases it"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/rerun:acquire?lease_id=$RK&ttl=30")
lg_eq "$code" 200 "the re-run takes rerun with the same key"
T3=$(lg_json fencing_token <"$out")
[ "$(lg_json lease_id <"$out")" != "$L1" ] || lg_fail "a second grant reused a lease_id"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/rerun:refresh?lease_id=$L1")
lg_eq "$code" 409 "the first run's refresh"
lg_eq "$(lg_json error.code <"$out")" lease_lost "the first run's refresh code"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/rerun:release?lease_id=$L1")
lg_eq "$code" 409 "the first run's release"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/rerun")
lg_eq "$(lg_json fencing_token <"$out")" "$T3" "the re-run's lease is intact"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$B" \
    "$LG_URL/v1/locks/rerun:acquire")
lg_eq "$code" 409 "nobody else gets rerun meanwhile"

# Release: 204, then the lock is free; a second release is 404.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/prod/deploy:release?lease_id=$LEASE")
lg_eq "$code" 204 "release"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/prod/deploy")
lg_eq "$code" 404 "inspect after release"
lg_eq "$(lg_json error.code <"$out")" not_held "inspect after release code"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/prod/deploy:release?lease_id=$LEASE")
lg_eq "$code" 404 "second release"
lg_eq "$(lg_json error.code <"$out")" lease_not_found "second release code"

# A new lease gets a larger fencing token; the old lease is lost.
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/prod/deploy:acquire")
lg_eq "$code" 200 "acquire after release"
TOKEN2=$(lg_json fencing_token <"$out")
[ "$TOKEN2" -gt "$TOKEN1" ] || lg_fail "fencing token did not increase: $TOKEN1 -> $TOKEN2"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/prod/deploy:refresh?lease_id=$LEASE")
lg_eq "$code" 409 "refresh of a lost lease"
lg_eq "$(lg_json error.code <"$out")" lease_lost "lost lease code"

# forceRelease: refused without admin, done with it.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/prod/deploy:forceRelease")
lg_eq "$code" 403 "forceRelease without admin"
ADM="Authorization: Bearer $(lg_token root admin)"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$ADM" "$LG_URL/v1/locks/prod/deploy:forceRelease")
lg_eq "$code" 204 "forceRelease as admin"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$ADM" "$LG_URL/v1/locks/prod/deploy:forceRelease")
lg_eq "$code" 404 "forceRelease of a free lock"

# format=env in a JSON body, as in the query: KEY='value' lines.
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" -d '{"ttl": 30, "format": "env"}' \
    "$LG_URL/v1/locks/envbody:acquire")
lg_eq "$code" 200 "acquire with format env in the body"
grep -q "^LOCKGATE_LOCK='envbody'$" "$out" || lg_fail "format env in the body: $(head -c 300 "$out")"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" -d '{"format": "json"}' \
    "$LG_URL/v1/locks/envbody:release?lease_id=$(sed -n "s/^LOCKGATE_LEASE_ID='\(.*\)'$/\1/p" "$out")")
lg_eq "$code" 204 "release with format json in the body"

lg_stop
grep -q "$LEASE" "$LG_LOG" && lg_fail "lease_id in the log"
grep -q "$KEY" "$LG_LOG" && lg_fail "client lease key in the log"
grep -q '"event":"forced"' "$LG_LOG" || lg_fail "forceRelease not audited in the log"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    assert "severity" in d and "message" in d and "time" in d, line
' "$LG_LOG" || lg_fail "a log line is not JSON with severity, message, time"
echo ok
