#!/bin/sh
# lockctl gives back what an attempt of unknown outcome may have left when
# it gives up.  A proxy between lockctl and lockgate (late_grant_proxy.py)
# answers lockctl's first acquire 503 and keeps it back; when the second (the retry, same
# key) has been answered 409 by lockgate, the proxy releases the holder's
# lease and only then hands the first acquire on, which lockgate grants
# (as a write held by a slow storage lands after the client stopped
# waiting).  lockctl, told 409 with no time left, exits 73, and on its
# way out asks with its key once more (it finds that lease, its own) and
# releases it: the lock is free.  Before, the lease held the lock until
# its TTL with nobody knowing of it.
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/abandon
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
XT="Bearer $(lg_token xavier)"
X="Authorization: $XT"
lg_curl -o "$T/x.body" -X POST -H "$X" "$LG_URL/v1/locks/ab/one:acquire?ttl=60"
XL=$(lg_json lease_id <"$T/x.body")
[ -n "$XL" ] || lg_fail "xavier holds ab/one: $(cat "$T/x.body")"

lg_serve "$T/proxy.log" 's/^port \([0-9]*\)$/\1/p' \
    python3 -u tests/e2e/late_grant_proxy.py "$LG_URL" ab/one "$XT" "$XL"
px=$LG_SERVE_PID
port=$LG_SERVE_PORT

LOCKGATE_URL="http://127.0.0.1:$port" LOCKGATE_TOKEN=$(lg_token alice) \
    $LC acquire ab/one --wait 0 --lease-id abandon-key-1 \
    >"$T/out" 2>"$T/err"
rc=$?
lg_eq "$rc" 73 "lockctl told 409 after a 503 ($(cat "$T/err"))"
grep -q "late first acquire: 200" "$T/proxy.log" ||
    lg_fail "the kept-back acquire was not granted: $(cat "$T/proxy.log")"
n=$(grep -c "acquire?lease_id=abandon-key-1" "$T/proxy.log")
lg_eq "$n" 3 "acquires with lockctl's key (2 and the give-back's): $(cat "$T/proxy.log")"
grep -q ":release?lease_id=" "$T/proxy.log" ||
    lg_fail "lockctl did not release what its key found: $(cat "$T/proxy.log")"
code=$(lg_curl -o "$T/st.body" -w '%{http_code}' -H "$X" "$LG_URL/v1/locks/ab/one")
lg_eq "$code" 404 "ab/one is free, no lease left behind ($(cat "$T/st.body"))"
kill "$px"
lg_wait_exit "$px" 5 "the proxy"
lg_stop
echo ok
