# lib_gcs.sh: the gs:// store for the e2e harness (sourced by lib.sh when
# LG_STORE=gs).  Starts build/tools/fake_gcs on loopback and a free port,
# points lockgate at it through STORAGE_EMULATOR_HOST, and offers helpers
# to drive its control endpoint.  LG_FAKE_GCS_ARGS adds fake_gcs options
# (e.g. --rate-limit).  LG_GCS_DIALECT picks how the fake answers: gcs
# (Cloud Storage, the default) or emulator (Google's emulator: see
# tests/tools/fake_gcs.c), whose bucket is made first, as with the real
# one.  Its own variables start with _lgf_ so that they never clobber a
# test's ($code, $out, $i ...).

LG_GCS_DIALECT=${LG_GCS_DIALECT:-gcs}

LG_FAKE_GCS_BIN=${LG_FAKE_GCS_BIN:-build/tools/fake_gcs}
LG_FAKE_GCS_PID=""

# lg_store_setup: start the fake; sets LG_FAKE_GCS_URL, exports
# STORAGE_EMULATOR_HOST and sets LG_STORE_URL (gs://lockgate-e2e/locks/).
lg_store_setup() {
	[ -x "$LG_FAKE_GCS_BIN" ] ||
	    lg_fail "$LG_FAKE_GCS_BIN is missing (make build/tools/fake_gcs)"
	: >"$LG_TMP/fake_gcs.port" # exists before the child opens it
	# shellcheck disable=SC2086
	"$LG_FAKE_GCS_BIN" --port 0 --dialect "$LG_GCS_DIALECT" ${LG_FAKE_GCS_ARGS:-} \
	    >"$LG_TMP/fake_gcs.port" 2>"$LG_TMP/fake_gcs.log" &
	LG_FAKE_GCS_PID=$!
	_lgf_port=$(lg_wait_port "$LG_TMP/fake_gcs.port" "$LG_FAKE_GCS_PID")
	[ -n "$_lgf_port" ] || lg_fail "fake_gcs did not start"
	LG_FAKE_GCS_URL=http://127.0.0.1:$_lgf_port
	STORAGE_EMULATOR_HOST=127.0.0.1:$_lgf_port
	export STORAGE_EMULATOR_HOST
	LG_STORE_URL=${LG_STORE_URL:-gs://lockgate-e2e/locks/}
	[ "$LG_GCS_DIALECT" = emulator ] && lg_fake_bucket "$LG_STORE_URL"
	return 0
}

# lg_fake_bucket gs://BUCKET/...: make BUCKET on the fake, as Google's
# emulator needs before any object call (a 409, made already, is fine).
lg_fake_bucket() {
	_lgf_b=${1#gs://}
	_lgf_b=${_lgf_b%%/*}
	_lgf_code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' \
	    -X POST -d "{\"name\":\"$_lgf_b\"}" \
	    "$LG_FAKE_GCS_URL/storage/v1/b?project=lockgate-e2e") ||
	    lg_fail "fake_gcs: making bucket $_lgf_b"
	case "$_lgf_code" in
	200 | 409) ;;
	*) lg_fail "fake_gcs: making bucket $_lgf_b: HTTP $_lgf_code" ;;
	esac
}

# lg_store_teardown: stop the fake by PID (bounded), then SIGKILL.  Safe
# under set -e (it runs in the EXIT trap).
lg_store_teardown() {
	[ -n "$LG_FAKE_GCS_PID" ] || return 0
	kill -TERM "$LG_FAKE_GCS_PID" 2>/dev/null || true
	_lgf_i=0
	while kill -0 "$LG_FAKE_GCS_PID" 2>/dev/null && [ $_lgf_i -lt 60 ]; do
		sleep 0.05
		_lgf_i=$((_lgf_i + 1))
	done
	kill -KILL "$LG_FAKE_GCS_PID" 2>/dev/null || true
	wait "$LG_FAKE_GCS_PID" 2>/dev/null || true
	LG_FAKE_GCS_PID=""
}

# lg_fake PATH?QUERY: call the fake's control endpoint /_fake/PATH?QUERY
# (fault?op=..&kind=..&count=.., clear-faults, config?.., reset, stats,
# requests) and print its answer; fails the test unless it answers 200.
lg_fake() {
	_lgf_out=$(curl -sS --max-time 5 -w '\n%{http_code}' \
	    "$LG_FAKE_GCS_URL/_fake/$1") || lg_fail "fake_gcs control $1"
	_lgf_code=$(printf '%s\n' "$_lgf_out" | tail -n 1)
	[ "$_lgf_code" = 200 ] || lg_fail "fake_gcs control $1: HTTP $_lgf_code"
	printf '%s\n' "$_lgf_out" | sed '$d'
}

# lg_fake_count NAME: a counter of the fake: an operation (insert get patch
# delete list token metadata) or writes, reads, objects, connections,
# tokens_issued.  (sed, not python: it runs often on a busy machine.)
lg_fake_count() {
	_lgf_v=$(lg_fake stats | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p")
	[ -n "$_lgf_v" ] || lg_fail "fake_gcs has no counter $1"
	echo "$_lgf_v"
}

# lg_jget KEY FILE: the first "KEY":"value" or "KEY":number in FILE.
lg_jget() {
	grep -o "\"$1\":\"\{0,1\}[^\",}]*" "$2" | head -n 1 | sed 's/^[^:]*:"\{0,1\}//'
}
