#!/bin/sh
# run.sh [unit|unit-asan|e2e|e2e-file|e2e-gs|browser|all]: run the suites and print one closing line
# "N passed, N failed".  Exit non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
what=${1:-all}
pass=0
fail=0
failed=""

run() { # name command...
	name=$1
	shift
	start=$(date +%s)
	if "$@" >"build/logs/$name.log" 2>&1; then
		pass=$((pass + 1))
		echo "PASS $name ($(($(date +%s) - start)) s)"
	else
		fail=$((fail + 1))
		failed="$failed $name"
		echo "FAIL $name ($(($(date +%s) - start)) s), log follows:"
		tail -n 60 "build/logs/$name.log" | sed 's/^/    /'
	fi
}

mkdir -p build/logs
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
if [ "$what" = all ] || [ "$what" = e2e ]; then
	for t in tests/e2e/test_*.sh; do
		[ -f "$t" ] || continue
		run "e2e-$(basename "$t" .sh)" sh "$t"
	done
fi
# The core suites on the durable file:// store (served by storage
# workers, as gs:// is).
if [ "$what" = all ] || [ "$what" = e2e-file ]; then
	for t in tests/e2e/test_core_*.sh; do
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
if [ "$what" = all ] || [ "$what" = browser ]; then
	for t in tests/browser/test_*.mjs; do
		[ -f "$t" ] || continue
		run "browser-$(basename "$t" .mjs)" sh tests/browser/run.sh "$t"
	done
fi
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
