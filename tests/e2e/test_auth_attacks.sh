#!/bin/sh
# The attack suite of issue 4 over HTTP: every forged, stale, misdirected or
# malformed token is answered 401 with its reason code and changes nothing
# (the lock held by alice keeps its holder and fencing token, no other lock
# appears).  Valid HS256, RS256 and ES256 tokens (aud array included) pass,
# and another owner cannot refresh or release a lease even with its lease_id.
. tests/e2e/lib.sh
FJ=build/tools/fake_jwks
[ -x "$FJ" ] || lg_fail "build/tools/fake_jwks is not built (make build/tools/fake_jwks)"
K=$LG_TMP/keys
mkdir -p "$K"
$FJ keygen "$K" rsa1 rsa && $FJ keygen "$K" ec1 ec && $FJ keygen "$K" rogue rsa ||
    lg_fail "keygen"
openssl pkey -in "$K/rsa1.key" -pubout -out "$K/rsa1.pub" 2>/dev/null &&
    openssl pkey -in "$K/ec1.key" -pubout -out "$K/ec1.pub" 2>/dev/null ||
    lg_fail "public keys"
ISS=https://issuer.example
AUD=lockgate-e2e
lg_start --jwt-public-keys "rsa1=$K/rsa1.pub,ec1=$K/ec1.pub" \
    --jwt-issuer "$ISS" --jwt-audience "$AUD"
out=$LG_TMP/out
now=$(date +%s)
exp=$((now + 600))
good="\"iss\":\"$ISS\",\"aud\":\"$AUD\",\"iat\":$now,\"exp\":$exp"

A="Authorization: Bearer $(lg_token alice)"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/prod/deploy:acquire?ttl=120&holder=alice-ci")
lg_eq "$code" 200 "alice acquires"
LEASE=$(lg_json lease_id <"$out")
FENCE=$(lg_json fencing_token <"$out")

# attack NAME WANT_REASONS AUTH_HEADER_VALUE: an acquire of alice's lock
# and a release with her lease_id must both be 401 with one of WANT_REASONS.
attack() {
	for req in "prod/deploy:acquire" "prod/deploy:release?lease_id=$LEASE"; do
		if [ -z "$3" ]; then
			code=$(lg_curl -o "$out" -w '%{http_code}' -X POST "$LG_URL/v1/locks/$req")
		else
			code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$3" "$LG_URL/v1/locks/$req")
		fi
		lg_eq "$code" 401 "$1: POST $req"
		got=$(sed -n 's/.*"code": *"\([a-z_]*\)".*/\1/p' "$out")
		case " $2 " in
		*" $got "*) ;;
		*) lg_fail "$1: POST $req: reason '$got', want one of '$2'" ;;
		esac
	done
}
b64() { printf '%s' "$1" | lg_b64url; }
P_HS=$(b64 "{\"sub\":\"mallory\",\"iat\":$now,\"exp\":$exp}")

for alg in none None NONE nOnE; do
	attack "alg $alg" alg_not_allowed \
	    "Authorization: Bearer $(b64 "{\"alg\":\"$alg\",\"typ\":\"JWT\"}").$P_HS."
done
attack "no alg" alg_not_allowed "Authorization: Bearer $(b64 '{"typ":"JWT"}').$P_HS.AAAA"

# Algorithm confusion: HS256 signed with the RSA public key's PEM.
T=$($FJ raw HS256 "$K/rsa1.pub" '{"alg":"HS256","typ":"JWT"}' "{\"sub\":\"mallory\",$good}")
attack "HS256 with the RSA PEM as secret" bad_signature "Authorization: Bearer $T"
T=$($FJ raw HS256 "$K/rsa1.pub" '{"alg":"HS256","kid":"rsa1"}' "{\"sub\":\"mallory\",$good}")
attack "HS256 with the RSA PEM, kid rsa1" bad_signature "Authorization: Bearer $T"
# A token for a key of another algorithm.
T=$($FJ raw ES256 "$K/ec1.key" '{"alg":"ES256","kid":"rsa1"}' "{\"sub\":\"mallory\",$good}")
attack "ES256 naming the RSA key" unknown_key "Authorization: Bearer $T"
T=$($FJ raw RS256 "$K/rsa1.key" '{"alg":"ES256","kid":"ec1"}' "{\"sub\":\"mallory\",$good}")
attack "ES256 header, RS256 signature" bad_signature "Authorization: Bearer $T"

