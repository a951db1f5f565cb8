#!/bin/sh
# Policy over HTTP: a GitHub-style policy lets acme's main branch take
# prod/ locks and others only read; 403 names what was missing; SIGHUP
# reloads the policy without a restart (a broken one is refused and the
# old one stays); only admin may force-release; `lockgate token` mints a
# usable token; LOCKGATE_PUBLIC_READ opens reads (never a lease_id) and
# nothing else, and without it reads need a token; --check refuses a
# broken policy with a clear message.
. tests/e2e/lib.sh
out=$LG_TMP/out
POL=$LG_TMP/policy.json
cat >"$POL" <<'JSON'
{"rules": [
  {"name": "acme main deploys prod",
   "match": {"repository_owner": "acme", "ref": "refs/heads/main"},
   "locks": ["prod/**"], "actions": ["acquire"]},
  {"name": "acme reads everything", "match": {"repository_owner": "acme"},
   "locks": ["**"], "actions": ["read"]},
  {"name": "ops", "match": {"sub": "ops-*", "admin": true},
   "locks": ["**"], "actions": ["admin"]}
]}
JSON
lg_start --policy "$POL" --display-claims repository_owner,ref,run_id
now=$(date +%s)
exp=$((now + 600))
MAIN="Authorization: Bearer $(lg_jwt "{\"sub\":\"repo:acme/app:ref:refs/heads/main\",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/main\",\"run_id\":\"22259804324\",\"exp\":$exp}")"
FEAT="Authorization: Bearer $(lg_jwt "{\"sub\":\"repo:acme/app:ref:refs/heads/feat\",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/feat\",\"exp\":$exp}")"
EVIL="Authorization: Bearer $(lg_jwt "{\"sub\":\"repo:evil/app\",\"repository_owner\":\"evil\",\"ref\":\"refs/heads/main\",\"admin\":true,\"exp\":$exp}")"
OPS="Authorization: Bearer $(lg_jwt "{\"sub\":\"ops-carol\",\"admin\":true,\"exp\":$exp}")"
# "admin": "true" is a string, not the boolean the ops rule asks for.
OPSSTR="Authorization: Bearer $(lg_jwt "{\"sub\":\"ops-dan\",\"admin\":\"true\",\"exp\":$exp}")"
# acme's main branch too, so it may acquire prod/, and "admin": true, which
# under a policy is only a claim: the ops rule does not match its sub.
MAINADM="Authorization: Bearer $(lg_jwt "{\"sub\":\"repo:acme/tools:ref:refs/heads/main\",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/main\",\"admin\":true,\"exp\":$exp}")"

post() { # HEADER PATH -> code, body in $out
	lg_curl -o "$out" -w '%{http_code}' -X POST -H "$1" "$LG_URL/v1/locks/$2"
}
get() {
	lg_curl -o "$out" -w '%{http_code}' -H "$1" "$LG_URL/v1/locks/$2"
}

lg_eq "$(post "$MAIN" 'prod/eu/deploy:acquire?ttl=60')" 200 "main acquires prod/eu/deploy"
LEASE=$(lg_json lease_id <"$out")
lg_eq "$(lg_json claims.run_id <"$out")" 22259804324 "display claim run_id (a string) on the lease"
lg_eq "$(post "$FEAT" 'prod/other:acquire')" 403 "a feature branch may not acquire prod/"
lg_eq "$(lg_json error.code <"$out")" forbidden "403 code"
lg_json error.message <"$out" | grep -q 'acquire' || lg_fail "403 message does not say what was missing"
lg_json error.message <"$out" | grep -q 'prod/other' || lg_fail "403 message does not name the lock"
lg_eq "$(post "$MAIN" 'staging/x:acquire')" 403 "main may not acquire outside prod/"
lg_eq "$(get "$FEAT" 'prod/eu/deploy')" 200 "acme may read"
lg_eq "$(get "$EVIL" 'prod/eu/deploy')" 403 "another org may not read"
lg_eq "$(post "$EVIL" 'prod/eu/deploy:forceRelease')" 403 "admin:true from another org is not admin"
lg_eq "$(post "$MAIN" 'prod/eu/deploy:forceRelease')" 403 "forceRelease needs the admin action"
lg_eq "$(post "$OPSSTR" 'prod/eu/deploy:forceRelease')" 403 "\"admin\": \"true\" (a string) is not the rule's boolean"

