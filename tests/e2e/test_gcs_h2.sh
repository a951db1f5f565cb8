#!/bin/sh
# gs:// over HTTP/2, as Cloud Storage serves it: behind an h2 TLS front
# (nghttpx) to the fake, with 20 ms added to every write so that requests
# overlap, 64 concurrent acquire/release loops on 16 names share at most
# 2 TCP connections to the front (GCS_MULTI_H2_CONNS; the issue asks at
# most 4; counted by the front: distinct client
# ports in its access log), all h2, with many storage requests in flight
# at once; no two grants on a name overlap, tokens are distinct and grow,
# and nothing whose release was answered 204 is left held.  Then the same
# front offering HTTP/1.1 only: lockgate keeps a connection per request in
# flight (more than 4, at most 64), which shows the count can tell.
LG_STORE=gs
. tests/e2e/lib.sh
. tests/e2e/lib_front.sh
TOKEN=$(lg_token alice)
LOOPS=64
SECONDS_EACH=4 # each loop: this long or CYCLES cycles
CYCLES=150

# loops NAME: run the loops against the latest instance, list what is
# held after them, check both.  Extra check options follow NAME.
loops() {
	_n=$1
	shift
	timeout 60 python3 tests/e2e/lock_loops.py run --url "$LG_URL" \
	    --token "$TOKEN" --loops $LOOPS --names 16 --prefix "$_n" \
	    --seconds $SECONDS_EACH --cycles $CYCLES --out "$LG_TMP/$_n.rows" ||
	    lg_fail "$_n: the loops did not end"
	code=$(lg_curl -o "$LG_TMP/$_n.held" -w '%{http_code}' \
	    -H "Authorization: Bearer $TOKEN" "$LG_URL/v1/locks?prefix=$_n/")
	lg_eq "$code" 200 "$_n: the list after the loops"
	python3 tests/e2e/lock_loops.py check --out "$LG_TMP/$_n.rows" \
	    --held "$LG_TMP/$_n.held" "$@" || lg_fail "$_n: lock properties"
}

lg_fake "fault?op=write&kind=latency&count=-1&ms=20" >/dev/null

# HTTP/2.
lg_front_start "$LG_TMP/h2.log"
LG_ENV=$LG_FRONT_ENV
lg_start
loops h2 --min-grants 200
n=$(lg_front_conns_at_once "$LG_TMP/h2.log")
reqs=$(wc -l <"$LG_TMP/h2.log")
echo "h2: $reqs requests on $n connections at once ($(lg_front_conns "$LG_TMP/h2.log") in all) to the front"
[ "$reqs" -ge 400 ] || lg_fail "only $reqs requests reached the front"
[ "$n" -ge 1 ] && [ "$n" -le 2 ] || lg_fail "h2: $n connections, want 1..2"
lg_eq "$(lg_front_alpns "$LG_TMP/h2.log")" h2 "the protocol chosen"
peak=$(lg_fake stats | sed -n 's/.*"latency_peak":\([0-9]*\).*/\1/p')
echo "h2: at most $peak writes held by the fake at once"
[ "${peak:-0}" -ge 16 ] ||
    lg_fail "h2: at most ${peak:-0} writes in flight at once: no multiplexing shown"
lg_stop
lg_front_stop

# HTTP/1.1 only: a connection per request in flight.
lg_front_start "$LG_TMP/h1.log" http/1.1
lg_start
loops h1 --min-grants 200
n=$(lg_front_conns_at_once "$LG_TMP/h1.log")
echo "http/1.1: $(wc -l <"$LG_TMP/h1.log") requests on $n connections at once ($(lg_front_conns "$LG_TMP/h1.log") in all)"
[ "$n" -gt 4 ] && [ "$n" -le $LOOPS ] ||
    lg_fail "http/1.1: $n connections, want 5..$LOOPS"
lg_eq "$(lg_front_alpns "$LG_TMP/h1.log")" http/1.1 "the protocol chosen"
lg_stop
lg_front_stop
echo ok
