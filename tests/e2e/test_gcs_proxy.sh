#!/bin/sh
# gs:// through an https_proxy, as behind a corporate egress proxy:
# lockgate reaches the storage (an h2 TLS front to the fake, nghttpx)
# only through a CONNECT proxy on loopback (tests/tools/connect_proxy.py).
# Acquire, refresh, inspect and release work; the proxy saw the tunnels to
# the front and the front saw the requests, over h2 inside the tunnel;
# the metadata server (plain http, not covered by https_proxy) is reached
# directly.  With the proxy gone the storage is unreachable: 503 with
# Retry-After, so the requests did go through it.
LG_STORE=gs
. tests/e2e/lib.sh
. tests/e2e/lib_front.sh
AUTH="Authorization: Bearer $(lg_token alice)"
out=$LG_TMP/out

post() {
	lg_curl -o "$out" -w '%{http_code}' -X POST -H "$AUTH" "$LG_URL/v1/locks/$1"
}

lg_front_start "$LG_TMP/front.log"
: >"$LG_TMP/proxy.log"
: >"$LG_TMP/proxy.port"
python3 tests/tools/connect_proxy.py --log "$LG_TMP/proxy.log" \
    >"$LG_TMP/proxy.port" 2>"$LG_TMP/proxy.err" &
PROXY_PID=$!
LG_PIDS="$LG_PIDS $PROXY_PID"
pport=$(lg_wait_port "$LG_TMP/proxy.port" "$PROXY_PID")
[ -n "$pport" ] || { cat "$LG_TMP/proxy.err" >&2; lg_fail "connect_proxy did not start"; }

# Only https_proxy: what would bypass it (no_proxy) is cleared.
unset no_proxy NO_PROXY http_proxy all_proxy ALL_PROXY HTTPS_PROXY
LG_ENV="$LG_FRONT_ENV https_proxy=http://127.0.0.1:$pport LOCKGATE_GCS_RETRY_TOTAL_MS=1500"
lg_start
lg_eq "$(post "px/a:acquire?ttl=60")" 200 "acquire through the proxy"
lease=$(lg_json lease_id <"$out")
gen=$(lg_json fencing_token <"$out")
lg_eq "$(post "px/a:acquire?ttl=60")" 409 "held"
lg_eq "$(post "px/a:refresh?lease_id=$lease&ttl=120")" 200 "refresh"
lg_eq "$(lg_json fencing_token <"$out")" "$gen" "same fencing token"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$AUTH" "$LG_URL/v1/locks/px/a")
lg_eq "$code" 200 "inspect"
lg_eq "$(post "px/a:release?lease_id=$lease")" 204 "release"
lg_eq "$(post "px/a:release?lease_id=$lease")" 404 "released"

grep -qx "CONNECT 127.0.0.1:$LG_FRONT_PORT" "$LG_TMP/proxy.log" ||
    lg_fail "the proxy saw no tunnel to the front: $(cat "$LG_TMP/proxy.log")"
tunnels=$(wc -l <"$LG_TMP/proxy.log")
[ "$tunnels" -le 2 ] || lg_fail "$tunnels tunnels for a few requests, want 1..2"
reqs=$(wc -l <"$LG_TMP/front.log")
[ "$reqs" -ge 6 ] || lg_fail "the front saw $reqs requests, want >= 6"
lg_eq "$(lg_front_alpns "$LG_TMP/front.log")" h2 "the protocol in the tunnel"
grep -q "CONNECT.*:${LG_FRONT_FAKE#*:}\$" "$LG_TMP/proxy.log" &&
    lg_fail "the metadata server (plain http) went through the https proxy"

# The proxy goes away: nothing reaches the storage.
kill -TERM "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null
LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $PROXY_PID\b//")
hdr=$LG_TMP/hdr
code=$(lg_curl -D "$hdr" -o "$out" -w '%{http_code}' -X POST -H "$AUTH" \
    "$LG_URL/v1/locks/px/b:acquire")
lg_eq "$code" 503 "acquire with the proxy gone"
grep -qi '^Retry-After: [0-9]' "$hdr" || lg_fail "503 without Retry-After"
lg_eq "$(lg_json error.code <"$out")" storage_unavailable "its code"
lg_stop
lg_front_stop
lg_eq "$(lg_fake_count objects)" 0 "no object left behind"
echo ok
