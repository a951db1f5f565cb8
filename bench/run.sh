#!/bin/sh
# bench/run.sh: the benchmark of `make bench` (issues 2 and 3).  Builds
# nothing (make does).  Starts, one after another, on 127.0.0.1 and a port
# the kernel picks:
#   floor  build/bench/floor: libmicrohttpd set up like lockgate (one
#          external-epoll daemon per CPU on SO_REUSEPORT sockets), no
#          auth, no store, no log (the HTTP floor)
#   mem    build/lockgate --store mem://
#   file   build/lockgate --store file://TMPDIR (durable: on disk before a
#          grant is answered)
#   gs     build/lockgate --store gs://bench-bucket/p/ against
#          build/tools/fake_gcs (STORAGE_EMULATOR_HOST)
#   gsfloor build/bench/storage_floor against a fresh fake_gcs: the
#          insert+delete of one gs cycle made by a bare libcurl client,
#          no lockgate (the storage floor; 64 clients only)
#   rawfloor the same requests from storage_floor --raw 1: plain sockets,
#          HTTP/1.1 written and read by hand, no libcurl (a measuring
#          instrument, not a client; 64 clients only)
#   gs20   the same as gs with 20 ms added to every write by the fake, as
#          a real bucket answers in tens of ms, over plain http (HTTP/1.1)
#   gs20floor storage_floor against a fake with gs20's 20 ms writes, 64
#          clients and 1 (pinned with the fake): what a bare libcurl client
#          with no lockgate sees there, the floor of gs20's p50
#   gs20h2 the same as gs20 through an HTTP/2 TLS front to the fake
#          (nghttpx, a certificate made with openssl), as Cloud Storage
#          serves it
#   gs20h2floor storage_floor --ca through the same front to the same
#          slow fake, 64 clients and 1: the floor of gs20h2's p50
# and drives each with build/bench/loadgen: 64 keep-alive clients on
# distinct lock names, then 1 client, BENCH_RUNS runs of BENCH_SECONDS each
# (after a BENCH_WARMUP_MS warm-up), and prints the medians in one table
# with lockgate's CPU time per cycle and the targets' ratios, PASS or MISS.
# For gs20 and gs20h2 it also counts the connections lockgate used to the
# storage during the 64-client runs: for gs20 those the fake accepted
# (lockgate is its only client then), for gs20h2 the distinct client
# ports in the front's access log (the fake's count would be nghttpx's).
# The targets are informational: the exit status is 0 unless something
# broke (a server that did not start, a loadgen error or non-2xx answer).
#
# The 1-client runs are pinned: before them the server (every thread,
# and the fake for gs targets) is moved to CPU BENCH_CPU, and the loadgen
# runs there too, for every target alike.  A cross-CPU wake-up costs this
# VM about 35 us, and unpinned serial runs land on one CPU or two at
# random; pinned, they measure the CPU path of a request.  The 64-client
# runs are not pinned.
#
# Servers are stopped by PID; the temporary directory is removed.
# lockgate's stdout (one log line per request) goes to /dev/null.
# BENCH_TARGETS (default "floor mem file gs gsfloor rawfloor gs20 gs20floor
# gs20h2 gs20h2floor")
# picks targets.
#
# BENCH_IDLE_POLL=1 (root only) asks the kernel, for the whole run, that
# an idle CPU be woken with no exit latency (0 written to
# /dev/cpu_dma_latency and held open, as cyclictest does): a guest whose
# idle CPUs halt then polls instead, and a thread that sleeps wakes
# without the host's delay.  It is a statement about the VM, not about
# lockgate: every target, floors included, runs under it, and the table
# says so.  Off by default: the figures that count are taken as a machine
# runs.
set -u
cd "$(dirname "$0")/.." || exit 1

BENCH_SECONDS=${BENCH_SECONDS:-4}
BENCH_WARMUP_MS=${BENCH_WARMUP_MS:-1000}
BENCH_RUNS=${BENCH_RUNS:-3}
BENCH_TARGETS=${BENCH_TARGETS:-floor mem file gs gsfloor rawfloor gs20 gs20floor gs20h2 gs20h2floor}
BENCH_CPU=${BENCH_CPU:-0} # the CPU of the 1-client runs
BENCH_IDLE_POLL=${BENCH_IDLE_POLL:-0}
# The informational two-CPU serial runs (floor and mem only): server on
# BENCH_CPU, loadgen on BENCH_CPU2 (default: the next online CPU, none on a
# one-CPU machine).
BENCH_CPU2=${BENCH_CPU2:-}
XCPU_TARGETS="floor mem"
GS_SLOW_MS=20             # gs20: latency the fake adds to each write
# In this order: a server is pinned before its 1-client runs and stays so.
BENCH_CLIENTS="64 1"
GSFLOOR_CLIENTS=64

