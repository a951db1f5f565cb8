# lib.sh: the end-to-end harness.  Source it from the repository root.
# Starts lockgate on loopback (port 0: the kernel picks a free one), mints
# tokens with openssl, stops what it started by PID, and fails a test on any
# sanitizer report in a server's log.  See each function's comment.

set -u
LG_BIN=${LG_BIN:-build/asan/lockgate}
LG_SECRET=${LG_SECRET:-e2e-secret-0123456789abcdef0123456789abcdef}
LG_STORE=${LG_STORE:-mem}
LG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockgate-e2e.XXXXXX")
LG_PIDS=""
LG_N=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=87}

lg_fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# LG_SKIP: the exit status of a test that cannot run in this combination
# (automake's 77); tests/run.sh counts and reports it as a skip, never as
# a pass.
LG_SKIP=77

# lg_skip WHY: skip this test, saying why (the runner shows this line).
lg_skip() {
	echo "SKIP: $*"
	exit "$LG_SKIP"
}

# lg_eq GOT WANT WHAT
lg_eq() {
	[ "$1" = "$2" ] || lg_fail "$3: got '$1', want '$2'"
}

# lg_wait_port FILE PID: the port a helper PID prints as the first line
# of FILE, waited for at most 5 s (printed; empty when it never came or
# the helper died).
lg_wait_port() {
	_lgw_i=0
	_lgw_port=""
	while [ $_lgw_i -lt 100 ]; do
		_lgw_port=$(head -n 1 "$1")
		[ -n "$_lgw_port" ] && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
		_lgw_i=$((_lgw_i + 1))
	done
	echo "$_lgw_port"
}

# lg_wait_line FILE PATTERN [SECONDS]: whether FILE has a line matching
# PATTERN (grep) within SECONDS (default 10), looking every 0.05 s.
lg_wait_line() {
	_lgw_i=0
	_lgw_n=$((${3:-10} * 20))
	until grep -q "$2" "$1" 2>/dev/null || [ $_lgw_i -ge $_lgw_n ]; do
		sleep 0.05
		_lgw_i=$((_lgw_i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}

# lg_free_port: a loopback port the kernel had free a moment ago (for a
# helper that cannot take port 0 and say which it got).
lg_free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

lg_cleanup() {
	for p in $LG_PIDS; do
		kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	if command -v lg_store_teardown >/dev/null 2>&1; then
		lg_store_teardown
	fi
	rm -rf "$LG_TMP"
}
trap lg_cleanup EXIT
trap 'exit 1' INT TERM

case "$LG_STORE" in
mem) LG_STORE_URL=${LG_STORE_URL:-mem://} ;;
file) LG_STORE_URL=${LG_STORE_URL:-file://$LG_TMP/data} ;;
gs)
	. tests/e2e/lib_gcs.sh
	lg_store_setup
	;;
*) lg_fail "unknown LG_STORE '$LG_STORE' (mem, file or gs)" ;;
esac

