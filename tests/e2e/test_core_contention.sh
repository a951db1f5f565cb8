#!/bin/sh
# 16 concurrent acquirers of one lock through long-poll waits: every grant
# interval (from the grant's answer to the release's request, as each client
# saw them) is disjoint from every other, and fencing tokens only grow.
. tests/e2e/lib.sh
lg_start
CLIENTS=16
ROUNDS=3
rec=$LG_TMP/grants
: >"$rec"

client() {
	tok=$(lg_token "worker-$1")
	r=0
	while [ $r -lt $ROUNDS ]; do
		out=$LG_TMP/c$1.json
		code=$(curl -sS --max-time 40 -o "$out" -w '%{http_code}' -X POST \
		    -H "Authorization: Bearer $tok" \
		    "$LG_URL/v1/locks/one/lock:acquire?ttl=20&wait=30&holder=w$1")
		if [ "$code" != 200 ]; then
			echo "client $1: acquire answered $code" >>"$LG_TMP/errors"
			return
		fi
		start=$(date +%s%N)
		lease=$(lg_str lease_id <"$out")
		fence=$(lg_str fencing_token <"$out")
		sleep 0.02
		end=$(date +%s%N)
		echo "$start $end $fence $1" >>"$rec"
		code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X POST \
		    -H "Authorization: Bearer $tok" \
		    "$LG_URL/v1/locks/one/lock:release?lease_id=$lease")
		[ "$code" = 204 ] || echo "client $1: release answered $code" >>"$LG_TMP/errors"
		r=$((r + 1))
	done
}

i=0
pids=""
while [ $i -lt $CLIENTS ]; do
	client $i &
	pids="$pids $!"
	i=$((i + 1))
done
for p in $pids; do wait "$p"; done
[ -s "$LG_TMP/errors" ] && { cat "$LG_TMP/errors" >&2; lg_fail "client errors"; }
python3 - "$rec" "$((CLIENTS * ROUNDS))" <<'PY' || lg_fail "overlapping grants"
import sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), f"{len(rows)} grants, want {sys.argv[2]}"
rows.sort()
for a, b in zip(rows, rows[1:]):
    assert a[1] <= b[0], f"grant {a} overlaps {b}"
    assert b[2] > a[2], f"fencing token went from {a[2]} to {b[2]}"
print(len(rows), "grants, none overlapping")
PY
lg_stop
echo ok