LOCKGATE=build/lockgate
FLOOR=build/bench/floor
LOADGEN=build/bench/loadgen
STORAGE_FLOOR=build/bench/storage_floor
FAKE_GCS=build/tools/fake_gcs
START_TRIES=200       # x 0.05 s: a server gets 10 s to listen
STOP_TRIES=100        # x 0.05 s: then SIGKILL

# Targets (informational).
T_MEM_FLOOR_OPS=0.5   # mem cycles/s / floor cycles/s at 64 clients, >=
T_SERIAL_P50=1.5      # mem p50 / floor p50 at 1 client, <=
T_FILE_OPS=8000       # file cycles/s at 64 clients, >=
T_GS20_P50=$((2 * GS_SLOW_MS * 1000 + 1000)) # gs20 p50 us, 1 and 64 clients, <=
T_CONNS_H2=4          # gs20h2: connections to the storage at 64 clients, <=
T_CONNS_H1=64         # gs20: the same over HTTP/1.1, <=

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockgate-bench.XXXXXX")
PIDS=""
BROKEN=0

stop_pid() {
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt $STOP_TRIES ]; do
		sleep 0.05
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rest=""
	for q in $PIDS; do
		[ "$q" = "$1" ] || rest="$rest $q"
	done
	PIDS=$rest
}

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	for p in $PIDS; do
		stop_pid "$p"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

die() {
	echo "bench: $*" >&2
	exit 1
}

for f in "$LOCKGATE" "$FLOOR" "$LOADGEN" "$STORAGE_FLOOR" "$FAKE_GCS"; do
	[ -x "$f" ] || die "$f is missing (run: make bench)"
done
command -v ss >/dev/null 2>&1 || die "ss (iproute2) is needed to find ports"
command -v taskset >/dev/null 2>&1 ||
    die "taskset (util-linux) is needed to pin the 1-client runs"
taskset -c "$BENCH_CPU" true 2>/dev/null ||
    die "cannot run on CPU $BENCH_CPU (BENCH_CPU)"

# load: what else this machine is doing (the numbers are only comparable
# on a quiet machine): load average and, where the kernel has PSI, the
# share of time some task waited for a CPU (avg10).
load() {
	la=$(cut -d' ' -f1-3 /proc/loadavg)
	psi=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu \
	    2>/dev/null)
	echo "load average $la, CPU pressure ${psi:-n/a}% (${NPROC} CPUs)"
}
NPROC=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')

# BENCH_IDLE_POLL: a process of our own holds the request open (closing
# it, when the process is stopped by PID at the end, lifts it).
IDLE="halted as the kernel chooses (BENCH_IDLE_POLL=0)"
if [ "$BENCH_IDLE_POLL" = 1 ]; then
	[ -w /dev/cpu_dma_latency ] ||
	    die "BENCH_IDLE_POLL=1: /dev/cpu_dma_latency is not writable (root only)"
	sh -c 'exec 3>/dev/cpu_dma_latency && printf 0 >&3 && exec sleep 86400' &
	PIDS="$PIDS $!"
	IDLE="woken with no exit latency (BENCH_IDLE_POLL=1: /dev/cpu_dma_latency held at 0)"
fi
LOAD_BEFORE=$(load)
# steal: on a virtual machine, the share of CPU time the host gave to
# someone else (the "steal" column of /proc/stat) between two readings.
# With a busy host every figure drops and CPU per cycle rises.
cpu_ticks() { awk '/^cpu /{ t = 0; for (i = 2; i <= NF; i++) t += $i; print $9, t }' /proc/stat; }
STAT_BEFORE=$(cpu_ticks)

