#!/bin/sh
# test_lifecycle.sh: graceful shutdown, as Cloud Run does it (SIGTERM, then
# SIGKILL 10 s later), and SIGINT likewise.  For each signal:
#  - a lock is held on a file:// store and 200 requests wait for it;
#  - the signal: every waiter is answered 503 with Retry-After within 1 s
#    (tests/e2e/waiters.py measures it from the signal), lockgate exits 0
#    within 8 s, with no sanitizer report, and logs only JSON lines;
#  - a restart on the same store finds the lock still held by the same
#    lease (same fencing token and owner), which its holder then releases.
set -eu
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh

N=${LG_LIFECYCLE_WAITERS:-200}
EXIT_LIMIT_S=8
STORE_DIR=$(mktemp -d)
ALICE=$(lg_token alice)
BOB=$(lg_token bob)

json_field() { # FILE KEY
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

check_json_log() { # FILE
	python3 - "$1" <<'PY' || lg_fail "log of $1 has non-JSON lines"
import json, sys
n = 0
for i, line in enumerate(open(sys.argv[1]), 1):
    if not line.strip():
        continue
    n += 1
    try:
        o = json.loads(line)
    except ValueError:
        print("line %d is not JSON: %r" % (i, line[:120])); sys.exit(1)
    for k in ("severity", "message", "time"):
        if k not in o:
            print("line %d has no %s: %r" % (i, k, line[:120])); sys.exit(1)
if n == 0:
    print("no log lines"); sys.exit(1)
PY
}

one_signal() { # TERM|INT
	sig=$1
	name=e2e/lifecycle/$sig
	lg_start --store "file://$STORE_DIR"
	pid=$LG_PID
	log=$LG_LOG
	port=${LG_URL##*:}
	port=${port%%/*}
	out=$(mktemp)
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST \
	    -H "Authorization: Bearer $ALICE" \
	    "$LG_URL/v1/locks/$name:acquire?ttl=600")
	lg_eq "$code" 200 "alice acquires $name"
	token=$(json_field "$out" fencing_token)
	lease=$(json_field "$out" lease_id)

	python3 tests/e2e/waiters.py --port "$port" --token "$BOB" \
	    --metrics-token "$ALICE" --name "$name" --count "$N" \
	    --pid "$pid" --signal "$sig" --budget 1.0 ||
	    lg_fail "waiters on SIG$sig"

	# lockgate must exit by itself, 0, within EXIT_LIMIT_S.
	lg_wait_exit "$pid" "$EXIT_LIMIT_S" "lockgate after SIG$sig"
	lg_eq "$LG_RC" 0 "exit status after SIG$sig"
	if grep -q 'Sanitizer' "$log"; then
		sed 's/^/    /' "$log" | tail -n 40
		lg_fail "sanitizer report after SIG$sig"
	fi
	check_json_log "$log"

	# Restart on the same store: the lease is untouched.
	lg_start --store "file://$STORE_DIR"
	code=$(lg_curl -o "$out" -w '%{http_code}' \
	    -H "Authorization: Bearer $ALICE" "$LG_URL/v1/locks/$name")
	lg_eq "$code" 200 "$name still held after SIG$sig and a restart"
	lg_eq "$(json_field "$out" fencing_token)" "$token" "fencing token"
	lg_eq "$(json_field "$out" owner)" alice "owner"
	code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
	    -H "Authorization: Bearer $ALICE" \
	    "$LG_URL/v1/locks/$name:release?lease_id=$lease")
	lg_eq "$code" 204 "alice releases $name with her old lease"
	lg_stop "$LG_PID"
	rm -f "$out"
}

one_signal TERM
one_signal INT
rm -rf "$STORE_DIR"
echo ok
