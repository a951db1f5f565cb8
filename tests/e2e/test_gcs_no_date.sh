#!/bin/sh
# A storage answer without a Date carries no storage time, and expiry is
# judged on the storage's clock only: an expired-looking lease is then
# never taken over (409 held, or 503), because the gateway's own clock
# may run ahead (issue 18 §4).  Once Dates come back, it is.  Always runs
# on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
out=$LG_TMP/out

# not_granted WHAT CODE: a refusal, never a grant.
not_granted() {
	case "$2" in
	409 | 503) ;;
	*) lg_fail "$1: got $2, want 409 or 503 ($(cat "$out"))" ;;
	esac
}

lg_start
U1=$LG_URL
lg_start
U2=$LG_URL
lg_fake "config?date=0" >/dev/null
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$U1/v1/locks/nodate/a:acquire?ttl=2")
lg_eq "$code" 200 "acquire without storage Dates"
sleep 4 # ttl + 1 s margin + 1 s: expired by any clock that counts
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U2/v1/locks/nodate/a:acquire?ttl=10")
not_granted "another instance, no storage time" "$code"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U1/v1/locks/nodate/a:acquire?ttl=10")
not_granted "the same instance, no storage time" "$code"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U2/v1/locks/nodate/a:acquire?ttl=10&wait=2")
not_granted "a waiter, no storage time" "$code"
# The lease really looked expired: with the storage's time back, it is
# taken over.
lg_fake "config?date=1" >/dev/null
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U2/v1/locks/nodate/a:acquire?ttl=10")
lg_eq "$code" 200 "takeover once the storage tells its time"
for p in $LG_PIDS; do lg_stop "$p"; done
echo ok