# Times.
attack expired token_expired "Authorization: Bearer $(lg_jwt "{\"sub\":\"m\",\"iat\":$((now - 900)),\"exp\":$((now - 300))}")"
attack "nbf future" token_not_yet_valid "Authorization: Bearer $(lg_jwt "{\"sub\":\"m\",\"nbf\":$((now + 900)),\"exp\":$exp}")"
attack "iat future" token_issued_in_future "Authorization: Bearer $(lg_jwt "{\"sub\":\"m\",\"iat\":$((now + 900)),\"exp\":$((now + 1800))}")"
attack "no exp" missing_claim "Authorization: Bearer $(lg_jwt '{"sub":"m"}')"

# Issuer and audience of the public-key source.
T=$($FJ sign "$K" rsa1 "{\"sub\":\"m\",\"iss\":\"https://evil.example\",\"aud\":\"$AUD\",\"exp\":$exp}")
attack "wrong iss" wrong_issuer "Authorization: Bearer $T"
T=$($FJ sign "$K" rsa1 "{\"sub\":\"m\",\"iss\":\"$ISS\",\"aud\":\"other\",\"exp\":$exp}")
attack "wrong aud" wrong_audience "Authorization: Bearer $T"
T=$($FJ sign "$K" ec1 "{\"sub\":\"m\",\"iss\":\"$ISS\",\"aud\":[\"a\",\"b\"],\"exp\":$exp}")
attack "aud array without ours" wrong_audience "Authorization: Bearer $T"

