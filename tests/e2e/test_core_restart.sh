#!/bin/sh
# The durable stores, file:// and gs:// (LG_STORE; tests/run.sh runs the
# core suites on both): kill -9 and restart keeps held locks (same fencing
# token, same lease_id still refreshes and releases), and fencing tokens
# keep growing across release and restart.  On gs:// the fake GCS keeps
# running while lockgate is killed and restarted, as the bucket would.
# mem:// keeps nothing across a restart: that combination is skipped.
. tests/e2e/lib.sh
[ "$LG_STORE" = mem ] &&
    lg_skip "mem:// keeps no lock across a restart (runs on file and gs)"
lg_start
A="Authorization: Bearer $(lg_token alice)"
out=$LG_TMP/out
lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/db/migrate:acquire?ttl=120&holder=h1&purpose=p1" >/dev/null
LEASE=$(lg_json lease_id <"$out")
T1=$(lg_json fencing_token <"$out")
lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/tmp:acquire?ttl=120" >/dev/null
TL=$(lg_json lease_id <"$out")
TT1=$(lg_json fencing_token <"$out")
lg_curl -o /dev/null -X POST -H "$A" "$LG_URL/v1/locks/tmp:release?lease_id=$TL"
lg_kill9

lg_start
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/db/migrate")
lg_eq "$code" 200 "held lock survives kill -9"
lg_eq "$(lg_json fencing_token <"$out")" "$T1" "same fencing token"
lg_eq "$(lg_json holder <"$out")" h1 "same holder"
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/tmp")
lg_eq "$code" 404 "released lock stays released"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/db/migrate:refresh?lease_id=$LEASE")
lg_eq "$code" 200 "the lease refreshes after a restart"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/tmp:acquire")
lg_eq "$code" 200 "re-acquire after restart"
TT2=$(lg_json fencing_token <"$out")
[ "$TT2" -gt "$TT1" ] || lg_fail "fencing token did not grow across release and restart: $TT1 -> $TT2"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/db/migrate:release?lease_id=$LEASE")
lg_eq "$code" 204 "release after restart"
lg_stop
echo ok
