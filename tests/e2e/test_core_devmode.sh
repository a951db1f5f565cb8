#!/bin/sh
# With no key configured lockgate starts a development mode that is still
# closed: a random secret, a printed admin token and curl line, loopback
# only.  Without that token nothing is served; off loopback it refuses.
. tests/e2e/lib.sh
log=$LG_TMP/dev.log
env -u LOCKGATE_JWT_SECRET "$LG_BIN" --listen 127.0.0.1:0 --store mem:// >"$log" 2>&1 &
pid=$!
LG_PIDS="$LG_PIDS $pid"
i=0
while [ $i -lt 200 ] && ! grep -q '"message":"listening"' "$log"; do
	sleep 0.05
	i=$((i + 1))
done
port=$(sed -n 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' "$log")
[ -n "$port" ] || { cat "$log"; lg_fail "dev mode did not start"; }
grep -q '"dev_mode":true' "$log" || lg_fail "not logged as dev mode"
tok=$(sed -n 's/.*export LOCKGATE_TOKEN=\([^ ]*\).*/\1/p' "$log")
[ -n "$tok" ] || lg_fail "no token printed"
grep -q 'curl -sS -X POST' "$log" || lg_fail "no curl line printed"
U=http://127.0.0.1:$port
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST "$U/v1/locks/demo:acquire")
lg_eq "$code" 401 "dev mode is closed without the token"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
    "$U/v1/locks/demo:acquire?ttl=60")
lg_eq "$code" 200 "the printed token works"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $(lg_token x admin)" \
    "$U/v1/locks/demo:forceRelease")
lg_eq "$code" 401 "a token signed with another secret"
lg_stop "$pid"

# Off loopback, no key: refuse to start.
set +e
env -u LOCKGATE_JWT_SECRET timeout 10 "$LG_BIN" --listen 0.0.0.0:0 --store mem:// >"$LG_TMP/out" 2>&1
rc=$?
set -e
lg_eq "$rc" 2 "no key off loopback is refused"
grep -q 'LOCKGATE_JWT_SECRET' "$LG_TMP/out" || lg_fail "the refusal does not say what to set"
echo ok
