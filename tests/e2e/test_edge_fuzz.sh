#!/bin/sh
# Hostile requests mutated at random from valid ones
# (tests/e2e/edge_fuzz.py), for EDGE_FUZZ_S seconds (default 10; `make
# fuzz` runs it for FUZZ_S): never a 500, /healthz 200 throughout, and on
# SIGTERM a clean exit with no sanitizer report or leak (lg_stop).  The
# seed is printed; EDGE_FUZZ_SEED replays a run.
. tests/e2e/lib.sh
lg_start
A=$(lg_token alice)
python3 tests/e2e/edge_fuzz.py "${LG_URL#http://}" "$A" "${EDGE_FUZZ_S:-10}" \
    "${EDGE_FUZZ_SEED:-$(date +%s)}" || lg_fail "edge fuzz"
lg_stop
echo ok
