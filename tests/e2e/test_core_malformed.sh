#!/bin/sh
# Bad input gets a clear 4xx JSON error, changes nothing, and leaves the
# server healthy: a table of malformed requests.
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
NOW=$(date +%s)
EXPIRED=$(lg_jwt "{\"sub\":\"alice\",\"iat\":$((NOW - 7200)),\"exp\":$((NOW - 3600))}")
NOTYET=$(lg_jwt "{\"sub\":\"alice\",\"iat\":$NOW,\"nbf\":$((NOW + 3600)),\"exp\":$((NOW + 7200))}")
WRONGKEY=$(lg_jwt "{\"sub\":\"alice\",\"iat\":$NOW,\"exp\":$((NOW + 3600))}" "another-secret-0123456789abcdef0123456789")
NONE_H=$(printf '{"alg":"none","typ":"JWT"}' | lg_b64url)
NONE_P=$(printf '{"sub":"alice","exp":%s}' $((NOW + 3600)) | lg_b64url)
ALGNONE="$NONE_H.$NONE_P."
NOEXP=$(lg_jwt '{"sub":"alice"}')
python3 -c 'print("{\"ttl\": 30, \"holder\": \"" + "x" * 2000000 + "\"}")' >"$LG_TMP/big.json"

# Hold one lock so that bad requests against it can be checked to change
# nothing.
lg_curl -o "$LG_TMP/held" -X POST -H "$A" "$LG_URL/v1/locks/keep:acquire?ttl=60&holder=orig" >/dev/null
FENCE=$(lg_json fencing_token <"$LG_TMP/held")

n=0
# case STATUS CODE METHOD PATH [curl args...]; CODE "-" = any error code.
case_() {
	want=$1 wantcode=$2 method=$3 path=$4
	shift 4
	n=$((n + 1))
	code=$(curl -sS --path-as-is --max-time 20 -o "$LG_TMP/body" -w '%{http_code}' \
	    -X "$method" "$@" "$LG_URL$path" 2>/dev/null)
	[ "$code" = "$want" ] || lg_fail "case $n ($method $path): status $code, want $want: $(head -c 300 "$LG_TMP/body")"
	# One parse per case: a JSON object with error.code and a message.
	got=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert isinstance(e["message"], str) and e["message"]
print(e["code"])' "$LG_TMP/body" 2>/dev/null) ||
	    lg_fail "case $n ($method $path): not a JSON error with code and message: $(head -c 200 "$LG_TMP/body")"
	[ -n "$got" ] || lg_fail "case $n: no error.code"
	[ "$wantcode" = - ] || [ "$got" = "$wantcode" ] ||
	    lg_fail "case $n ($method $path): code $got, want $wantcode"
}