# printed_port PID FILE: the port PID printed in FILE (the floor's
# "listening" line, or fake_gcs's bare number), waiting until it does.
printed_port() {
	i=0
	while [ $i -lt $START_TRIES ]; do
		port=$(sed -n -e 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' \
		    -e 's/^\([0-9][0-9]*\)$/\1/p' "$2" 2>/dev/null | head -n 1)
		if [ -n "$port" ]; then
			echo "$port"
			return 0
		fi
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# listen_port PID: the TCP port PID listens on (its only listen socket),
# waiting until it listens; empty when it died or never did.  For lockgate,
# whose stdout (and so its "listening" line) goes to /dev/null.
listen_port() {
	i=0
	while [ $i -lt $START_TRIES ]; do
		port=$(ss -Hltnp 2>/dev/null | awk -v p="pid=$1," '
		    index($0, p) { n = split($4, a, ":"); print a[n]; exit }')
		if [ -n "$port" ]; then
			echo "$port"
			return 0
		fi
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# The token: an HS256 secret of 64 hex characters (32 random bytes).
SECRET_FILE=$TMP/secret
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SECRET_FILE"
chmod 600 "$SECRET_FILE"
TOKEN=$("$LOCKGATE" token --secret-file "$SECRET_FILE" --sub bench --ttl 1h) ||
    die "cannot mint a token"
export TOKEN

RESULTS=$TMP/results
: >"$RESULTS"
# Connections to the storage at 64 clients: "target count" lines.
CONNS=$TMP/conns
: >"$CONNS"
# CONN_COUNT: for a gs target, a command that prints a mark when called
# with no argument, and the connections lockgate opened to the storage
# since MARK when called with one; "" when nothing is counted.
CONN_COUNT=""
# STORAGE_PORT: for a gs target, the port lockgate's storage connections go
# to (the fake's, or the front's); a 64-client run of its own then samples
# how many of them are open at once (count_conns; "" when nothing is
# counted).
STORAGE_PORT=""

# pin_all PID...: every thread of each PID (threads they start later
# inherit it) onto BENCH_CPU.
pin_all() {
	for q in "$@"; do
		taskset -a -p -c "$BENCH_CPU" "$q" >/dev/null || return 1
	done
}

# loadgen CLIENTS ARG...: the load generator, on BENCH_CPU for 1 client
# (on LOADGEN_CPU when set: the two-CPU runs).
loadgen() {
	if [ "$1" = 1 ]; then
		shift
		taskset -c "${LOADGEN_CPU:-$BENCH_CPU}" "$LOADGEN" "$@"
	else
		shift
		"$LOADGEN" "$@"
	fi
}

# The second CPU of the two-CPU serial runs, or "" when there is none.
if [ -z "$BENCH_CPU2" ]; then
	for c in $(seq 0 $((NPROC - 1)) 2>/dev/null); do
		if [ "$c" != "$BENCH_CPU" ] && taskset -c "$c" true 2>/dev/null; then
			BENCH_CPU2=$c
			break
		fi
	done
fi

# run_series NAME PID PORT CLIENTS: BENCH_RUNS loadgen runs, each line
# stored in RESULTS.
run_series() {
	r=1
	while [ $r -le "$BENCH_RUNS" ]; do
		if ! out=$(loadgen "$4" --port "$3" --clients "$4" \
		    --seconds "$BENCH_SECONDS" --warmup "$BENCH_WARMUP_MS" \
		    --pid "$2" --label "$1"); then
			echo "bench: $1, $4 clients, run $r: loadgen failed" \
			    "(see above)" >&2
			BROKEN=1
			return 1
		fi
		echo "  $out" >&2
		echo "$out" >>"$RESULTS"
		r=$((r + 1))
	done
}

# count_conns NAME PID PORT MARK: one more 64-client run, not counted in
# RESULTS, with bench/conns.py sampling the connections PID holds to
# STORAGE_PORT (the most open at once); then the connections opened since
# MARK.  Each sample walks the kernel's TCP table, which costs the programs
# beside it p50 (0.4 ms sampling once a second, 1.4 ms for a shell loop of
# ss -p ten times a second: docs/bench.md), so no sampler runs beside a
# run whose p50 is kept.
count_conns() {
	echo 0 >"$TMP/peak"
	python3 bench/conns.py "$2" "$STORAGE_PORT" "$TMP/peak" &
	speak=$!
	PIDS="$PIDS $speak"
	out=$(loadgen 64 --port "$3" --clients 64 \
	    --seconds "$BENCH_SECONDS" --warmup "$BENCH_WARMUP_MS" \
	    --pid "$2" --label "$1-conns")
	rc=$?
	stop_pid "$speak"
	if [ $rc != 0 ]; then
		echo "bench: $1, connections run: loadgen failed (see above)" >&2
		BROKEN=1
		return 1
	fi
	echo "  $out (p50 not kept: sampled)" >&2
	cp=$(cat "$TMP/peak")
	c1=$($CONN_COUNT "$4")
	echo "  label=$1 clients=64 storage_conns_opened=$c1" \
	    "storage_conns_open_at_once=$cp" >&2
	echo "$1 $c1 $cp" >>"$CONNS"
}

# run_target NAME PID PORT [PID...]: the loadgen runs; each output line is
# stored in RESULTS.  For the 1-client runs the server PID, the other PIDs
# (the fake of a gs target) and the loadgen are pinned to BENCH_CPU.
run_target() {
	name=$1
	spid=$2
	sport=$3
	shift 3
	for c in $BENCH_CLIENTS; do
		if [ "$c" = 1 ]; then
			if ! pin_all "$spid" "$@"; then
				echo "bench: $name: cannot pin to CPU $BENCH_CPU" >&2
				BROKEN=1
				return 1
			fi
			echo "bench: $name: 1 client: server${1:+, fake_gcs}" \
			    "and loadgen pinned to CPU $BENCH_CPU" >&2
		fi
		[ "$c" = 64 ] && [ -n "$CONN_COUNT" ] && c0=$($CONN_COUNT)
		run_series "$name" "$spid" "$sport" "$c" || return 1
		if [ "$c" = 64 ] && [ -n "$CONN_COUNT" ]; then
			count_conns "$name" "$spid" "$sport" "$c0" || return 1
		fi
	done
	# Informational: the same serial runs with the loadgen on another CPU
	# than the server, as a client on another machine would be; every
	# request then pays the VM's cross-CPU wake-ups.
	case " $XCPU_TARGETS " in
	*" $name "*) ;;
	*) return 0 ;;
	esac
	[ -n "$BENCH_CPU2" ] || return 0
	echo "bench: $name: 1 client: server on CPU $BENCH_CPU, loadgen on" \
	    "CPU $BENCH_CPU2" >&2
	LOADGEN_CPU=$BENCH_CPU2
	run_series "$name-2cpu" "$spid" "$sport" 1
	rc=$?
	LOADGEN_CPU=
	return $rc
}

# bench_lockgate NAME STORE ALSO [VAR=value...]: start, measure, stop.
# ALSO: the PID of a helper (the fake) pinned with lockgate, or "".
bench_lockgate() {
	name=$1
	store=$2
	also=$3
	shift 3
	env "$@" LOCKGATE_JWT_SECRET_FILE="$SECRET_FILE" "$LOCKGATE" \
	    --listen 127.0.0.1:0 --store "$store" \
	    >/dev/null 2>"$TMP/$name.err" &
	pid=$!
	PIDS="$PIDS $pid"
	if ! port=$(listen_port "$pid"); then
		cat "$TMP/$name.err" >&2
		echo "bench: lockgate --store $store did not start" >&2
		BROKEN=1
		stop_pid "$pid"
		return 1
	fi
	echo "bench: $name: lockgate --store $store (pid $pid, port $port)" >&2
	# shellcheck disable=SC2086 # $also: no word or one PID
	run_target "$name" "$pid" "$port" $also
	stop_pid "$pid"
}

bench_floor() {
	"$FLOOR" >"$TMP/floor.out" 2>"$TMP/floor.err" &
	pid=$!
	PIDS="$PIDS $pid"
	if ! port=$(printed_port "$pid" "$TMP/floor.out"); then
		cat "$TMP/floor.err" >&2
		echo "bench: the floor did not start" >&2
		BROKEN=1
		stop_pid "$pid"
		return 1
	fi
	echo "bench: floor: $FLOOR (pid $pid, port $port)" >&2
	run_target floor "$pid" "$port"
	stop_pid "$pid"
}

# start_fake NAME: a fresh fake_gcs; sets fpid and fport.
start_fake() {
	# Removed first: the child truncates it only once it runs, and the
	# last fake's port must not be read for this one's.
	rm -f "$TMP/fake_gcs.port"
	"$FAKE_GCS" --port 0 >"$TMP/fake_gcs.port" 2>"$TMP/fake_gcs.err" &
	fpid=$!
	PIDS="$PIDS $fpid"
	if ! fport=$(printed_port "$fpid" "$TMP/fake_gcs.port"); then
		cat "$TMP/fake_gcs.err" >&2
		echo "bench: fake_gcs did not start" >&2
		BROKEN=1
		stop_pid "$fpid"
		return 1
	fi
	echo "bench: $1: fake_gcs (pid $fpid, port $fport)" >&2
}

# bench_gs NAME LATENCY_MS [VAR=value...].  For the 1-client runs the
# fake is pinned with lockgate: it is half of every storage round trip,
# and a cross-CPU wake-up each way would show the VM's latency, not
# lockgate's.
bench_gs() {
	gname=$1
	glat=$2
	shift 2
	start_fake "$gname" || return 1
	if [ "$glat" -gt 0 ] && ! curl -sf -o /dev/null \
	    "http://127.0.0.1:$fport/_fake/fault?op=write&kind=latency&count=-1&ms=$glat"; then
		echo "bench: cannot set the fake's latency" >&2
		BROKEN=1
		stop_pid "$fpid"
		return 1
	fi
	[ "$glat" -gt 0 ] && CONN_COUNT=fake_conns && STORAGE_PORT=$fport
	bench_lockgate "$gname" gs://bench-bucket/p/ "$fpid" \
	    STORAGE_EMULATOR_HOST="127.0.0.1:$fport" "$@"
	CONN_COUNT=""
	STORAGE_PORT=""
	stop_pid "$fpid"
}

# fake_conns [MARK]: the fake's count of connections it accepted (its own
# control request included: one less since MARK).
fake_conns() {
	n=$(curl -sf "http://127.0.0.1:$fport/_fake/stats" |
	    sed -n 's/.*"connections":\([0-9]*\).*/\1/p')
	if [ $# -eq 0 ]; then
		echo "${n:-0}"
	else
		echo $((${n:-0} - $1 - 1))
	fi
}

# front_conns [MARK]: the access log's line count; with MARK, the distinct
# client ports of the lines after line MARK.
front_conns() {
	if [ $# -eq 0 ]; then
		wc -l <"$TMP/front.log"
	else
		tail -n +$(($1 + 1)) "$TMP/front.log" | awk '{ print $1 }' |
		    sort -u | wc -l | tr -d ' '
	fi
}

# start_front NAME: an HTTP/2 TLS front (nghttpx) to the fake at $fport,
# with a certificate made for 127.0.0.1 in $TMP/cert.pem and its access
# log in $TMP/front.log; sets npid (added to PIDS), nwork (its worker
# processes) and nport.  The fake must be up; on failure the fake is
# stopped too.
start_front() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	    -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/key.pem" \
	    -out "$TMP/cert.pem" >/dev/null 2>&1 ||
	    { echo "bench: openssl req failed" >&2; BROKEN=1; stop_pid "$fpid"; return 1; }
	nport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	: >"$TMP/front.log"
	nghttpx --conf=/dev/null -f"127.0.0.1,$nport" -b"127.0.0.1,$fport" \
	    --accesslog-file="$TMP/front.log" \
	    --accesslog-format='$remote_port $alpn $status' \
	    --errorlog-file="$TMP/nghttpx.err" \
	    "$TMP/key.pem" "$TMP/cert.pem" 2>>"$TMP/nghttpx.err" &
	npid=$!
	PIDS="$PIDS $npid"
	i=0
	until curl -s -o /dev/null --cacert "$TMP/cert.pem" \
	    "https://127.0.0.1:$nport/_fake/stats"; do
		i=$((i + 1))
		if [ $i -ge $START_TRIES ]; then
			cat "$TMP/nghttpx.err" >&2
			echo "bench: nghttpx did not start" >&2
			BROKEN=1
			stop_pid "$npid"
			stop_pid "$fpid"
			return 1
		fi
		sleep 0.05
	done
	nwork=$(ps -o pid= --ppid "$npid" | tr -d ' ' | tr '\n' ' ')
	echo "bench: $1: nghttpx h2 front (pid $npid, port $nport)" >&2
}

# front_alpn NAME: the protocols the front's access log shows.
front_alpn() {
	alpn=$(awk '{ print $2 }' "$TMP/front.log" | sort -u | tr '\n' ' ')
	echo "bench: $1: protocols at the front: $alpn" >&2
}

# bench_gs20h2 NAME: gs20 behind an HTTP/2 TLS front (nghttpx) to the
# fake; the front is pinned with lockgate and the fake for 1 client.
bench_gs20h2() {
	if ! command -v nghttpx >/dev/null 2>&1; then
		echo "bench: $1: nghttpx is missing (nghttp2-proxy); skipped" >&2
		return 0
	fi
	start_fake "$1" || return 1
	curl -sf -o /dev/null \
	    "http://127.0.0.1:$fport/_fake/fault?op=write&kind=latency&count=-1&ms=$GS_SLOW_MS" ||
	    { echo "bench: cannot set the fake's latency" >&2; BROKEN=1; stop_pid "$fpid"; return 1; }
	start_front "$1" || return 1
	CONN_COUNT=front_conns
	STORAGE_PORT=$nport
	# shellcheck disable=SC2086 # $nwork: the front's worker PIDs
	bench_lockgate "$1" gs://bench-bucket/p/ "$fpid $npid $nwork" \
	    GCE_METADATA_HOST="127.0.0.1:$fport" \
	    LOCKGATE_GCS_ENDPOINT="https://127.0.0.1:$nport" \
	    LOCKGATE_GCS_CA_FILE="$TMP/cert.pem"
	CONN_COUNT=""
	STORAGE_PORT=""
	front_alpn "$1"
	stop_pid "$npid"
	stop_pid "$fpid"
}

# bench_gsfloor NAME RAW FRONT [LATENCY_MS CLIENTS...]: the storage floor
# against a fresh fake, through libcurl (RAW 0) or hand-written HTTP (RAW
# 1), directly (FRONT 0) or over https through the HTTP/2 front (FRONT 1,
# as gs20h2), with LATENCY_MS added by the fake to every write (default
# 0), for each client count (default GSFLOOR_CLIENTS).  For 1 client the
# fake (and the front) and the floor are pinned to BENCH_CPU, as lockgate
# and the fake are for gs and gs20.  Its CPU per cycle is its own (the
# client's side of the two requests).
bench_gsfloor() {
	fname=$1
	fraw=$2
	ffront=$3
	flat=${4:-0}
	[ $# -gt 4 ] && shift 4 || set -- "$GSFLOOR_CLIENTS"
	if [ "$ffront" = 1 ] && ! command -v nghttpx >/dev/null 2>&1; then
		echo "bench: $fname: nghttpx is missing (nghttp2-proxy); skipped" >&2
		return 0
	fi
	start_fake "$fname" || return 1
	if [ "$flat" -gt 0 ] && ! curl -sf -o /dev/null \
	    "http://127.0.0.1:$fport/_fake/fault?op=write&kind=latency&count=-1&ms=$flat"; then
		echo "bench: cannot set the fake's latency" >&2
		BROKEN=1
		stop_pid "$fpid"
		return 1
	fi
	fto="--port $fport --raw $fraw"
	fpids=$fpid
	if [ "$ffront" = 1 ]; then
		start_front "$fname" || return 1
		fto="--port $nport --ca $TMP/cert.pem"
		fpids="$fpid $npid $nwork"
	fi
	for fc in "$@"; do
		pin=""
		if [ "$fc" = 1 ]; then
			# shellcheck disable=SC2086 # $fpids: PIDs
			pin_all $fpids || {
				echo "bench: $fname: cannot pin to CPU $BENCH_CPU" >&2
				BROKEN=1
				[ "$ffront" = 1 ] && stop_pid "$npid"
				stop_pid "$fpid"
				return 1
			}
			pin="taskset -c $BENCH_CPU"
		fi
		r=1
		while [ $r -le "$BENCH_RUNS" ]; do
			# shellcheck disable=SC2086 # $fto: options
			if ! out=$($pin "$STORAGE_FLOOR" $fto \
			    --clients "$fc" --seconds "$BENCH_SECONDS" \
			    --warmup "$BENCH_WARMUP_MS" --label "$fname"); then
				echo "bench: $fname, run $r: storage_floor failed" \
				    "(see above)" >&2
				BROKEN=1
				[ "$ffront" = 1 ] && stop_pid "$npid"
				stop_pid "$fpid"
				return 1
			fi
			echo "  $out" >&2
			echo "$out" >>"$RESULTS"
			r=$((r + 1))
		done
	done
	if [ "$ffront" = 1 ]; then
		front_alpn "$fname"
		stop_pid "$npid"
	fi
	stop_pid "$fpid"
}

for t in $BENCH_TARGETS; do
	case "$t" in
	floor) bench_floor ;;
	mem) bench_lockgate mem mem:// "" ;;
	file)
		mkdir -p "$TMP/data"
		bench_lockgate file "file://$TMP/data" ""
		;;
	gs) bench_gs gs 0 ;;
	gsfloor) bench_gsfloor gsfloor 0 0 ;;
	rawfloor) bench_gsfloor rawfloor 1 0 ;;
	gs20) bench_gs gs20 "$GS_SLOW_MS" ;;
	gs20floor) bench_gsfloor gs20floor 0 0 "$GS_SLOW_MS" $BENCH_CLIENTS ;;
	gs20h2) bench_gs20h2 gs20h2 ;;
	gs20h2floor) bench_gsfloor gs20h2floor 0 1 "$GS_SLOW_MS" $BENCH_CLIENTS ;;
	*) die "unknown target '$t' (floor mem file gs gsfloor rawfloor gs20 gs20floor gs20h2 gs20h2floor)" ;;
	esac
