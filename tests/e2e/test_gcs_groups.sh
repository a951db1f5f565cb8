#!/bin/sh
# Three lockgate instances on one fake GCS (one write per second per object
# enforced, faults injected all along: latency, 503, 429, 500, reset and
# apply-then-drop): clients take limit=3 leases on one name and shared or
# exclusive leases on another; the checker (group_loops.py) asserts that
# at no moment more than 3 semaphore leases are held, no shared lease is
# held alongside an exclusive one, and fencing tokens are distinct.
# Always runs on gs:// against the fake; bounded to RUN_S seconds of load.
LG_STORE=gs
LG_FAKE_GCS_ARGS=--rate-limit
. tests/e2e/lib.sh
RUN_S=${LG_GROUPS_SECONDS:-20}
LG_ENV="LOCKGATE_GCS_RETRY_TOTAL_MS=4000"
lg_start
U1=$LG_URL P1=$LG_PID
lg_start
U2=$LG_URL P2=$LG_PID
lg_start
U3=$LG_URL P3=$LG_PID

# Faults all along: one every 300 ms, on a random operation.
END=$(($(date +%s) + RUN_S))
faults() {
	while [ "$(date +%s)" -lt "$END" ]; do
		op=$(shuf -n 1 -e insert get patch delete list)
		kind=$(shuf -n 1 -e 503 429 500 reset drop latency)
		curl -sS --max-time 5 -o /dev/null \
		    "$LG_FAKE_GCS_URL/_fake/fault?op=$op&kind=$kind&count=1&ms=200" || true
		sleep 0.3
	done
}
faults &
fpid=$!
python3 tests/e2e/group_loops.py --urls "$U1,$U2,$U3" \
    --token "$(lg_token worker)" --seconds "$RUN_S" --out "$LG_TMP/grants" ||
	lg_fail "semaphore or shared-lock violation (see above)"
wait "$fpid"
lg_fake clear-faults >/dev/null
lg_stop "$P1"
lg_stop "$P2"
lg_stop "$P3"
echo ok
