#!/bin/sh
# The benchmark's instruments work and fail when they should: loadgen
# against lockgate (mem://), the storage floor through libcurl and by hand
# (storage_floor --raw 0 and 1) against fake_gcs, one short run each, with
# completed cycles, no error and a CPU figure; the libcurl floor through
# answers lost after their write applied (it sends again, and reads the
# 412 or 404 of the resend as the first send's echo, as lockgate does),
# and over HTTP/2 through a TLS front (storage_floor --ca, gs20h2floor)
# when nghttpx is here; and each refuses a server that answers something
# else (non-zero exit, no result taken).  No timing is asserted.  Always
# runs against fake_gcs.
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
# Answers lost after their write applied (the fake applies, then closes
# the connection): each request is sent again, by libcurl or by the
# floor, and its echo (412 to the insert, 404 to the delete) is read as
# the first send's.
lg_fake "fault?op=insert&kind=drop&count=2" >/dev/null
lg_fake "fault?op=delete&kind=drop&count=2" >/dev/null
out=$(timeout 60 "$SFLOOR" --port "$fake_port" --clients 2 --seconds 1 \
    --warmup 200 --raw 0 --label drops 2>"$LG_TMP/drops.err") ||
    { cat "$LG_TMP/drops.err" >&2; lg_fail "storage_floor failed on lost answers"; }
check_line "$out" drops
grep -q 'answers to a request sent again' "$LG_TMP/drops.err" ||
    { cat "$LG_TMP/drops.err" >&2; lg_fail "drops: no answer to a resend counted"; }
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

# bench/conns.py counts the connections lockgate keeps to the fake as ss
# does (lockgate's are kept alive after the run; the fake's ends of them
# go the other way and are not counted for the fake's PID).
conns() { # PID: conns.py's first count for PID to the fake's port
	: >"$LG_TMP/peak"
	python3 bench/conns.py "$1" "$fake_port" "$LG_TMP/peak" &
	cpid=$!
	lg_wait_port "$LG_TMP/peak" "$cpid"
	kill -TERM "$cpid"
	wait "$cpid"
}
held=$(ss -Htnp state established "( dport = :$fake_port )" |
    grep -c "pid=$LG_PID,")
[ "$held" -gt 0 ] || lg_fail "ss sees no lockgate connection to the fake"
lg_eq "$(conns "$LG_PID")" "$held" "conns.py: lockgate's connections"
echo "bench tools: conns.py and ss: lockgate holds $held connections to the fake"
lg_eq "$(conns "$LG_FAKE_GCS_PID")" 0 "conns.py: the fake's (to itself)"

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

# gs20h2floor's instrument: the floor over https through an HTTP/2 front
# (lib_front.sh; it skips the whole test when nghttpx is missing, so it is
# sourced only when nghttpx is here).
if command -v nghttpx >/dev/null 2>&1; then
	. tests/e2e/lib_front.sh
	lg_front_start "$LG_TMP/front.log"
	out=$(timeout 60 "$SFLOOR" --port "$LG_FRONT_PORT" \
	    --ca "$LG_TMP/cert.pem" --clients 8 --seconds 1 --warmup 200 \
	    --label floorh2) || lg_fail "storage_floor --ca failed"
	check_line "$out" floorh2
	alpn=$(awk '{ print $2 }' "$LG_TMP/front.log" | sort -u | tr '\n' ' ')
	lg_eq "$alpn" "h2 " "floorh2: the protocols at the front"
	if timeout 60 "$SFLOOR" --port "$LG_FRONT_PORT" --ca "$LG_TMP/cert.pem" \
	    --raw 1 --clients 2 --seconds 1 >"$LG_TMP/wrong" 2>&1; then
		lg_fail "storage_floor took --raw 1 with --ca (no TLS by hand)"
	fi
	lg_front_stop
else
	echo "bench tools: nghttpx is missing: the --ca floor not tried"
fi
echo "bench tools: OK"