# Tampering: another payload under the old signature; a cut signature.
T=$($FJ sign "$K" rsa1 "{\"sub\":\"m\",$good}")
P2=$(b64 "{\"sub\":\"alice\",\"admin\":true,$good}")
attack "tampered payload" bad_signature "Authorization: Bearer ${T%%.*}.$P2.${T##*.}"
S=${T##*.}
attack "truncated signature" "bad_signature malformed_token" \
    "Authorization: Bearer ${T%.*}.$(printf '%s' "$S" | cut -c1-300)"
T=$(lg_jwt "{\"sub\":\"alice\",\"iat\":$now,\"exp\":$exp}")
attack "tampered HS256" bad_signature "Authorization: Bearer ${T%%.*}.$(b64 "{\"sub\":\"alice\",\"admin\":true,\"iat\":$now,\"exp\":$exp}").${T##*.}"

# Keys: an unknown kid, another key under a known kid, another secret.
T=$($FJ sign "$K" rogue "{\"sub\":\"m\",$good}")
attack "unknown kid" unknown_key "Authorization: Bearer $T"
T=$($FJ raw RS256 "$K/rogue.key" '{"alg":"RS256","kid":"rsa1"}' "{\"sub\":\"m\",$good}")
attack "signed by another key" bad_signature "Authorization: Bearer $T"
attack "another secret" bad_signature "Authorization: Bearer $(lg_jwt "{\"sub\":\"alice\",\"exp\":$exp}" another-secret-0123456789abcdef0123456789)"

# Shape: 20 KB, garbage, empty, wrong scheme, duplicate keys, missing.
SEG=$(head -c 6826 /dev/zero | tr '\0' 'A')
BIG="$SEG.$SEG.$SEG" # 20,480 bytes
lg_eq "${#BIG}" 20480 "the 20 KB token's length"
attack "20 KB token" token_too_large "Authorization: Bearer $BIG"
# A header over what a connection may hold (SRV_CONN_MEMORY) is refused by
# libmicrohttpd itself, 431, before any of our code; the server goes on.
HUGE=$(head -c 65536 /dev/zero | tr '\0' 'A')
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $HUGE" "$LG_URL/v1/locks/prod/deploy:acquire")
lg_eq "$code" 431 "a 64 KB header"
lg_eq "$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/healthz")" 200 \
    "healthy after the 64 KB header"
attack "garbage base64" malformed_token "Authorization: Bearer !!!.@@@.###"
attack "empty token" missing_token "Authorization: Bearer "
attack "wrong scheme" bad_scheme "Authorization: Basic YWxpY2U6c2VjcmV0"
attack "token without scheme" bad_scheme "Authorization: $(lg_token alice)"
DUP=$(b64 '{"alg":"HS256","alg":"none","typ":"JWT"}')
SIG=$(printf '%s.%s' "$DUP" "$P_HS" | openssl dgst -sha256 -hmac "$LG_SECRET" -binary | lg_b64url)
attack "duplicate header keys" malformed_token "Authorization: Bearer $DUP.$P_HS.$SIG"
attack "no Authorization" missing_token ""
# forceRelease and inspect are behind the same door.
for req in "POST prod/deploy:forceRelease" "GET prod/deploy" "POST other/lock:acquire"; do
	code=$(lg_curl -o "$out" -w '%{http_code}' -X "${req% *}" \
	    -H "Authorization: Bearer $(b64 '{"alg":"none"}').$P_HS." "$LG_URL/v1/locks/${req#* }")
	lg_eq "$code" 401 "alg none: $req"
done

# Nothing changed: alice still holds prod/deploy with the same fencing
# token, and no attack created a lock.
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks/prod/deploy")
lg_eq "$code" 200 "inspect after the attacks"
lg_eq "$(lg_json owner <"$out")" alice "owner after the attacks"
lg_eq "$(lg_json fencing_token <"$out")" "$FENCE" "fencing token after the attacks"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$A" "$LG_URL/v1/locks")
lg_eq "$code" 200 "list after the attacks"
python3 - "$out" <<'PY' || lg_fail "locks after the attacks"
import json, sys
names = [l["name"] for l in json.load(open(sys.argv[1]))["locks"]]
assert names == ["prod/deploy"], names
PY

# Valid tokens of every kind are accepted (aud array containing ours).
T=$($FJ sign "$K" rsa1 "{\"sub\":\"repo:acme/app:ref:refs/heads/main\",$good}")
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "Authorization: Bearer $T" "$LG_URL/v1/locks/rs/a:acquire")
lg_eq "$code" 200 "RS256 acquire"
lg_eq "$(lg_json owner <"$out")" "repo:acme/app:ref:refs/heads/main" "RS256 owner"
T=$($FJ sign "$K" ec1 "{\"sub\":\"gl\",\"iss\":\"$ISS\",\"aud\":[\"x\",\"$AUD\"],\"exp\":$exp}")
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "Authorization: Bearer $T" "$LG_URL/v1/locks/es/a:acquire")
lg_eq "$code" 200 "ES256 acquire with an aud array"

# Another owner cannot refresh or release alice's lease, even with its id.
B="Authorization: Bearer $(lg_token bob)"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/prod/deploy:refresh?lease_id=$LEASE")
lg_eq "$code" 403 "refresh by bob with alice's lease_id"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/prod/deploy:release?lease_id=$LEASE")
lg_eq "$code" 403 "release by bob with alice's lease_id"
# Only admin may force-release (no policy).
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/prod/deploy:forceRelease")
lg_eq "$code" 403 "forceRelease without admin"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/prod/deploy:release?lease_id=$LEASE")
lg_eq "$code" 204 "alice releases"

# No token, secret or key reached the log.
grep -q "$P_HS" "$LG_LOG" && lg_fail "a token reached the log"
grep -q "$LG_SECRET" "$LG_LOG" && lg_fail "the secret reached the log"
lg_stop
echo ok
