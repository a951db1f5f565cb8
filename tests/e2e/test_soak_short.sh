#!/bin/sh
# The short soak (issue 24; `make soak` is the long one): gs:// with three
# instances on the fake GCS with faults on, then file:// with two
# processes; kill -9, stalled and crashed jobs; 60 clients, a quarter of
# whose jobs take semaphores and shared locks.  Passes when the checker
# finds no violation in the recorded history (at most a lock's limit of
# holders at once: one exclusive, N of a semaphore, shared alone), every
# server exits 0 on SIGTERM with a clean sanitizer log, and at least 5,000
# leases were granted.  SOAK_SHORT_S (default 24) is the load's duration.
set -u
cd "$(dirname "$0")/../.."
LG_BIN=${LG_BIN:-build/asan/lockgate}
for b in "$LG_BIN" build/tools/fake_gcs; do
	[ -x "$b" ] || { echo "FAIL: $b is missing (make $b)" >&2; exit 1; }
done
timeout 85 python3 tests/soak/soak.py --seconds "${SOAK_SHORT_S:-24}" \
    --bin "$LG_BIN" --min-grants 5000 || {
	echo "FAIL: the short soak failed (see above; rerun with --seed)" >&2
	exit 1
}
