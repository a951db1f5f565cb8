#!/bin/sh
# lockctl gives back what an attempt of unknown outcome may have left when
# it gives up, with a key it made, and never with a key it was given.
#
# 1. A proxy between lockctl and lockgate (acquire_proxy.py late) answers
#    lockctl's first acquire 503 and keeps it back; when the retry (same
#    key) has been answered 409 by lockgate, the proxy releases the
#    holder's lease and only then hands the first acquire on, which
#    lockgate grants (as a write held by a slow storage lands after the
#    client stopped waiting).  lockctl, told 409 with no time left, exits
#    73, and on its way out asks with its key once more (it finds that
#    lease, its own) and releases it: the lock is free.  Before, the lease
#    held the lock until its TTL with nobody knowing of it.
# 2. One run holds a lease with --lease-id KEY; another run with that KEY
#    meets an outage (its 5 acquires 503, acquire_proxy.py outage; later
#    ones reach lockgate) and gives up.  It must not give back what KEY
#    finds: the first run was told it holds that lease (found by review:
#    it was released from under it).
# 3. A 200 without a lease (a server that is not lockgate) is no grant,
#    whatever LOCKGATE_LEASE_ID the caller's environment holds from an
#    earlier acquire: the command does not run, and that lease is not
#    released (found by review).
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/abandon
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
XT="Bearer $(lg_token xavier)"
X="Authorization: $XT"
export LOCKGATE_TOKEN
LOCKGATE_TOKEN=$(lg_token alice)
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID 2>/dev/null

# ---- 1. A late grant of a key lockctl made is given back.
lg_curl -o "$T/x.body" -X POST -H "$X" "$LG_URL/v1/locks/ab/one:acquire?ttl=60"
XL=$(lg_json lease_id <"$T/x.body")
[ -n "$XL" ] || lg_fail "xavier holds ab/one: $(cat "$T/x.body")"
lg_serve "$T/late.log" 's/^port \([0-9]*\)$/\1/p' \
    python3 -u tests/e2e/acquire_proxy.py late "$LG_URL" ab/one "$XT" "$XL"
px=$LG_SERVE_PID
LOCKGATE_URL="http://127.0.0.1:$LG_SERVE_PORT" $LC acquire ab/one --wait 0 \
    >"$T/out" 2>"$T/err"
lg_eq "$?" 73 "lockctl told 409 after a 503 ($(cat "$T/err"))"
grep -q "late first acquire: 200" "$T/late.log" ||
    lg_fail "the kept-back acquire was not granted: $(cat "$T/late.log")"
key=$(sed -n 's/^POST .*:acquire?lease_id=\([^&]*\)&.*/\1/p' "$T/late.log" | head -n 1)
n=$(grep -c "acquire?lease_id=$key&" "$T/late.log")
lg_eq "$n" 3 "acquires with lockctl's key (2, and the give-back's): $(cat "$T/late.log")"
grep -q ":release?lease_id=" "$T/late.log" ||
    lg_fail "lockctl did not release what its key found: $(cat "$T/late.log")"
code=$(lg_curl -o "$T/st.body" -w '%{http_code}' -H "$X" "$LG_URL/v1/locks/ab/one")
lg_eq "$code" 404 "ab/one is free, no lease left behind ($(cat "$T/st.body"))"
kill "$px"
lg_wait_exit "$px" 5 "acquire_proxy late"

# ---- 2. With a key it was given, another run's lease is left alone.
# first_run_holds: the first run's lease L1 of ab/two still refreshes.
first_run_holds() {
	code=$(lg_curl -o "$T/r.body" -w '%{http_code}' -X POST \
	    -H "Authorization: Bearer $LOCKGATE_TOKEN" \
	    "$LG_URL/v1/locks/ab/two:refresh?lease_id=$L1")
	lg_eq "$code" 200 "the first run still holds its lease ($(cat "$T/r.body"))"
}
LOCKGATE_URL=$LG_URL $LC acquire ab/two --ttl 600 --lease-id job-key-0001 \
    >"$T/run1" 2>"$T/err" || lg_fail "the first run: $(cat "$T/err")"
L1=$(sed -n "s/^LOCKGATE_LEASE_ID='\(.*\)'$/\1/p" "$T/run1")
[ -n "$L1" ] || lg_fail "the first run's lease: $(cat "$T/run1")"
lg_serve "$T/outage.log" 's/^port \([0-9]*\)$/\1/p' \
    python3 -u tests/e2e/acquire_proxy.py outage "$LG_URL" 5
px=$LG_SERVE_PID
LOCKGATE_URL="http://127.0.0.1:$LG_SERVE_PORT" $LC acquire ab/two --wait 0 \
    --lease-id job-key-0001 >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -ne 0 ] || lg_fail "the second run passed through an outage"
lg_eq "$(grep -c ':acquire?' "$T/outage.log")" 5 \
    "the second run's acquires, and no give-back: $(cat "$T/outage.log")"
first_run_holds
kill "$px"
lg_wait_exit "$px" 5 "acquire_proxy outage"

# ---- 3. A 200 without a lease, with a lease id in the environment.
lg_serve "$T/empty.log" 's/^port \([0-9]*\)$/\1/p' \
    python3 -u tests/e2e/acquire_proxy.py empty "$LG_URL"
px=$LG_SERVE_PID
LOCKGATE_URL="http://127.0.0.1:$LG_SERVE_PORT" LOCKGATE_LEASE_ID=$L1 \
    LOCKGATE_FENCING_TOKEN=1 $LC run ab/two --wait 0 -- touch "$T/ran" \
    >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -ne 0 ] || lg_fail "a 200 without a lease was taken for a grant"
[ -e "$T/ran" ] && lg_fail "the command ran on a 200 without a lease"
grep -q ":release?" "$T/empty.log" &&
    lg_fail "lockctl released a lease from its environment: $(cat "$T/empty.log")"
first_run_holds
kill "$px"
lg_wait_exit "$px" 5 "acquire_proxy empty"
lg_stop
echo ok
