#!/bin/sh
# The benchmark's instruments work and fail when they should: loadgen
# against lockgate (mem://), the storage floor through libcurl and by hand
# (storage_floor --raw 0 and 1) against fake_gcs, one short run each, with
# completed cycles, no error and a CPU figure; and each refuses a server
# that answers something else (non-zero exit, no result taken).  No timing
# is asserted.  Always runs against fake_gcs.
LG_STORE=gs
. tests/e2e/lib.sh
LOADGEN=build/bench/loadgen
SFLOOR=build/bench/storage_floor
[ -x "$LOADGEN" ] && [ -x "$SFLOOR" ] ||
    lg_fail "$LOADGEN or $SFLOOR is missing (make build/bench/loadgen build/bench/storage_floor)"
fake_port=${LG_FAKE_GCS_URL##*:}
# The harness itself parses (make bench is too long to run here; a quote
# in its awk program once broke it after four minutes of runs).
sh -n bench/run.sh || lg_fail "bench/run.sh does not parse"

# check_line LINE LABEL: a result line of a clean run.
check_line() {
	echo "$1"
	case "$1" in
	"label=$2 "*) ;;
	*) lg_fail "$2: no result line: $1" ;;
	esac
	cycles=$(echo "$1" | sed -n 's/.* cycles=\([0-9]*\) .*/\1/p')
	errors=$(echo "$1" | sed -n 's/.* errors=\([0-9]*\).*/\1/p')
	cpu=$(echo "$1" | sed -n 's/.* cpu_us_per_cycle=\([0-9.]*\).*/\1/p')
	[ -n "$cycles" ] && [ "$cycles" -gt 0 ] || lg_fail "$2: no cycle: $1"
	lg_eq "$errors" 0 "$2: errors"
	[ -n "$cpu" ] || lg_fail "$2: no CPU figure: $1"
}

for raw in 0 1; do
	out=$(timeout 60 "$SFLOOR" --port "$fake_port" --clients 8 --seconds 1 \
	    --warmup 200 --raw "$raw" --label "floor$raw") ||
	    lg_fail "storage_floor --raw $raw failed"
	check_line "$out" "floor$raw"
done
# Every object it made was deleted again: a cycle ends with the delete.
objects=$(lg_fake_count objects)
lg_eq "$objects" 0 "objects left by the storage floors"

lg_start
TOKEN=$(lg_token bench)
export TOKEN
port=${LG_URL##*:}
out=$(timeout 60 "$LOADGEN" --port "$port" --clients 8 --seconds 1 \
    --warmup 200 --pid "$LG_PID" --label lg) || lg_fail "loadgen failed"
check_line "$out" lg

# Pointed at the wrong server, each instrument fails: lockgate answers
# the storage requests 404, the fake answers loadgen's requests 404.
for raw in 0 1; do
	if timeout 60 "$SFLOOR" --port "$port" --clients 2 --seconds 1 \
	    --warmup 0 --raw "$raw" >"$LG_TMP/wrong" 2>&1; then
		cat "$LG_TMP/wrong" >&2
		lg_fail "storage_floor --raw $raw passed against lockgate"
	fi
done
if timeout 60 "$LOADGEN" --port "$fake_port" --clients 2 --seconds 1 \
    --warmup 0 >"$LG_TMP/wrong" 2>&1; then
	cat "$LG_TMP/wrong" >&2
	lg_fail "loadgen passed against fake_gcs"
fi
lg_stop
echo "bench tools: OK"