# Under a policy the "admin" claim counts for nothing by itself: not to
# refresh or release another owner's lease, not in whoami; the policy's
# admin action does both.
lg_eq "$(post "$MAINADM" "prod/eu/deploy:refresh?lease_id=$LEASE&ttl=3600")" 403 "admin claim without the policy's admin refreshes another's lease"
lg_eq "$(post "$MAINADM" "prod/eu/deploy:release?lease_id=$LEASE")" 403 "admin claim without the policy's admin releases another's lease"
lg_eq "$(get "$MAIN" 'prod/eu/deploy')" 200 "the lease is still there"
lg_eq "$(lg_json ttl <"$out")" 60 "and still has its own ttl"
whoami() { lg_curl -o "$out" -w '%{http_code}' -H "$1" "$LG_URL/v1/whoami"; }
lg_eq "$(whoami "$MAINADM")" 200 "whoami, admin claim only"
lg_eq "$(lg_json admin <"$out")" false "whoami: the claim alone is not admin"
lg_eq "$(whoami "$OPS")" 200 "whoami, the policy's admin"
lg_eq "$(lg_json admin <"$out")" true "whoami: the policy's admin"
lg_eq "$(post "$MAIN" 'prod/eu/held:acquire?ttl=60')" 200 "main acquires prod/eu/held"
HELD=$(lg_json lease_id <"$out")
lg_eq "$(post "$OPS" "prod/eu/held:release?lease_id=$HELD")" 204 "the policy's admin releases another's lease"

# Reload: a new policy takes effect on SIGHUP.
cat >"$POL" <<'JSON'
{"rules": [
  {"name": "any acme ref deploys prod", "match": {"repository_owner": "acme"},
   "locks": ["prod/**"], "actions": ["acquire"]}
]}
JSON
kill -HUP "$LG_PID"
i=0
while [ $i -lt 100 ]; do
	grep -q 'reloaded keys and policy' "$LG_LOG" && break
	sleep 0.05
	i=$((i + 1))
done
grep -q 'reloaded keys and policy' "$LG_LOG" || lg_fail "no reload after SIGHUP"
lg_eq "$(post "$FEAT" 'prod/other:acquire')" 200 "after reload a feature branch may acquire prod/"
lg_eq "$(post "$OPS" 'prod/eu/deploy:forceRelease')" 403 "after reload ops is no longer admin"

# A broken policy on reload is refused; the last good one stays.
echo '{"rules": [{"locks": "prod/**"}]}' >"$POL"
kill -HUP "$LG_PID"
i=0
while [ $i -lt 100 ]; do
	grep -q 'reload failed' "$LG_LOG" && break
	sleep 0.05
	i=$((i + 1))
done
grep -q 'reload failed' "$LG_LOG" || lg_fail "no failed reload logged"
lg_eq "$(post "$FEAT" 'prod/third:acquire')" 200 "the last good policy stays"
lg_stop

# Without a policy only admin may force-release; lockgate token mints.
printf '%s\n' "$LG_SECRET" >"$LG_TMP/secret"
lg_start
ADM=$(build/lockgate token --secret-file "$LG_TMP/secret" --sub ops --ttl 10m --admin) ||
    lg_fail "lockgate token"
USR=$(build/lockgate token --secret-file "$LG_TMP/secret" --sub dev --claim team=blue) ||
    lg_fail "lockgate token"
lg_eq "$(post "Authorization: Bearer $USR" 'x:acquire')" 200 "minted token acquires"
lg_eq "$(lg_json owner <"$out")" dev "minted token's owner"
lg_eq "$(post "Authorization: Bearer $USR" 'x:forceRelease')" 403 "forceRelease without admin"
lg_eq "$(post "Authorization: Bearer $ADM" 'x:forceRelease')" 204 "forceRelease by admin"
build/lockgate token --sub x >/dev/null 2>&1 && lg_fail "token without a secret file"
lg_stop

