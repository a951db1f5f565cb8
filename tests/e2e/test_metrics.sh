#!/bin/sh
# test_metrics.sh: /metrics over HTTP against a live lockgate.
#  - the exposition parses (tests/e2e/metrics_check.py): TYPE before every
#    sample, lockgate_ names, counters in _total, histograms consistent;
#  - every family of the issue is there;
#  - counters move on acquire (granted), on a refused acquire (conflict),
#    on release, and the storage counters and latency histogram move too;
#  - /metrics needs a token unless LOCKGATE_METRICS_PUBLIC is true;
#  - every log line is JSON with severity, message and time, and a request
#    with X-Cloud-Trace-Context logs logging.googleapis.com/trace as
#    projects/PROJECT/traces/TRACE_ID;
#  - every request has one log line with its method, route, lock, owner,
#    status and latency (server/log.c).
set -eu
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh

CHECK="python3 tests/e2e/metrics_check.py"
W=$LG_TMP

# Cloud Logging's trace field needs the project (Cloud Run: set it in the
# service's env, docs/deploy.md).
LG_ENV=GOOGLE_CLOUD_PROJECT=e2e-project
lg_start
LG_ENV=
LOG1=$LG_LOG
ALICE=$(lg_token alice)
BOB=$(lg_token bob)

scrape() { # FILE [curl args]
	f=$1
	shift
	code=$(lg_curl -o "$f" -w '%{http_code}' "$@" "$LG_URL/metrics")
	lg_eq "$code" 200 "GET /metrics"
	$CHECK "$f" >/dev/null || { $CHECK "$f"; lg_fail "bad exposition"; }
}
val() { # FILE SERIES
	$CHECK "$1" "$2"
}

# Authorization: no token -> 401; a reader's token -> 200.
code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/metrics")
lg_eq "$code" 401 "GET /metrics without a token"
scrape "$W/m1" -H "Authorization: Bearer $ALICE"
ctype=$(lg_curl -o /dev/null -w '%{content_type}' \
    -H "Authorization: Bearer $ALICE" "$LG_URL/metrics")
case "$ctype" in
text/plain*version=0.0.4*) ;;
*) lg_fail "Content-Type of /metrics is '$ctype'" ;;
esac

for fam in lockgate_http_requests_total:counter \
    lockgate_http_request_duration_seconds:histogram \
    lockgate_lock_outcomes_total:counter \
    lockgate_wait_duration_seconds:histogram \
    lockgate_waiters:gauge \
    lockgate_grants_total:counter \
    lockgate_waits_total:counter \
    lockgate_storage_requests_total:counter \
    lockgate_storage_request_duration_seconds:histogram \
    lockgate_storage_retries_total:counter \
    lockgate_storage_token_fetches_total:counter \
    lockgate_build_info:gauge; do
	grep -qx "# TYPE ${fam%%:*} ${fam#*:}" "$W/m1" ||
	    lg_fail "no '# TYPE ${fam%%:*} ${fam#*:}'"
done
grep -Eq '^lockgate_build_info\{version="[^"]+"\} 1$' "$W/m1" ||
    lg_fail "lockgate_build_info{version} 1 missing"

# Acquire (granted), a refused acquire (conflict), release (released).
NAME=e2e/metrics/one
code=$(lg_curl -o "$W/lease" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $ALICE" -H 'X-Cloud-Trace-Context: 0123456789abcdef0123456789abcdef/1;o=1' \
    "$LG_URL/v1/locks/$NAME:acquire?ttl=60")
lg_eq "$code" 200 "acquire"
LEASE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lease_id"])' "$W/lease")
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $BOB" "$LG_URL/v1/locks/$NAME:acquire?ttl=60")
lg_eq "$code" 409 "acquire of a held lock"
# A waiter whose wait runs out: 409 after about 1 s, a conflict too.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $BOB" \
    "$LG_URL/v1/locks/$NAME:acquire?ttl=60&wait=1")
lg_eq "$code" 409 "acquire with wait=1 of a held lock"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $ALICE" \
    "$LG_URL/v1/locks/$NAME:release?lease_id=$LEASE")
lg_eq "$code" 204 "release"

scrape "$W/m2" -H "Authorization: Bearer $ALICE"
$CHECK --moved "$W/m1" "$W/m2" \
    'lockgate_lock_outcomes_total{outcome="granted"}' 1 \
    'lockgate_lock_outcomes_total{outcome="conflict"}' 2 \
    'lockgate_lock_outcomes_total{outcome="released"}' 1 \
    'lockgate_wait_duration_seconds_count' 1 \
    'lockgate_wait_duration_seconds_sum' 0.9 \
    'lockgate_http_requests_total{route="acquire",status="200"}' 1 \
    'lockgate_http_requests_total{route="acquire",status="409"}' 2 \
    'lockgate_http_requests_total{route="release",status="204"}' 1 \
    'lockgate_http_requests_total{route="metrics",status="200"}' 1 \
    'lockgate_http_request_duration_seconds_count{route="acquire"}' 3 \
    'lockgate_storage_requests_total{op="insert",status="ok"}' 1 \
    'lockgate_storage_requests_total{op="insert",status="precondition_failed"}' 1 \
    'lockgate_storage_requests_total{op="delete",status="ok"}' 1 \
    'lockgate_storage_request_duration_seconds_count{op="insert"}' 2 ||
    lg_fail "counters did not move as expected"
