#!/bin/sh
# gs:// over https, as on Cloud Storage, through libcurl's HTTP engine
# against the fake behind a TLS front (tests/tools/tls_proxy.py) with a
# certificate made here: acquire, refresh, inspect, list and release work,
# several requests share one TLS connection, and a certificate lockgate
# was not told to trust is refused: at start lockgate does not serve (it
# says why and waits), and one that appears under a running lockgate
# gets 503 (never a lock taken over an unverified peer).
LG_STORE=gs
. tests/e2e/lib.sh
out=$LG_TMP/out
AUTH="Authorization: Bearer $(lg_token alice)"

# cert NAME: a self-signed certificate for 127.0.0.1, $LG_TMP/NAME.pem
# and its key.
cert() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	    -addext subjectAltName=IP:127.0.0.1 -keyout "$LG_TMP/$1.key" \
	    -out "$LG_TMP/$1.pem" >/dev/null 2>&1 || lg_fail "openssl req"
}
cert cert
cert other
fake=${LG_FAKE_GCS_URL#http://}
# front NAME [PORT]: the TLS front with certificate NAME (on PORT, else
# one the kernel picks); sets TLS_PID and tport.
front() {
	: >"$LG_TMP/tls.port" # exists before the child opens it
	python3 tests/tools/tls_proxy.py --cert "$LG_TMP/$1.pem" \
	    --key "$LG_TMP/$1.key" --target "$fake" --port "${2:-0}" \
	    >"$LG_TMP/tls.port" 2>"$LG_TMP/tls.err" &
	TLS_PID=$!
	LG_PIDS="$LG_PIDS $TLS_PID"
	tport=$(lg_wait_port "$LG_TMP/tls.port" "$TLS_PID")
	[ -n "$tport" ] || { cat "$LG_TMP/tls.err" >&2; lg_fail "tls_proxy did not start"; }
}
front cert

# Storage over https; the token from the fake's metadata server (plain
# http, as the real one is).
unset STORAGE_EMULATOR_HOST
base="GCE_METADATA_HOST=$fake LOCKGATE_GCS_ENDPOINT=https://127.0.0.1:$tport"

post() {
	lg_curl -o "$out" -w '%{http_code}' -X POST -H "$AUTH" "$LG_URL/v1/locks/$1"
}

LG_ENV="$base LOCKGATE_GCS_CA_FILE=$LG_TMP/cert.pem"
lg_start
c0=$(lg_fake_count connections)
lg_eq "$(post "tls/a:acquire?ttl=60")" 200 "acquire over https"
lease=$(lg_json lease_id <"$out")
gen=$(lg_json fencing_token <"$out")
lg_eq "$(post "tls/a:acquire?ttl=60")" 409 "held"
lg_eq "$(post "tls/a:refresh?lease_id=$lease&ttl=120")" 200 "refresh"
lg_eq "$(lg_json fencing_token <"$out")" "$gen" "same fencing token"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$AUTH" "$LG_URL/v1/locks/tls/a")
lg_eq "$code" 200 "inspect"
lg_eq "$(lg_json ttl <"$out")" 120 "the refreshed ttl read back"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$AUTH" "$LG_URL/v1/locks?prefix=tls/")
lg_eq "$code" 200 "list"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [l["name"] for l in d["locks"]] == [sys.argv[2]], d' \
    "$out" "tls/a" || lg_fail "the list over https"
lg_eq "$(post "tls/a:release?lease_id=$lease")" 204 "release"
lg_eq "$(post "tls/a:release?lease_id=$lease")" 404 "released"
# Seven storage requests, each its own task: they may open a few
# connections at first, not one each.
c1=$(lg_fake_count connections)
[ $((c1 - c0)) -le 4 ] || lg_fail "$((c1 - c0)) connections for 7 requests"
lg_stop

# A certificate nobody said to trust, at start: lockgate cannot ask the
# storage whether it referees locks, so it does not serve; its warning
# names the certificate, and a signal ends the wait.
log=$LG_TMP/untrusted.log
# shellcheck disable=SC2086
env LOCKGATE_JWT_SECRET="$LG_SECRET" $base LOCKGATE_GCS_RETRY_TOTAL_MS=300 \
    "$LG_BIN" --listen 127.0.0.1:0 --store "$LG_STORE_URL" >"$log" 2>&1 &
pid=$!
LG_PIDS="$LG_PIDS $pid"
lg_wait_line "$log" '"message":"could not check that the storage referees locks' ||
    lg_fail "no warning: $(cat "$log")"
grep '"message":"could not check' "$log" | grep -qi certificate ||
    lg_fail "the warning does not name the certificate: $(cat "$log")"
lg_stop "$pid"
! grep -q '"message":"listening"' "$log" || lg_fail "it listened: $(cat "$log")"

# A certificate nobody said to trust, under a running lockgate (the front
# comes back on its port with another): refused, before any lock.
LG_ENV="$base LOCKGATE_GCS_CA_FILE=$LG_TMP/cert.pem LOCKGATE_GCS_RETRY_TOTAL_MS=1500"
lg_start
kill "$TLS_PID"
wait "$TLS_PID" 2>/dev/null || true
LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $TLS_PID\b//")
front other "$tport"
lg_eq "$(post "tls/untrusted:acquire")" 503 "an untrusted certificate"
lg_eq "$(lg_json error.code <"$out")" storage_unavailable "its code"
lg_json error.message <"$out" | grep -qi 'certificate' ||
    lg_fail "the message does not name the certificate: $(cat "$out")"
lg_stop
lg_eq "$(lg_fake_count objects)" 0 "no object left behind"
echo ok