# Reads need a token by default; LOCKGATE_PUBLIC_READ=true lets anyone
# list and inspect, never shows a lease_id, and opens nothing else.
anon() { # METHOD PATH -> code, body in $out; no Authorization header
	lg_curl -o "$out" -w '%{http_code}' -X "$1" "$LG_URL/v1/locks$2"
}
no_lease_id() { # WHAT: $out holds no lease_id
	grep -q 'lease_id\|LEASE_ID' "$out" && lg_fail "$1 shows a lease_id: $(cat "$out")"
	grep -qF "$PUB_LEASE" "$out" && lg_fail "$1 shows the lease's id: $(cat "$out")"
	return 0
}
CAROL="Authorization: Bearer $(lg_token carol)"
for public in false true; do
	LG_ENV="LOCKGATE_PUBLIC_READ=$public"
	lg_start
	LG_ENV=
	lg_eq "$(post "$CAROL" 'pub/one:acquire?ttl=60&holder=carol-ci')" 200 "carol acquires (public read $public)"
	PUB_LEASE=$(lg_json lease_id <"$out")
	[ -n "$PUB_LEASE" ] || lg_fail "no lease_id in the acquire answer"
	if [ "$public" = true ]; then
		# Under pub/ only: a durable store still holds the locks the
		# earlier servers of this test took.
		lg_eq "$(anon GET '?prefix=pub/')" 200 "list without a token, public read"
		lg_eq "$(python3 -c 'import json,sys; print([l["name"] for l in json.load(open(sys.argv[1]))["locks"]])' "$out")" \
		    "['pub/one']" "the list shows the held lock"
		no_lease_id "an anonymous list"
		lg_eq "$(anon GET '/pub/one')" 200 "inspect without a token, public read"
		lg_eq "$(lg_json owner <"$out")" carol "anonymous inspect shows the owner"
		lg_eq "$(lg_json holder <"$out")" carol-ci "anonymous inspect shows the holder"
		no_lease_id "an anonymous inspect"
		lg_eq "$(anon GET '/pub/one?format=env')" 200 "inspect as env lines, public read"
		no_lease_id "an anonymous env inspect"
		lg_eq "$(get "Authorization: Bearer not.a.token" 'pub/one')" 401 \
		    "public read still checks a token that is sent"
	else
		lg_eq "$(anon GET '')" 401 "list without a token, by default"
		lg_eq "$(lg_json error.code <"$out")" missing_token "list: 401 code"
		lg_eq "$(anon GET '/pub/one')" 401 "inspect without a token, by default"
		no_lease_id "a refused inspect"
	fi
	lg_eq "$(anon POST '/pub/two:acquire?ttl=60')" 401 "acquire without a token (public read $public)"
	lg_eq "$(anon POST "/pub/one:refresh?lease_id=$PUB_LEASE")" 401 "refresh without a token (public read $public)"
	lg_eq "$(anon POST "/pub/one:release?lease_id=$PUB_LEASE")" 401 "release without a token (public read $public)"
	lg_eq "$(anon POST '/pub/one:forceRelease')" 401 "forceRelease without a token (public read $public)"
	lg_eq "$(get "$CAROL" 'pub/one')" 200 "still held after the anonymous writes (public read $public)"
	lg_eq "$(get "$CAROL" 'pub/two')" 404 "no lock taken anonymously (public read $public)"
	lg_eq "$(post "$CAROL" "pub/one:release?lease_id=$PUB_LEASE")" 204 "carol releases (public read $public)"
	lg_stop
	grep -qF "$PUB_LEASE" "$LG_LOG" && lg_fail "a lease_id reached the log"
done

# A waiting acquire is allowed again when it would be granted, not only
# when it arrived: a policy reloaded meanwhile, or a token that expired
# meanwhile, ends the wait with 403 or 401 and the lock stays free.
cat >"$POL" <<'JSON'
{"rules": [{"name": "team", "match": {"sub": ["alice", "bob", "dave"]},
            "locks": ["w/**"], "actions": ["acquire"]}]}