lg_eq "$(val "$W/m2" lockgate_waiters)" 0 "lockgate_waiters after the waiter left"

# Grants and waits by mode: a semaphore lease, a shared one, and a wait
# for each that runs out.
for q in "limit=2" "mode=shared"; do
	code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST 	    -H "Authorization: Bearer $ALICE" 	    "$LG_URL/v1/locks/e2e/metrics/g${q%%=*}:acquire?ttl=60&$q")
	lg_eq "$code" 200 "acquire with $q"
done
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST     -H "Authorization: Bearer $BOB"     "$LG_URL/v1/locks/e2e/metrics/gmode:acquire?ttl=60&wait=1")
lg_eq "$code" 409 "an exclusive wait behind readers"
scrape "$W/m3" -H "Authorization: Bearer $ALICE"
$CHECK --moved "$W/m2" "$W/m3" \
    'lockgate_grants_total{mode="semaphore"}' 1 \
    'lockgate_grants_total{mode="shared"}' 1 \
    'lockgate_waits_total{mode="exclusive"}' 1 ||
    lg_fail "grants and waits by mode did not move as expected"
# A lock name never becomes a label.
if grep -q 'e2e/metrics' "$W/m2"; then lg_fail "a lock name leaked into /metrics"; fi

lg_stop "$LG_PID"

# LOCKGATE_METRICS_PUBLIC=true: no token needed.
LG_ENV=LOCKGATE_METRICS_PUBLIC=true
lg_start
LG_ENV=
code=$(lg_curl -o "$W/m3" -w '%{http_code}' "$LG_URL/metrics")
lg_eq "$code" 200 "GET /metrics with LOCKGATE_METRICS_PUBLIC=true"
$CHECK "$W/m3" >/dev/null || lg_fail "bad exposition (public)"
LOG2=$LG_LOG
lg_stop "$LG_PID"

# Every log line of both instances: JSON with severity, message, time; the
# traced request carries logging.googleapis.com/trace.
python3 - "$LOG1 $LOG2" <<'PY' || lg_fail "log lines are not all JSON"
import json, sys
traced = False
n = 0
for path in sys.argv[1].split():
    for i, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        n += 1
        try:
            o = json.loads(line)
        except ValueError:
            print("%s:%d: not JSON: %r" % (path, i, line[:120]))
            sys.exit(1)
        for k in ("severity", "message", "time"):
            if k not in o:
                print("%s:%d: no %s: %r" % (path, i, k, line[:120]))
                sys.exit(1)
        t = o.get("logging.googleapis.com/trace", "")
        if t == "projects/e2e-project/traces/0123456789abcdef0123456789abcdef":
            traced = True
        for bad in ("lease_id", "Bearer", "eyJ"):
            if bad in line:
                print("%s:%d: secret-looking %s in a log line" % (path, i, bad))
                sys.exit(1)
if n == 0:
    print("no log lines at all"); sys.exit(1)
if not traced:
    print("no log line carries logging.googleapis.com/trace"); sys.exit(1)
PY

# The request lines of the first instance: one per request, with method,
# route, lock, owner, status and latency_ms (milliseconds: bob's wait=1
# shows about 1000).
python3 - "$LOG1" "$NAME" <<'PY' || lg_fail "request log lines"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
reqs = [o for o in lines if o.get("message") == "request"]
name = sys.argv[2]
def lines_of(method, route, status, owner, n):
    got = [o for o in reqs if o.get("method") == method and
           o.get("route") == route and o.get("status") == status and
           o.get("lock") == name and o.get("owner") == owner]
    if len(got) != n:
        print("want %d request lines %s %s %s %s for %s, got %d:\n%s" % (
            n, method, route, status, owner, name, len(got),
            "\n".join(json.dumps(o) for o in reqs)))
        sys.exit(1)
    for o in got:
        lat = o.get("latency_ms")
        if not isinstance(lat, (int, float)) or isinstance(lat, bool) or \
                not 0 <= lat < 60000:
            print("latency_ms is not a duration in ms: %r" % (o,))
            sys.exit(1)
        if o.get("severity") != "INFO":
            print("severity of a %d: %r" % (status, o))
            sys.exit(1)
    return got
lines_of("POST", "acquire", 200, "alice", 1)
refused = lines_of("POST", "acquire", 409, "bob", 2)
if not any(900 <= o["latency_ms"] < 5000 for o in refused):
    print("the wait=1 acquire's latency_ms is not about 1000: %r" % (refused,))
    sys.exit(1)
lines_of("POST", "release", 204, "alice", 1)
m = [o for o in reqs if o.get("route") == "metrics" and o.get("method") == "GET"]
if not m or any("lock" in o for o in m):
    print("GET /metrics request lines: %r" % (m,))
    sys.exit(1)
PY
echo ok
