#!/bin/sh
# Storage call counts, from fake_gcs's stats: an uncontended acquire,
# refresh and release each cost exactly one storage write (and no read);
# the waiters of one lock cost at most one read per poll interval per
# instance, however many they are; the token endpoint is called once per
# token lifetime, not per request.  Always runs on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
WAITERS=10
lg_start
AUTH="Authorization: Bearer $(lg_token counter)"
out=$LG_TMP/out

# counts: "WRITES READS" so far.  call PATH: POST it; sets $code.
counts() { echo "$(lg_fake_count writes) $(lg_fake_count reads)"; }
call() {
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$AUTH" "$LG_URL$1")
}

b=$(counts)
call "/v1/locks/c/one:acquire?ttl=30"
lg_eq "$code" 200 "acquire"
lease=$(lg_jget lease_id "$out")
set -- $b $(counts)
lg_eq $(($3 - $1)) 1 "storage writes of an uncontended acquire"
lg_eq $(($4 - $2)) 0 "storage reads of an uncontended acquire"
sleep 1.05 # GCS allows one write per second per object
b=$(counts)
call "/v1/locks/c/one:refresh?lease_id=$lease"
lg_eq "$code" 200 "refresh"
set -- $b $(counts)
lg_eq $(($3 - $1)) 1 "storage writes of a refresh"
lg_eq $(($4 - $2)) 0 "storage reads of a refresh"
sleep 1.05
b=$(counts)
call "/v1/locks/c/one:release?lease_id=$lease"
lg_eq "$code" 204 "release"
set -- $b $(counts)
lg_eq $(($3 - $1)) 1 "storage writes of a release"
lg_eq $(($4 - $2)) 0 "storage reads of a release"

# A semaphore and a shared lock: an acquire, a refresh and a release each
# cost one write, the first use of the name included (the head its one
# insert creates carries that lease), and a refresh and a release no read.
# group_step PATH CODE WHAT: call PATH, expect CODE, one write (and no
# read unless an acquire).
group_step() {
	b=$(counts)
	call "$1"
	lg_eq "$code" "$2" "$3"
	set -- $b $(counts) "$3" "$1"
	lg_eq $(($3 - $1)) 1 "storage writes of a $5"
	case $6 in
	*:acquire*) ;;
	*) lg_eq $(($4 - $2)) 0 "storage reads of a $5" ;;
	esac
}
for kind in "limit=3" "mode=shared"; do
	g=grp${kind%%=*}
	group_step "/v1/locks/c/$g:acquire?ttl=30&$kind" 200 \
	    "first group acquire ($kind)"
	first=$(lg_jget lease_id "$out")
	group_step "/v1/locks/c/$g:acquire?ttl=30&$kind" 200 \
	    "group acquire ($kind)"
	lease=$(lg_jget lease_id "$out")
	sleep 1.05
	group_step "/v1/locks/c/$g:refresh?lease_id=$first" 200 \
	    "first lease's refresh ($kind)"
	sleep 1.05
	group_step "/v1/locks/c/$g:refresh?lease_id=$lease" 200 \
	    "group refresh ($kind)"
	sleep 1.05
	group_step "/v1/locks/c/$g:release?lease_id=$lease" 204 \
	    "group release ($kind)"
	sleep 1.05
	group_step "/v1/locks/c/$g:release?lease_id=$first" 204 \
	    "first lease's release ($kind)"
done

# Waiters share one poll per lock per instance.
call "/v1/locks/c/held:acquire?ttl=60"
lg_eq "$code" 200 "holder"
i=0
wpids=""
while [ $i -lt $WAITERS ]; do
	curl -sS --max-time 20 -o /dev/null -X POST -H "$AUTH" \
	    "$LG_URL/v1/locks/c/held:acquire?ttl=30&wait=8" &
	wpids="$wpids $!"
	i=$((i + 1))
done
sleep 2 # all queued; the shared poll is at its 1 s cap
g0=$(lg_fake_count get)
t0=$(date +%s%N)
sleep 4
g1=$(lg_fake_count get)
t1=$(date +%s%N)
window_ms=$(((t1 - t0) / 1000000))
polls=$((g1 - g0))
# Poll intervals are jittered in [cap/2, cap] (cap 1 s): at most one read
# per 500 ms, plus one for the edges of the window.
max=$((window_ms / 500 + 1))
echo "    $WAITERS waiters: $polls reads in $window_ms ms (bound $max)" >&2
[ "$polls" -le "$max" ] || lg_fail "$WAITERS waiters made $polls reads in $window_ms ms"
[ "$polls" -ge 1 ] || lg_fail "waiters never polled"
for p in $wpids; do wait "$p"; done
lg_stop

# Token endpoint: once per token lifetime.  A second instance, this time
# with credentials from the (fake) metadata server and a token the fake
# makes last 3 s, refreshed by the client ahead of expiry (at 4/5).
lg_fake "config?require_auth=1&token_expires=3" >/dev/null
mdhost=${STORAGE_EMULATOR_HOST}
unset STORAGE_EMULATOR_HOST
LG_ENV="GCE_METADATA_HOST=$mdhost LOCKGATE_GCS_ENDPOINT=http://$mdhost"
lg_start
m0=$(lg_fake_count metadata)
i=0
while [ $i -lt 20 ]; do
	code=$(lg_curl -o /dev/null -w '%{http_code}' -H "$AUTH" "$LG_URL/v1/locks/c/x")
	lg_eq "$code" 404 "inspect with a metadata-server token"
	i=$((i + 1))
done
m1=$(lg_fake_count metadata)
[ $((m1 - m0)) -le 1 ] || lg_fail "20 requests fetched $((m1 - m0)) tokens"
sleep 3
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "$AUTH" "$LG_URL/v1/locks/c/x")
lg_eq "$code" 404 "inspect after the token's lifetime"
m2=$(lg_fake_count metadata)
lg_eq $((m2 - m1)) 1 "one new token after the lifetime"
grep -q 'ya29\.fake' "$LG_LOG" && lg_fail "an access token in the log"
lg_stop
echo ok