# lg_start [lockgate args...]: start an instance; sets LG_URL, LG_PID, LG_LOG.
# LG_ENV may hold extra VAR=value words for its environment.
lg_start() {
	LG_N=$((LG_N + 1))
	LG_LOG=$LG_TMP/lockgate.$LG_N.log
	: >"$LG_LOG"
	# shellcheck disable=SC2086
	env LOCKGATE_JWT_SECRET="$LG_SECRET" ${LG_ENV:-} "$LG_BIN" \
	    --listen 127.0.0.1:0 --store "$LG_STORE_URL" "$@" \
	    >"$LG_LOG" 2>&1 &
	LG_PID=$!
	LG_PIDS="$LG_PIDS $LG_PID"
	i=0
	port=""
	while [ $i -lt 200 ]; do
		port=$(sed -n 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' \
		    "$LG_LOG" | head -n 1)
		[ -n "$port" ] && break
		kill -0 "$LG_PID" 2>/dev/null || break
		sleep 0.05
		i=$((i + 1))
	done
	[ -n "$port" ] || { cat "$LG_LOG" >&2; lg_fail "lockgate did not start"; }
	LG_URL=http://127.0.0.1:$port
	code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$LG_URL/healthz")
	lg_eq "$code" 200 "healthz after start"
}

# lg_sanitizer_clean LOG: fail when LOG holds a sanitizer report.
lg_sanitizer_clean() {
	if grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$1" >/dev/null; then
		grep -E -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$1" | head -60 >&2
		lg_fail "sanitizer report in $1"
	fi
}

# lg_serve LOG SED CMD...: start CMD, a helper server of the test, in the
# background (its output in LOG; on LG_PIDS, so the EXIT trap stops it),
# and wait at most 10 s until the sed script SED prints its port from LOG.
# Sets LG_SERVE_PID and LG_SERVE_PORT; the test fails if it does not
# start.
lg_serve() {
	_lgs_log=$1
	_lgs_sed=$2
	shift 2
	"$@" >"$_lgs_log" 2>&1 &
	LG_SERVE_PID=$!
	LG_PIDS="$LG_PIDS $LG_SERVE_PID"
	LG_SERVE_PORT=
	_lgs_i=0
	while [ -z "$LG_SERVE_PORT" ] && [ $_lgs_i -lt 100 ] &&
	    kill -0 "$LG_SERVE_PID" 2>/dev/null; do
		sleep 0.1
		LG_SERVE_PORT=$(sed -n "$_lgs_sed" "$_lgs_log")
		_lgs_i=$((_lgs_i + 1))
	done
	[ -n "$LG_SERVE_PORT" ] || lg_fail "$* did not start: $(cat "$_lgs_log")"
}

# lg_wait_exit PID SECONDS WHAT: wait at most SECONDS for PID (a child)
# to exit, looking every 0.05 s; reap it, drop it from LG_PIDS (whose
# EXIT trap signals every PID on it: a reused PID must not be hit) and
# set LG_RC to its exit status.  Still running then: SIGKILL, and the
# test fails with "WHAT: still running after SECONDS s".
lg_wait_exit() {
	_lgx_i=0
	while kill -0 "$1" 2>/dev/null && [ $_lgx_i -lt $(($2 * 20)) ]; do
		sleep 0.05
		_lgx_i=$((_lgx_i + 1))
	done
	_lgx_alive=0
	kill -0 "$1" 2>/dev/null && _lgx_alive=1 && kill -KILL "$1"
	LG_RC=0
	wait "$1" || LG_RC=$?
	LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $1\b//")
	[ $_lgx_alive = 0 ] || lg_fail "$3: still running after $2 s"
}

# lg_stop [PID [SIGNAL]]: stop an instance (default: the latest) and check
# that it exits 0 within 10 s with a clean sanitizer log.
lg_stop() {
	pid=${1:-$LG_PID}
	sig=${2:-TERM}
	kill -"$sig" "$pid" 2>/dev/null || lg_fail "instance $pid is not running"
	lg_wait_exit "$pid" 10 "instance $pid, 10 s after SIG$sig"
	for f in "$LG_TMP"/*.log; do [ -f "$f" ] && lg_sanitizer_clean "$f"; done
	[ "$LG_RC" -eq 0 ] || lg_fail "instance $pid exited $LG_RC"
}

# lg_kill9 [PID]: crash an instance (no cleanup, no leak check).
lg_kill9() {
	pid=${1:-$LG_PID}
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $pid\b//")
}

lg_b64url() {
	openssl base64 -A | tr '+/' '-_' | tr -d '='
}

# lg_jwt PAYLOAD_JSON [SECRET]: an HS256 JWT of that payload.
lg_jwt() {
	h=$(printf '{"alg":"HS256","typ":"JWT"}' | lg_b64url)
	p=$(printf '%s' "$1" | lg_b64url)
	s=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -hmac "${2:-$LG_SECRET}" -binary | lg_b64url)
	printf '%s.%s.%s' "$h" "$p" "$s"
}

# lg_token SUB [admin]: a token for SUB valid one hour.
lg_token() {
	now=$(date +%s)
	adm=""
	[ "${2:-}" = admin ] && adm=',"admin":true'
	lg_jwt "{\"sub\":\"$1\",\"iat\":$now,\"exp\":$((now + 3600))$adm}"
}

# lg_curl ARGS...: curl with timeouts; never a token on a failure line.
lg_curl() {
	curl -sS --max-time 30 "$@"
}

# lg_json FIELD < JSON: one top-level field of a JSON document ("" when
# absent).  FIELD may be a dotted path: error.code
lg_json() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    d = d.get(k) if isinstance(d, dict) else None
print("" if d is None else (json.dumps(d) if isinstance(d, (dict, list)) else str(d).lower() if isinstance(d, bool) else d))
' "$1"
}

# lg_str FIELD < JSON: a top-level string field by sed (fast; for loops).
lg_str() {
	sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"
}