JSON
lg_start --policy "$POL" --jwt-leeway 0
ALICE="Authorization: Bearer $(lg_token alice)"
BOB="Authorization: Bearer $(lg_token bob)"
now=$(date +%s)
DAVE="Authorization: Bearer $(lg_jwt "{\"sub\":\"dave\",\"exp\":$((now + 3))}")"
lg_eq "$(post "$ALICE" 'w/one:acquire?ttl=60')" 200 "alice holds w/one"
L1=$(lg_json lease_id <"$out")
lg_eq "$(post "$ALICE" 'w/two:acquire?ttl=60')" 200 "alice holds w/two"
L2=$(lg_json lease_id <"$out")
curl -sS --max-time 30 -o "$LG_TMP/bob" -w '%{http_code}' -X POST -H "$BOB" \
    "$LG_URL/v1/locks/w/one:acquire?ttl=600&wait=20" >"$LG_TMP/bob.code" &
bobpid=$!
curl -sS --max-time 30 -o "$LG_TMP/dave" -w '%{http_code}' -X POST -H "$DAVE" \
    "$LG_URL/v1/locks/w/two:acquire?ttl=600&wait=20" >"$LG_TMP/dave.code" &
davepid=$!
sleep 0.5
cat >"$POL" <<'JSON'
{"rules": [{"name": "team", "match": {"sub": ["alice", "dave"]},
            "locks": ["w/**"], "actions": ["acquire"]}]}
JSON
kill -HUP "$LG_PID"
i=0
while [ $i -lt 100 ]; do
	grep -q 'reloaded keys and policy' "$LG_LOG" && break
	sleep 0.05
	i=$((i + 1))
done
lg_eq "$(post "$BOB" 'w/three:acquire')" 403 "bob is out of the reloaded policy"
lg_eq "$(post "$ALICE" "w/one:release?lease_id=$L1")" 204 "alice releases w/one"
wait $bobpid
lg_eq "$(cat "$LG_TMP/bob.code")" 403 "bob's wait, begun under the old policy"
lg_eq "$(lg_json error.code <"$LG_TMP/bob")" forbidden "bob's wait: 403 code"
lg_eq "$(get "$ALICE" 'w/one')" 404 "w/one is free, not granted to bob"
# dave's token runs out (exp + leeway 0) before w/two is released.
while [ "$(date +%s)" -le $((now + 3)) ]; do sleep 0.2; done
sleep 1
lg_eq "$(post "$ALICE" "w/two:release?lease_id=$L2")" 204 "alice releases w/two"
wait $davepid
lg_eq "$(cat "$LG_TMP/dave.code")" 401 "dave's wait outlived his token"
lg_eq "$(lg_json error.code <"$LG_TMP/dave")" token_expired "dave's wait: 401 code"
lg_eq "$(get "$ALICE" 'w/two')" 404 "w/two is free, not granted to dave"
lg_stop

# identity.md's recipe as written: GitHub OIDC tokens (a JWKS on loopback)
# owned by "repository", the HS256 secret for people, and the doc's own
# policy.  The on-call admin minted with `lockgate token --sub ops-anna
# --admin` is owned by its sub and may force-release; a feature branch
# may not take prod/ (issue 26 items 1 and 5).
FJ=build/tools/fake_jwks
[ -x "$FJ" ] || lg_fail "build/tools/fake_jwks is not built (make build/tools/fake_jwks)"
K=$LG_TMP/jwks
mkdir -p "$K"
$FJ keygen "$K" k1 rsa || lg_fail keygen
$FJ serve "$K" "$LG_TMP/port" &
LG_PIDS="$LG_PIDS $!" # the harness's EXIT trap stops it by PID
i=0
while [ ! -s "$LG_TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$LG_TMP/port" ] || lg_fail "fake_jwks did not start"
ISS=https://token.actions.githubusercontent.com
AUD=https://lock.example.com
# The first ```json block of identity.md is its example policy.
awk '/^```json$/ { f = 1; next } /^```$/ { if (f) exit } f' docs/identity.md >"$POL"
grep -q '"on-call"' "$POL" || lg_fail "identity.md's example policy not found"
printf '%s\n' "$LG_SECRET" >"$LG_TMP/secret"
lg_start --jwks-url "http://127.0.0.1:$(cat "$LG_TMP/port")/jwks" \
    --jwt-issuer "$ISS" --jwt-audience "$AUD" --owner-claim repository \
    --policy "$POL"
