#!/bin/sh
# SIGTERM while a storage call is in flight: the call finishes and its
# caller gets the lease, the lease is in the store afterwards (held leases
# are untouched), and the process exits 0.  Storage latency is injected in
# the fake GCS so the call is still running when the signal arrives.
LG_STORE=gs
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
out=$LG_TMP/out
lg_fake clear-faults >/dev/null
lg_fake "fault?op=insert&kind=latency&count=1&ms=1500" >/dev/null
curl -sS --max-time 20 -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/drain/x:acquire?ttl=60" >"$LG_TMP/code" &
cpid=$!
# A keep-alive connection opened before the signal asks /readyz during the
# drain: 503 (a load balancer stops sending work), /healthz still 200.
port=${LG_URL##*:}
python3 - "$port" "$LG_PID" >"$LG_TMP/probe" 2>&1 <<'PY' &
import http.client, os, signal, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
c.request("GET", "/healthz"); r = c.getresponse(); r.read()
assert r.status == 200, r.status
time.sleep(0.4)
os.kill(int(sys.argv[2]), signal.SIGTERM)
time.sleep(0.2)
c.request("GET", "/readyz"); r = c.getresponse(); body = r.read()
print("readyz", r.status, r.getheader("Retry-After"), body.decode())
PY
ppid=$!
sleep 0.2
kill -0 $cpid 2>/dev/null || lg_fail "the acquire finished before the signal"
t0=$(date +%s%N)
wait $ppid || { cat "$LG_TMP/probe"; lg_fail "probe failed"; }
grep -q '^readyz 503 [0-9]' "$LG_TMP/probe" || { cat "$LG_TMP/probe"; lg_fail "/readyz is not 503 with Retry-After while draining"; }
# lg_stop sends SIGTERM again (harmless) and checks the exit.
lg_stop
t1=$(date +%s%N)
wait $cpid
lg_eq "$(cat "$LG_TMP/code")" 200 "the in-flight acquire was answered"
[ -n "$(lg_json lease_id <"$out")" ] || lg_fail "no lease in the answer"
echo "exited $(( (t1 - t0) / 1000000 )) ms after SIGTERM, the in-flight call finished first"
# The lease is still held: a new instance on the same bucket sees it.
lg_start
B="Authorization: Bearer $(lg_token bob)"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$B" "$LG_URL/v1/locks/drain/x")
lg_eq "$code" 200 "the lease outlives the instance that granted it"
lg_eq "$(lg_json owner <"$out")" alice "same owner"
lg_stop

# SIGTERM while the storage is down and calls are retrying (default retry
# budget, 10 s, longer than the drain): the calls give up in time, their
# callers get 503 + Retry-After, and the process still exits 0 within 8 s.
lg_start
lg_fake clear-faults >/dev/null
lg_fake "fault?op=insert&kind=503&count=-1" >/dev/null
cpids=""
for i in 1 2 3; do
	curl -sS --max-time 20 -D "$LG_TMP/h$i" -o "$LG_TMP/b$i" \
	    -w '%{http_code}' -X POST -H "$A" \
	    "$LG_URL/v1/locks/drain/down$i:acquire?ttl=60" >"$LG_TMP/c$i" &
	cpids="$cpids $!"
done
sleep 0.5
t0=$(date +%s%N)
lg_stop
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
[ "$ms" -lt 8000 ] || lg_fail "exited ${ms} ms after SIGTERM (bound 8000) while the storage was down"
for pid in $cpids; do wait "$pid"; done
for i in 1 2 3; do
	lg_eq "$(cat "$LG_TMP/c$i")" 503 "acquire $i answered while the storage was down"
	grep -qi '^Retry-After: [0-9]' "$LG_TMP/h$i" || lg_fail "503 without Retry-After"
	[ -n "$(lg_json error.code <"$LG_TMP/b$i")" ] || lg_fail "503 without a JSON error"
done
lg_fake clear-faults >/dev/null
echo "exited ${ms} ms after SIGTERM with the storage down"
echo ok
