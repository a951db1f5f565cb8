#!/bin/sh
# Three lockgate instances on one fake GCS (one write per second per object
# enforced, faults injected all along): 12 clients contend for one lock
# until 8 grants, at most 75 s (one write a second per object and a fault
# every 300 ms make a grant take seconds: 30 s gave as few as 3 with other
# tests running beside it); a checker asserts
# that no two grants overlap and no fencing token repeats.  Then a waiter
# on instance B is granted, within its wait, after a release on instance
# A: no instance tells another, so B must find it by polling the storage.
# How long that took is printed, not asserted (a wall-clock bound failed
# on a loaded CI machine).  Always runs on gs:// against the fake.
LG_STORE=gs
LG_FAKE_GCS_ARGS=--rate-limit
. tests/e2e/lib.sh
CLIENTS=12
# The clients stop at WANT grants, or after RUN_S seconds: on a quiet
# machine WANT comes in about 30 s; on a loaded one the run takes longer
# instead of failing, and fewer than MIN_GRANTS by then is a failure.
RUN_S=${LG_MULTI_SECONDS:-75}
WANT=8
MIN_GRANTS=4
LG_ENV="LOCKGATE_GCS_RETRY_TOTAL_MS=4000"
lg_start
U1=$LG_URL
lg_start
U2=$LG_URL
lg_start
U3=$LG_URL
AUTH="Authorization: Bearer $(lg_token worker)"
grants=$LG_TMP/grants
: >"$grants"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# client ID URL: acquire (waiting up to 3 s), hold 150 ms, release; repeat
# until the deadline.  Logs "start_ms end_ms fencing_token id".
# running: the clients go on (before END, with fewer than WANT grants).
running() {
	[ "$(date +%s)" -lt "$END" ] && [ "$(wc -l <"$grants")" -lt "$WANT" ]
}

client() {
	out=$LG_TMP/c$1.out
	while running; do
		code=$(curl -sS --max-time 15 -o "$out" -w '%{http_code}' -X POST \
		    -H "$AUTH" "$2/v1/locks/hot:acquire?ttl=6&wait=3&holder=c$1") ||
		    code=000
		case $code in
		200)
			t1=$(now_ms)
			tok=$(lg_jget fencing_token "$out")
			lease=$(lg_jget lease_id "$out")
			sleep 0.15
			t2=$(now_ms)
			echo "$t1 $t2 $tok c$1" >>"$grants"
			rc=$(curl -sS --max-time 15 -o /dev/null -w '%{http_code}' \
			    -X POST -H "$AUTH" \
			    "$2/v1/locks/hot:release?lease_id=$lease") || rc=000
			echo "release $rc" >>"$LG_TMP/c$1.codes"
			;;
		409 | 503) echo "acquire $code" >>"$LG_TMP/c$1.codes" ;;
		*) echo "acquire $code" >>"$LG_TMP/c$1.codes"; echo "c$1: acquire $code" >&2 ;;
		esac
	done
}

# Faults all along: one every 300 ms, on a random operation.
faults() {
	while running; do
		op=$(shuf -n 1 -e insert get patch delete list)
		kind=$(shuf -n 1 -e 503 429 500 reset drop latency)
		curl -sS --max-time 5 -o /dev/null \
		    "$LG_FAKE_GCS_URL/_fake/fault?op=$op&kind=$kind&count=1&ms=200" || true
		sleep 0.3
	done
}

END=$(($(date +%s) + RUN_S))
pids=""
i=0
while [ $i -lt $CLIENTS ]; do
	case $((i % 3)) in 0) u=$U1 ;; 1) u=$U2 ;; *) u=$U3 ;; esac
	client $i "$u" &
	pids="$pids $!"
	i=$((i + 1))
done
faults &
fpid=$!
for p in $pids; do wait "$p"; done
wait "$fpid"
lg_fake clear-faults >/dev/null

cat "$LG_TMP"/c*.codes | sort | uniq -c | sed 's/^/    /' >&2
grep -q ' 500$' "$LG_TMP"/c*.codes && lg_fail "a 500 from lockgate"
grep -Ev ' (200|204|409|503)$' "$LG_TMP"/c*.codes >&2 &&
    lg_fail "unexpected answers (above)"
n=$(wc -l <"$grants")
echo "    $n grants in $(($(date +%s) - END + RUN_S)) s across 3 instances" >&2
[ "$n" -ge "$MIN_GRANTS" ] || lg_fail "only $n grants in $RUN_S s"
# The checker: sorted by start, every grant starts after the previous one
# ended, and no fencing token is used twice.
sort -n "$grants" | awk '
	NR > 1 && $1 < end { printf "overlap: %s starts at %d before %s ends at %d\n", $4, $1, who, end; bad = 1 }
	seen[$3]++ { printf "fencing token %s granted twice\n", $3; bad = 1 }
	$3 == "" { print "grant without a fencing token"; bad = 1 }
	{ end = $2; who = $4 }
	END { exit bad }' >&2 || lg_fail "double grant (see above)"
# Every release the clients were told succeeded really happened.
rel_ok=$(cat "$LG_TMP"/c*.codes | grep -c '^release 204$')
[ "$rel_ok" -ge $((n - 3)) ] || lg_fail "only $rel_ok of $n releases succeeded"

# Cross-instance wake-up: a waiter on instance 2 is granted, within its
# wait of 15 s, after the holder releases on instance 1.
sleep 1.1 # the per-object write limit
out=$LG_TMP/w.out
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$AUTH" \
    "$U1/v1/locks/handoff:acquire?ttl=30")
lg_eq "$code" 200 "holder on instance 1"
lease=$(lg_jget lease_id "$out")
(
	curl -sS --max-time 20 -o "$LG_TMP/waiter.out" -w '%{http_code}' -X POST \
	    -H "$AUTH" "$U2/v1/locks/handoff:acquire?ttl=30&wait=15" \
	    >"$LG_TMP/waiter.code"
	now_ms >"$LG_TMP/waiter.t"
) &
wpid=$!
sleep 2.5 # the waiter is queued and polling at its slowest rate
t_rel=$(now_ms)
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$AUTH" \
    "$U1/v1/locks/handoff:release?lease_id=$lease")
lg_eq "$code" 204 "release on instance 1"
wait "$wpid"
[ "$(cat "$LG_TMP/waiter.code")" = 200 ] || cat "$LG_TMP/waiter.out" >&2
lg_eq "$(cat "$LG_TMP/waiter.code")" 200 "waiter on instance 2 granted"
dt=$(($(cat "$LG_TMP/waiter.t") - t_rel))
echo "    waiter on instance 2 granted $dt ms after the release on instance 1" >&2

for p in $LG_PIDS; do lg_stop "$p"; done
echo ok