gh() { # REF [MORE_CLAIMS [EVENT]]: a GitHub-style token of acme/app on REF
	$FJ sign "$K" k1 "{\"sub\":\"repo:acme/app:ref:$1\",\"repository\":\"acme/app\",\"repository_owner\":\"acme\",\"ref\":\"$1\",\"event_name\":\"${3:-push}\",\"iss\":\"$ISS\",\"aud\":\"$AUD\",\"exp\":$(($(date +%s) + 600))${2:-}}" ||
	    lg_fail "sign"
}
GHMAIN="Authorization: Bearer $(gh refs/heads/main)"
GHFEAT="Authorization: Bearer $(gh refs/heads/feat)"
# A fork's pull request run by pull_request_target carries main's ref.
GHPRT="Authorization: Bearer $(gh refs/heads/main '' pull_request_target)"
ANNA="Authorization: Bearer $(build/lockgate token --secret-file "$LG_TMP/secret" --sub ops-anna --admin)" ||
    lg_fail "lockgate token"
lg_eq "$(post "$GHFEAT" 'prod/deploy:acquire?ttl=60')" 403 "recipe: a feature branch may not take prod/deploy"
lg_json error.message <"$out" | grep -q '"prod/\*\*" decide' || lg_fail "the 403 does not name the deciding glob"
lg_eq "$(post "$GHFEAT" 'staging/web:acquire?ttl=60')" 200 "recipe: a feature branch takes staging/web"
lg_eq "$(post "$GHPRT" 'prod/deploy:acquire?ttl=60')" 403 "recipe: a pull_request_target run on main may not take prod/deploy"
lg_eq "$(post "$GHMAIN" 'prod/deploy:acquire?ttl=60')" 200 "recipe: main takes prod/deploy"
lg_eq "$(lg_json owner <"$out")" acme/app "recipe: the CI token's owner is its repository"
lg_eq "$(get "$GHFEAT" 'prod/deploy')" 200 "recipe: a feature branch reads prod/deploy"
lg_eq "$(whoami "$ANNA")" 200 "recipe: ops-anna's minted token is accepted"
lg_eq "$(lg_json owner <"$out")" ops-anna "recipe: an HS256 token without repository is owned by its sub"
lg_eq "$(lg_json admin <"$out")" true "recipe: ops-anna is the policy's admin"
lg_eq "$(post "$ANNA" 'prod/deploy:forceRelease')" 204 "recipe: the on-call admin force-releases prod/deploy"
lg_eq "$(post "Authorization: Bearer $(gh refs/heads/main ',"admin":true')" 'staging/web:forceRelease')" 403 \
    "recipe: a CI token claiming admin is not on call"
NOREPO="Authorization: Bearer $($FJ sign "$K" k1 "{\"sub\":\"ops-anna\",\"admin\":true,\"iss\":\"$ISS\",\"aud\":\"$AUD\",\"exp\":$(($(date +%s) + 600))}")"
lg_eq "$(whoami "$NOREPO")" 401 "recipe: a JWKS token without repository does not fall back to sub"
lg_eq "$(lg_json error.code <"$out")" missing_claim "recipe: 401 code"
lg_stop

# --check refuses a broken policy and says why.
echo '{"rules": [{"locks": ["a"], "actions": ["write"]}]}' >"$POL"
LOCKGATE_JWT_SECRET=$LG_SECRET build/lockgate --check --store mem:// --policy "$POL" \
    >"$out" 2>&1 && lg_fail "--check accepted a broken policy"
grep -q 'actions\[0\]' "$out" || { cat "$out" >&2; lg_fail "--check does not say what is wrong"; }
echo ok