done

LOAD_AFTER=$(load)
# How late this VM wakes a thread that slept 20 ms (the median of 50
# sleeps): every 20 ms hold in the fake and every wait on it in a client
# pays it, so it sets how close gs20 and gs20floor can come to 2 x 20 ms.
WAKE=$(python3 -c 'import time
d = []
for _ in range(50):
    t = time.perf_counter(); time.sleep(0.02)
    d.append((time.perf_counter() - t - 0.02) * 1e6)
print("%.0f" % sorted(d)[25])' 2>/dev/null || echo n/a)
STEAL=$(echo "$STAT_BEFORE $(cpu_ticks)" |
    awk '{ d = $4 - $2; if (d > 0) printf "%.1f", 100 * ($3 - $1) / d; else print "n/a" }')

# The table: per target and client count, the median of each column over
# the runs; then the ratios against the targets.
echo
echo "machine before: $LOAD_BEFORE"
echo "machine after:  $LOAD_AFTER"
echo "CPU time taken by the VM's host (steal) during the runs: ${STEAL}%"
echo "a 20 ms sleep ends late by (median of 50): ${WAKE} us"
echo "idle CPUs: $IDLE"
awk -v tm="$T_MEM_FLOOR_OPS" -v ts="$T_SERIAL_P50" -v tf="$T_FILE_OPS" \
    -v tg20="$T_GS20_P50" -v th2="$T_CONNS_H2" -v th1="$T_CONNS_H1" \
    -v conns="$CONNS" -v runs="$BENCH_RUNS" -v secs="$BENCH_SECONDS" \
    -v cpu="$BENCH_CPU" '
function median(key, col,    n, i, j, t, v) {
	n = cnt[key]
	if (n == 0)
		return ""
	for (i = 1; i <= n; i++)
		v[i] = val[key, col, i]
	if (v[1] == "-")
		return "-"
	for (i = 2; i <= n; i++) {        # insertion sort, n is small
		t = v[i] + 0
		for (j = i - 1; j >= 1 && v[j] + 0 > t; j--)
			v[j + 1] = v[j]
		v[j + 1] = t
	}
	return (n % 2) ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
}
function verdict(ok) { return ok ? "PASS" : "MISS" }
{
	delete f
	for (i = 1; i <= NF; i++) {
		split($i, kv, "=")
		f[kv[1]] = kv[2]
	}
	key = f["label"] SUBSEP f["clients"]
	if (!(key in cnt)) {
		order[++nkeys] = key
		cnt[key] = 0
	}
	n = ++cnt[key]
	val[key, "ops", n] = f["cycles_per_s"]
	val[key, "p50", n] = f["p50_us"]
	val[key, "p99", n] = f["p99_us"]
	val[key, "cpu", n] = f["cpu_us_per_cycle"]
}
END {
	printf "lockgate bench: medians of %d runs of %d s (cycle = acquire + release)\n", runs, secs
	printf "1 client: server (and fake_gcs) and loadgen pinned to CPU %d: the CPU\n", cpu
	print "  path of a request without cross-CPU wake-ups; 64 clients: not pinned"
	print "-2cpu: 1 client, server and loadgen pinned to two different CPUs"
	print "CPU us/cycle: the server alone (lockgate, not the fake or the front); gsfloor, rawfloor: their own"
	printf "%-7s %7s %10s %9s %9s %13s\n", "target", "clients", "cycles/s", "p50 us", "p99 us", "CPU us/cycle"
	for (k = 1; k <= nkeys; k++) {
		key = order[k]
		split(key, parts, SUBSEP)
		m_ops[key] = median(key, "ops")
		m_p50[key] = median(key, "p50")
		m_cpu[key] = median(key, "cpu")
		cpu = m_cpu[key] == "-" ? "-" : sprintf("%.1f", m_cpu[key])
		printf "%-7s %7s %10.0f %9d %9d %13s\n", parts[1], parts[2], m_ops[key], m_p50[key], median(key, "p99"), cpu
	}
	print ""
	printf "%-40s %10s %10s  %s\n", "ratio", "value", "target", "result"
	f64 = "floor" SUBSEP 64; m64 = "mem" SUBSEP 64
	f1 = "floor" SUBSEP 1; m1 = "mem" SUBSEP 1
	fi64 = "file" SUBSEP 64
	if ((f64 in m_ops) && (m64 in m_ops) && m_ops[f64] > 0) {
		r = m_ops[m64] / m_ops[f64]
		printf "%-40s %10.2f %10s  %s\n", "mem/floor cycles/s, 64 clients", r, ">= " tm, verdict(r >= tm)
	}
	if ((f1 in m_p50) && (m1 in m_p50) && m_p50[f1] > 0) {
		r = m_p50[m1] / m_p50[f1]
		printf "%-40s %10.2f %10s  %s\n", "mem/floor p50, 1 client (serial)", r, "<= " ts, verdict(r <= ts)
	}
	f1x = "floor-2cpu" SUBSEP 1; m1x = "mem-2cpu" SUBSEP 1
	if ((f1x in m_p50) && (m1x in m_p50) && m_p50[f1x] > 0) {
		r = m_p50[m1x] / m_p50[f1x]
		printf "%-40s %10.2f %10s  %s\n", "  the same on two CPUs (informational)", r, "", ""
	}
	if (fi64 in m_ops) {
		r = m_ops[fi64]
		printf "%-40s %10.0f %10s  %s\n", "file cycles/s, 64 clients", r, ">= " tf, verdict(r >= tf)
	}
	# The storage answers writes in GS_SLOW_MS: a cycle (insert, delete)
	# is two of them, plus at most 1 ms of lockgate work, at any load.
	for (k = 1; k <= 2; k++) {
		t = k == 1 ? "gs20" : "gs20h2"
		for (c = 1; c <= 64; c += 63) {
			key = t SUBSEP c
			if (!(key in m_p50))
				continue
			r = m_p50[key]
			printf "%-40s %10d %10s  %s\n", t " p50 us, " c " client" (c > 1 ? "s" : ""), r, "<= " tg20, verdict(r <= tg20)
		}
	}
	# What lockgate adds to gs20 over a bare libcurl client against the
	# same slow fake: the part of the p50 that lockgate adds.  A 20 ms
	# hold alone costs this VM about 0.3 ms of wake-up from idle
	# (docs/bench.md), twice per cycle, in every client alike.
	for (k = 1; k <= 2; k++) {
		t = k == 1 ? "gs20" : "gs20h2"
		for (c = 1; c <= 64; c += 63) {
			kl = t SUBSEP c; kf = t "floor" SUBSEP c
			if ((kl in m_p50) && (kf in m_p50))
				printf "%-40s %10d %10s  %s\n", "  " t " - " t "floor p50 us, " c " client" (c > 1 ? "s" : ""), m_p50[kl] - m_p50[kf], "", ""
		}
	}
	# Connections to the storage at 64 clients (count_conns): the most
	# open at once (sampled every 0.1 s in a run of its own) against the
	# target, and every one opened over the 64-client runs (a
	# connection closed and replaced counts twice: the HTTP/2 front ends
	# a connection after about 1,000 releases, README "HTTP/2 and
	# proxies").
	while ((getline line < conns) > 0) {
		split(line, cw, " ")
		lim = cw[1] == "gs20h2" ? th2 : th1
		printf "%-40s %10d %10s  %s\n", cw[1] " storage conns open at once, 64 cl.", cw[3], "<= " lim, verdict(cw[3] <= lim)
		printf "%-40s %10d %10s  %s\n", "  opened over the 64-client runs", cw[2], "", ""
	}
}' "$RESULTS"

if [ "$BROKEN" != 0 ]; then
	echo "bench: BROKEN: a target did not run to the end (see above)" >&2
	exit 1
fi
exit 0
