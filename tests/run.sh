#!/bin/sh
# run.sh [unit|unit-asan|fuzz|e2e|e2e-file|e2e-gs|e2e-gs-emulator|browser|all]: run the suites and print one closing line
# "N passed, N failed, N skipped".  Exit non-zero if anything failed.  A
# test that exits 77 (lg_skip in tests/e2e/lib.sh) cannot run in that
# combination: it is listed with its reason and counted apart, never as a
# pass.
#
# Tests run TEST_JOBS at a time (default: the number of CPUs), each with
# its own log in build/logs and, for the end-to-end ones, its own servers
# on ports the kernel picks and its own temporary directory, so they do
# not meet.  TEST_JOBS=1 runs them one after another.
set -u
cd "$(dirname "$0")/.."
what=${1:-all}
jobs=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}

# Queued as one line each: NAME COMMAND ARG...  (no argument holds a
# space); tests/run_one.sh runs a line and leaves NAME's status.
list=build/logs/.jobs
run() {
	echo "$*" >>"$list"
}

mkdir -p build/logs
: >"$list"
if [ "$what" = all ] || [ "$what" = unit ]; then
	for t in build/tests/test_*; do
		[ -x "$t" ] || continue
		run "unit-$(basename "$t")" "$t"
	done
fi
if [ "$what" = all ] || [ "$what" = unit-asan ]; then
	for t in build/asan/tests/test_*; do
		[ -x "$t" ] || continue
		run "asan-$(basename "$t")" env \
		    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$t"
	done
fi
# The libFuzzer harnesses (tests/fuzz/): every committed regression
# input replayed, then a couple of seconds each from the seed corpus.
if [ "$what" = all ] || [ "$what" = fuzz ]; then
	for t in build/fuzz/*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		run "fuzz-$(basename "$t")" sh tests/fuzz/run.sh smoke \
		    "$(basename "$t")"
	done
fi
if [ "$what" = all ] || [ "$what" = e2e ]; then
	for t in tests/e2e/test_*.sh; do
		[ -f "$t" ] || continue
		run "e2e-$(basename "$t" .sh)" sh "$t"
	done
fi
# The core suites on the durable file:// store (a write's task waits for
# the committer thread), the JWKS suite (a rotation is served to the
# first request by waiting for a re-fetch), and the policy suite (a store
# that outlives each server of the test).
if [ "$what" = all ] || [ "$what" = e2e-file ]; then
	for t in tests/e2e/test_core_*.sh tests/e2e/test_auth_jwks.sh \
	    tests/e2e/test_auth_policy.sh; do
		[ -f "$t" ] || continue
		run "e2e-file-$(basename "$t" .sh)" env LG_STORE=file sh "$t"
	done
fi
# The same end-to-end suites on gs:// against the fake GCS: one switch.
if [ "$what" = all ] || [ "$what" = e2e-gs ]; then
	for t in tests/e2e/test_core_*.sh tests/e2e/test_lockctl_*.sh; do
		[ -f "$t" ] || continue
		run "e2e-gs-$(basename "$t" .sh)" env LG_STORE=gs sh "$t"
	done
fi
# And again with the fake answering as Google's emulator does (a delete
# answered 200, lists in one page, keys nobody wrote, errors whose
# message is JSON text): what differs from our fake must not be an outage.
if [ "$what" = all ] || [ "$what" = e2e-gs-emulator ]; then
	for t in tests/e2e/test_core_*.sh tests/e2e/test_lockctl_*.sh; do
		[ -f "$t" ] || continue
		run "e2e-gs-emulator-$(basename "$t" .sh)" \
		    env LG_STORE=gs LG_GCS_DIALECT=emulator sh "$t"
	done
fi
if [ "$what" = all ] || [ "$what" = browser ]; then
	for t in tests/browser/test_*.mjs; do
		[ -f "$t" ] || continue
		run "browser-$(basename "$t" .mjs)" sh tests/browser/run.sh "$t"
	done
fi
# The longest first would balance the jobs better; the order above is
# kept so that a serial run reads as it always did.
rm -f build/logs/*.status
xargs -P "$jobs" -L 1 sh tests/run_one.sh <"$list"
pass=0
fail=0
skip=0
failed=""
skipped=""
while read -r name _; do
	st=$(cat "build/logs/$name.status" 2>/dev/null || echo lost)
	case $st in
	0) pass=$((pass + 1)) ;;
	77)
		skip=$((skip + 1))
		skipped="$skipped $name"
		;;
	*)
		fail=$((fail + 1))
		failed="$failed $name"
		;;
	esac
done <"$list"
[ -n "$skipped" ] && echo "skipped:$skipped"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
