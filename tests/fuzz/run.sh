#!/bin/sh
# run.sh fuzz NAME...: run each harness build/fuzz/NAME for FUZZ_S seconds
#   (default 300) on its corpus (tests/fuzz/corpus/NAME, grown in
#   build/fuzz/work/NAME), printing "fuzz NAME: N execs, C crashes
#   (R execs/s)" per harness and a closing line.  Crash, leak and timeout
#   inputs land in build/fuzz/artifacts/NAME/.  Exit non-zero on any.
#   With FUZZ_RUNS set, each also stops after that many executions
#   (libFuzzer's -runs): FUZZ_RUNS=10000000 with a large FUZZ_S gives
#   every harness its 10 M, each in its own time.  FUZZ_JOBS=J runs J
#   harnesses at a time, the slowest (by its last log) first.
# run.sh smoke NAME: the `make test` slice: replay every committed
#   regression input (tests/fuzz/regressions/NAME/), then fuzz for
#   FUZZ_SMOKE_S seconds (default 2) from the seed corpus.  Inputs of
#   findings not fixed yet (tests/fuzz/regressions-open/) are not
#   replayed; `run.sh open NAME` replays them, with LOCKGATE_FUZZ_OPEN set.
set -u
cd "$(dirname "$0")/../.."
mode=${1:-}
[ $# -gt 0 ] && shift
# libFuzzer's own error exit status is 77, which tests/run.sh reads as
# "skipped": make it 1.
OPTS="-timeout=25 -rss_limit_mb=2560 -print_final_stats=1 -error_exitcode=1"

# The harness's files in DIR (none: nothing).
files() {
	[ -d "$1" ] || return 0
	find "$1" -type f ! -name README | sort
}

# Replay the inputs of DIR once each; fails on the first that crashes.
replay() { # name dir
	list=$(files "$2")
	[ -z "$list" ] && return 0
	# shellcheck disable=SC2086
	"build/fuzz/$1" $OPTS $list
}

# Fuzz harness NAME for FUZZ_S seconds (and FUZZ_RUNS executions, if
# set); print its line and leave "N C" in build/fuzz/logs/NAME.result.
fuzz_one() { # name
	name=$1
	work=build/fuzz/work/$name
	art=build/fuzz/artifacts/$name
	log=build/fuzz/logs/$name.log
	mkdir -p "$work" "$art" build/fuzz/logs
	before=$(find "$art" -type f | wc -l)
	start=$(date +%s)
	# shellcheck disable=SC2086
	"build/fuzz/$name" $OPTS -max_total_time="${FUZZ_S:-300}" \
	    ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} \
	    -artifact_prefix="$art/" "$work" \
	    "tests/fuzz/corpus/$name" >"$log" 2>&1
	took=$(($(date +%s) - start))
	[ "$took" -gt 0 ] || took=1
	n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" |
	    tail -n 1)
	n=${n:-0}
	c=$(($(find "$art" -type f | wc -l) - before))
	echo "fuzz $name: $n execs, $c crashes ($((n / took)) execs/s)"
	[ "$c" -gt 0 ] && tail -n 30 "$log" | sed 's/^/    /'
	echo "$n $c" >"build/fuzz/logs/$name.result"
}

# NAMES, slowest first by the execs/s of each one's last log (a harness
# never run first of all), so that with FUZZ_JOBS > 1 the long ones do
# not start last.
slowest_first() { # names...
	for name in "$@"; do
		r=$(sed -n 's/^stat::average_exec_per_sec: *//p' \
		    "build/fuzz/logs/$name.log" 2>/dev/null | tail -n 1)
		echo "${r:-0} $name"
	done | sort -n | cut -d' ' -f2
}

case "$mode" in
fuzz)
	# FUZZ_JOBS harnesses at a time (default 1: one after the other).
	jobs=${FUZZ_JOBS:-1}
	mkdir -p build/fuzz/logs
	for name in "$@"; do
		rm -f "build/fuzz/logs/$name.result"
	done
	slowest_first "$@" |
	    xargs -P "$jobs" -n 1 sh tests/fuzz/run.sh one
	total=0
	bad=0
	for name in "$@"; do
		r=$(cat "build/fuzz/logs/$name.result" 2>/dev/null) ||
		    r="0 1" # no result: the harness did not run to its end
		total=$((total + ${r% *}))
		bad=$((bad + ${r#* }))
	done
	echo "fuzz: $# harnesses, $total execs, $bad crashes"
	[ "$bad" -eq 0 ]
	;;
one)
	fuzz_one "$1"
	;;
smoke)
	name=$1
	art=build/fuzz/artifacts/$name
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$art"
	echo "== replay tests/fuzz/regressions/$name"
	replay "$name" "tests/fuzz/regressions/$name" || exit 1
	if [ "$name" = format_env ]; then
		echo "== seed corpus, values eval'ed by dash"
		LOCKGATE_FUZZ_DASH=1 "build/fuzz/$name" $OPTS -runs=0 \
		    "tests/fuzz/corpus/$name" || exit 1
	fi
	echo "== fuzz ${FUZZ_SMOKE_S:-2} s"
	# shellcheck disable=SC2086
	"build/fuzz/$name" $OPTS -max_total_time="${FUZZ_SMOKE_S:-2}" \
	    -artifact_prefix="$art/" "$tmp" "tests/fuzz/corpus/$name"
	;;
open)
	LOCKGATE_FUZZ_OPEN=1 replay "$1" "tests/fuzz/regressions-open/$1"
	;;
*)
	echo "usage: run.sh fuzz NAME... | one NAME | smoke NAME | open NAME" >&2
	exit 2
	;;
esac