case_ 400 bad_name POST '/v1/locks/-bad:acquire' -H "$A"
case_ 400 bad_name POST '/v1/locks/a//b:acquire' -H "$A"
case_ 400 bad_name POST '/v1/locks/a/../b:acquire' -H "$A"
case_ 400 bad_name POST '/v1/locks/trailing/:acquire' -H "$A"
case_ 400 bad_name GET "/v1/locks/$(python3 -c 'print("a"*300)')" -H "$A"
case_ 400 bad_name POST '/v1/locks/sp%20ace:acquire' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=1' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=86401' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=abc' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=-5' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=99999999999999999999999' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?wait=-1' -H "$A"
case_ 400 unknown_parameter POST '/v1/locks/x:acquire?tll=60' -H "$A"
case_ 400 - POST '/v1/locks/x:acquire?ttl=5&ttl=6' -H "$A"
case_ 400 bad_json POST '/v1/locks/x:acquire' -H "$A" -d '{"ttl": 30'
case_ 400 bad_json POST '/v1/locks/x:acquire' -H "$A" -d '[1,2]'
case_ 400 bad_json POST '/v1/locks/x:acquire' -H "$A" -d '{"ttl":1,"ttl":2}'
case_ 400 - POST '/v1/locks/x:acquire' -H "$A" -d '{"ttl":"30"}'
case_ 400 - POST '/v1/locks/x:acquire' -H "$A" -d '{"ttl":30.5}'
case_ 400 - POST '/v1/locks/x:acquire' -H "$A" -d '{"labels":{"a":1}}'
case_ 400 - POST '/v1/locks/x:acquire' -H "$A" -d '{"holder":"a\nb"}'
case_ 400 - POST '/v1/locks/x:acquire?holder=%ff%fe' -H "$A"
case_ 400 bad_lease_id POST '/v1/locks/x:acquire?lease_id=no' -H "$A"
case_ 413 - POST '/v1/locks/x:acquire' -H "$A" -H 'Content-Type: application/json' --data-binary "@$LG_TMP/big.json"
case_ 405 - GET '/v1/locks/x:acquire' -H "$A"
case_ 405 - DELETE '/v1/locks/x' -H "$A"
case_ 405 - PUT '/v1/locks' -H "$A"
case_ 404 unknown_verb POST '/v1/locks/x:explode' -H "$A"
case_ 404 - GET '/v1/nothing' -H "$A"
case_ 400 missing_lease_id POST '/v1/locks/keep:release' -H "$A"
case_ 400 missing_lease_id POST '/v1/locks/keep:refresh' -H "$A"
case_ 400 bad_lease_id POST '/v1/locks/keep:release?lease_id=%27%3B%20drop' -H "$A"
case_ 404 lease_not_found POST '/v1/locks/free:release?lease_id=0123456789abcdef' -H "$A"
case_ 409 lease_lost POST '/v1/locks/keep:refresh?lease_id=0123456789abcdef' -H "$A"
case_ 400 - GET '/v1/locks?page_size=0' -H "$A"
case_ 400 - GET '/v1/locks?page_size=5000' -H "$A"
case_ 400 bad_prefix GET '/v1/locks?prefix=%2e%2e%5c' -H "$A"
case_ 401 - POST '/v1/locks/keep:acquire'
case_ 401 - POST '/v1/locks/keep:acquire' -H 'Authorization: Basic YWxpY2U6cHc='
case_ 401 - POST '/v1/locks/keep:acquire' -H 'Authorization: Bearer '
case_ 401 - POST '/v1/locks/keep:acquire' -H 'Authorization: Bearer not.a.token'
case_ 401 - POST '/v1/locks/keep:acquire' -H "Authorization: Bearer $EXPIRED"
case_ 401 - POST '/v1/locks/keep:acquire' -H "Authorization: Bearer $NOTYET"
case_ 401 - POST '/v1/locks/keep:acquire' -H "Authorization: Bearer $WRONGKEY"
case_ 401 - POST '/v1/locks/keep:acquire' -H "Authorization: Bearer $ALGNONE"
case_ 401 - POST '/v1/locks/keep:acquire' -H "Authorization: Bearer $NOEXP"
case_ 401 - GET '/v1/locks' -H "Authorization: Bearer $EXPIRED"
case_ 403 - POST '/v1/locks/keep:forceRelease' -H "$A"
echo "$n malformed requests, each answered 4xx with a JSON error"
[ $n -ge 25 ] || lg_fail "too few cases"

# Nothing changed, and the server is healthy.
code=$(lg_curl -o "$LG_TMP/after" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/keep")
lg_eq "$code" 200 "held lock still held"
lg_eq "$(lg_json fencing_token <"$LG_TMP/after")" "$FENCE" "same lease"
lg_eq "$(lg_json holder <"$LG_TMP/after")" orig "holder unchanged"
code=$(lg_curl -o "$LG_TMP/list" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks")
lg_eq "$code" 200 "list"
lg_eq "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["locks"]))' "$LG_TMP/list")" 1 "only the one lock exists"
code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/healthz")
lg_eq "$code" 200 "healthy"
lg_stop
grep -q "$EXPIRED" "$LG_LOG" && lg_fail "a token reached the log"
echo ok
