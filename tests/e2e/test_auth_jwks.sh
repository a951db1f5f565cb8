#!/bin/sh
# A JWKS issuer (tests/tools/fake_jwks on loopback) as the daemon's key
# source: GitHub-style RS256 tokens verify; a key that appears after start
# is fetched on first sight of its kid; further unknown kids cannot make
# the daemon hammer the issuer; an issuer failing, then gone, does not stop
# tokens of cached keys.  Runs on mem:// (requests are event-loop tasks)
# and, from tests/run.sh, on file:// (storage workers): both wait for the
# re-fetch a new kid asks for.
. tests/e2e/lib.sh
FJ=build/tools/fake_jwks
[ -x "$FJ" ] || lg_fail "build/tools/fake_jwks is not built (make build/tools/fake_jwks)"
K=$LG_TMP/jwks
mkdir -p "$K"
$FJ keygen "$K" k1 rsa || lg_fail keygen
mkdir -p "$LG_TMP/later"
$FJ keygen "$LG_TMP/later" k2 ec && $FJ keygen "$LG_TMP/later" k3 rsa || lg_fail keygen
$FJ serve "$K" "$LG_TMP/port" &
FJ_PID=$!
LG_PIDS="$LG_PIDS $FJ_PID" # the harness's EXIT trap stops it by PID
i=0
while [ ! -s "$LG_TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$LG_TMP/port" ] || lg_fail "fake_jwks did not start"
JWKS=http://127.0.0.1:$(cat "$LG_TMP/port")/jwks
ISS=https://token.actions.githubusercontent.com
AUD=https://github.com/acme
# The issuer signs for any repository that asks: the policy says whose
# tokens count (lockgate refuses a JWKS without one).
cat >"$LG_TMP/policy.json" <<'JSON'
{"rules": [{"name": "acme's repositories", "match": {"repository": "acme/*"},
            "locks": ["**"], "actions": ["read", "acquire"]}]}
JSON
lg_start --jwks-url "$JWKS" --jwt-issuer "$ISS" --jwt-audience "$AUD" \
    --owner-claim repository --display-claims run_id,actor \
    --policy "$LG_TMP/policy.json"
out=$LG_TMP/out
now=$(date +%s)
claims="\"sub\":\"repo:acme/app:ref:refs/heads/main\",\"repository\":\"acme/app\",\"run_id\":\"22259804324\",\"actor\":\"octocat\",\"iss\":\"$ISS\",\"aud\":\"$AUD\",\"nbf\":$((now - 300)),\"iat\":$now,\"exp\":$((now + 600))"
fetches() { grep -c 'GET /jwks' "$K/requests"; }
try() { # DIR KID LOCK -> http code
	t=$($FJ sign "$1" "$2" "{$claims}") || lg_fail "sign $2"
	lg_curl -o "$out" -w '%{http_code}' -X POST -H "Authorization: Bearer $t" \
	    "$LG_URL/v1/locks/$3:acquire?ttl=30"
}

lg_eq "$(fetches)" 1 "one fetch at start"
lg_eq "$(try "$K" k1 a)" 200 "k1 token"
lg_eq "$(lg_json owner <"$out")" acme/app "owner from --owner-claim repository"
lg_eq "$(lg_json claims.actor <"$out")" octocat "display claim"
lg_eq "$(fetches)" 1 "known kid: no fetch"
t=$($FJ sign "$K" k1 "{$(echo "$claims" | sed 's|acme/app|stranger/app|g')}") || lg_fail "sign k1"
lg_eq "$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "Authorization: Bearer $t" \
    "$LG_URL/v1/locks/a2:acquire?ttl=30")" 403 "the issuer's token for another repository"

# Rotation: k2 is published; the first token with it makes one fetch.
cp "$LG_TMP/later/k2.jwk" "$K/"
lg_eq "$(try "$LG_TMP/later" k2 b)" 200 "k2 token after rotation"
lg_eq "$(fetches)" 2 "one fetch for the new kid"
# k3 appears too, but within the minute: no fetch, unknown_key.
cp "$LG_TMP/later/k3.jwk" "$K/"
lg_eq "$(try "$LG_TMP/later" k3 c)" 401 "k3 within the re-fetch interval"
lg_eq "$(lg_json error.code <"$out")" unknown_key "k3 reason"
lg_eq "$(try "$LG_TMP/later" k3 c)" 401 "k3 again"
lg_eq "$(fetches)" 2 "unknown kids do not hammer the issuer"

# The issuer fails, then disappears: cached keys keep working.
touch "$K/fail"
lg_eq "$(try "$K" k1 d)" 200 "k1 while the issuer fails"
kill -TERM "$FJ_PID" && wait "$FJ_PID"
LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $FJ_PID\b//")
lg_eq "$(try "$LG_TMP/later" k2 e)" 200 "k2 with the issuer gone"
lg_stop
echo ok
