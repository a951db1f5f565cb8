#!/bin/sh
# lockctl says what it is doing, under dash: one stderr line when a wait
# starts (whom for, until when) and one when the lock is got, none with
# --quiet; whoami; force-release (a reason required, only the lease seen is
# removed: the fencing token goes with the request); list with a header,
# purpose and state columns, --json and --all; a URL that is not lockgate
# (python3 -m http.server) exits 76; a GitHub Actions job without
# `id-token: write` is told so.
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/lockctl
mkdir "$T" "$T/tmp" "$T/bin" "$T/www"
export TMPDIR="$T/tmp"
# Times on lockctl's lines are local: pin the zone, so they can be checked
# against the server's UTC times.
export TZ=UTC
lg_start
export LOCKGATE_URL="$LG_URL"
LOCKGATE_TOKEN=$(lg_token ci-say)
export LOCKGATE_TOKEN
ADMIN=$(lg_token ops-anna admin)
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID \
    LOCKGATE_FENCING_TOKEN ACTIONS_ID_TOKEN_REQUEST_URL \
    ACTIONS_ID_TOKEN_REQUEST_TOKEN GITHUB_ACTIONS GITHUB_RUN_ID CI_JOB_URL \
    2>/dev/null

st() { # run lockctl, leave its status in $rc, stdout in $T/out, stderr in $T/err
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
}

# wait_grep PATTERN FILE: wait (at most 10 s) until FILE holds PATTERN.
wait_grep() {
	i=0
	while ! grep -q -- "$1" "$2" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q -- "$1" "$2" || lg_fail "never saw '$1' in $2: $(cat "$2")"
}

# --- waiting: one line when it starts, one when it gets the lock
eval "$($LC acquire e2e/say --ttl 30 --holder 'job 1' --purpose 'the first')"
first_lease=$LOCKGATE_LEASE_ID
until=$($LC status e2e/say | sed -n "s/^LOCKGATE_EXPIRES_AT='[0-9-]*T\([0-9:]*\)\..*/\1/p")
[ -n "$until" ] || lg_fail "status shows no expires_at"
$LC run e2e/say --ttl 5 --wait 30 -- true >"$T/wait.out" 2>"$T/wait.err" &
runner=$!
wait_grep 'waiting for' "$T/wait.err"
lg_eq "$(cat "$T/wait.err")" \
    "lockctl: waiting for e2e/say: held by ci-say (job 1) until $until (up to 30 s)" \
    "the line when the wait starts"
kill -0 $runner 2>/dev/null || lg_fail "run ended before the lock was free"
LOCKGATE_LEASE_ID=$first_lease $LC release e2e/say || lg_fail "release of the first lease"
wait $runner
lg_eq "$?" 0 "run after the wait"
lg_eq "$(wc -l <"$T/wait.err" | tr -d ' ')" 2 "two lines on stderr for a wait"
sed -n 2p "$T/wait.err" | grep -q '^lockctl: got e2e/say after [0-9]* s (fencing token [0-9]*)$' ||
	lg_fail "the line when the lock is got: $(cat "$T/wait.err")"

# --quiet: the same wait says nothing, over several polls (each of 1 s)
eval "$($LC acquire e2e/say --ttl 30 --holder 'job 2')"
LOCKCTL_MAX_POLL=1 $LC run e2e/say --quiet --ttl 5 --wait 30 -- true \
    >"$T/q.out" 2>"$T/q.err" &
runner=$!
sleep 2.5
kill -0 $runner 2>/dev/null || lg_fail "the quiet run did not wait"
$LC release || lg_fail "release for the quiet run"
wait $runner
lg_eq "$?" 0 "quiet run after a wait"
[ -s "$T/q.err" ] && lg_fail "--quiet printed: $(cat "$T/q.err")"
# No wait, no lines: a lock that is free is taken in silence.
st $LC run e2e/say --ttl 5 --wait 30 -- true
lg_eq "$rc" 0 "run of a free lock"
[ -s "$T/err" ] && lg_fail "a free lock got a progress line: $(cat "$T/err")"
unset LOCKGATE_LOCK LOCKGATE_LEASE_ID LOCKGATE_FENCING_TOKEN

# --- whoami
st $LC whoami
lg_eq "$rc" 0 "whoami"
grep -qx "LOCKGATE_OWNER='ci-say'" "$T/out" || lg_fail "whoami owner: $(cat "$T/out")"
grep -qx "LOCKGATE_ADMIN='false'" "$T/out" || lg_fail "whoami admin: $(cat "$T/out")"
st env LOCKGATE_TOKEN="$ADMIN" $LC whoami
grep -qx "LOCKGATE_ADMIN='true'" "$T/out" || lg_fail "whoami of an admin: $(cat "$T/out")"
st env LOCKGATE_TOKEN=not.a.token $LC whoami
lg_eq "$rc" 77 "whoami with a bad token"

# --- list: header, purpose, state; --json; --all
eval "$($LC acquire e2e/list/a --ttl 30 --holder 'job a' --purpose 'deploy 1.2')"
lease_a=$LOCKGATE_LEASE_ID
eval "$($LC acquire e2e/list/b --ttl 2 --holder 'job b')"
st $LC list e2e/list/
lg_eq "$rc" 0 "list"
lg_eq "$(sed -n 1p "$T/out")" "$(printf 'NAME\tOWNER\tHOLDER\tPURPOSE\tEXPIRES_AT\tSTATE')" "list header"
grep -q "^e2e/list/a	ci-say	job a	deploy 1.2	20[0-9-]*T[0-9:.]*Z	held\$" "$T/out" ||
	lg_fail "list line of a: $(cat "$T/out")"
grep -q "^e2e/list/b	ci-say	job b	-	20[0-9-]*T[0-9:.]*Z	held\$" "$T/out" ||
	lg_fail "list line of b (no purpose): $(cat "$T/out")"
st $LC list e2e/list/ --json
lg_eq "$rc" 0 "list --json"
python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).readline())
names = sorted(l["name"] for l in d["locks"])
assert names == ["e2e/list/a", "e2e/list/b"], names
assert d["locks"][0]["purpose"] == "deploy 1.2", d
assert all("lease_id" not in l for l in d["locks"])
' "$T/out" || lg_fail "list --json: $(cat "$T/out")"
sleep 4.2 # b expires (ttl, the 1 s margin, a storage Date's 1 s resolution)
st $LC list e2e/list/
grep -q '^e2e/list/b' "$T/out" && lg_fail "an expired lock listed without --all: $(cat "$T/out")"
st $LC list e2e/list/ --all
lg_eq "$rc" 0 "list --all"
grep -q "^e2e/list/b	ci-say	job b	-	.*	expired\$" "$T/out" ||
	lg_fail "list --all shows the expired lock: $(cat "$T/out")"
lg_eq "$(wc -l <"$T/out" | tr -d ' ')" 3 "list --all: a header and two locks"
st $LC list 'bad prefix!'
lg_eq "$rc" 64 "list with a bad prefix"

# --- force-release
# lockctl's curl, wrapped to record the URLs it asks for
real_curl=$(command -v curl)
cat >"$T/bin/curl" <<EOF
#!/bin/sh
for a in "\$@"; do
	case \$a in http*) printf '%s\n' "\$a" >>"$T/urls" ;; esac
done
exec "$real_curl" "\$@"
EOF
chmod +x "$T/bin/curl"
tok_a=$($LC status e2e/list/a | sed -n "s/^LOCKGATE_FENCING_TOKEN='\([0-9]*\)'/\1/p")
[ -n "$tok_a" ] || lg_fail "no fencing token for e2e/list/a"
st $LC force-release e2e/list/a --reason 'not allowed'
lg_eq "$rc" 77 "force-release without admin: $(cat "$T/err")"
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/list/a </dev/null
lg_eq "$rc" 64 "force-release without a reason, not on a terminal"
grep -q -- '--reason' "$T/err" || lg_fail "the refusal names --reason: $(cat "$T/err")"
st $LC status e2e/list/a
lg_eq "$rc" 0 "still held after a refused force-release"
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/list/a --reason 'stuck job' \
    --fencing-token $((tok_a + 1000))
lg_eq "$rc" 73 "force-release of a lease that is not the one seen"
grep -q 'fencing_token_mismatch' "$T/err" || lg_fail "mismatch named: $(cat "$T/err")"
st $LC status e2e/list/a
lg_eq "$rc" 0 "a mismatched force-release removes nothing"
: >"$T/urls"
st env PATH="$T/bin:$PATH" LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/list/a \
    --reason 'stuck job, see #42'
lg_eq "$rc" 0 "force-release: $(cat "$T/err")"
grep -q "^lockctl: force-released e2e/list/a (held by ci-say (job a), fencing token $tok_a)\$" "$T/err" ||
	lg_fail "force-release says what it removed: $(cat "$T/err")"
grep -q "/v1/locks/e2e/list/a:forceRelease?fencing_token=$tok_a&reason=stuck%20job%2C%20see%20%2342\$" \
    "$T/urls" || lg_fail "force-release sends the token it saw: $(cat "$T/urls")"
grep '"event":"forced"' "$LG_LOG" | grep '"actor":"ops-anna"' |
    grep -q '"reason":"stuck job, see #42"' || lg_fail "the server logs the reason"
st $LC status e2e/list/a
lg_eq "$rc" 1 "free after force-release"
LOCKGATE_LEASE_ID=$lease_a st $LC release e2e/list/a
lg_eq "$rc" 75 "the force-released holder learns it lost the lease"
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/list/a --reason again
lg_eq "$rc" 1 "force-release of a free lock"
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/list/a --reason again --fencing-token 0x1
lg_eq "$rc" 64 "force-release with a bad --fencing-token"

# --- a URL that answers, but is not lockgate: a static web server
lg_serve "$T/www.log" 's/^Serving HTTP on .* port \([0-9]*\).*/\1/p' \
    python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
www_port=$LG_SERVE_PORT
for cmd in "run e2e/www -- true" "acquire e2e/www" "status e2e/www" "list" \
    "whoami" "release e2e/www --lease-id abcdefgh" "refresh e2e/www --lease-id abcdefgh"; do
	# shellcheck disable=SC2086
	st env LOCKGATE_URL="http://127.0.0.1:$www_port" $LC $cmd
	lg_eq "$rc" 76 "lockctl $cmd against a static web server: $(cat "$T/err")"
	grep -q "not lockgate's" "$T/err" || lg_fail "lockctl $cmd says why: $(cat "$T/err")"
done

# --- GitHub Actions without `id-token: write`
st env -u LOCKGATE_TOKEN GITHUB_ACTIONS=true $LC run e2e/gha -- true
lg_eq "$rc" 77 "GitHub Actions job without id-token: write"
grep -q "permissions: id-token: write" "$T/err" ||
	lg_fail "says to add id-token: write: $(cat "$T/err")"
lg_eq "$(wc -l <"$T/err" | tr -d ' ')" 1 "one line for a missing id-token permission"
st env -u LOCKGATE_TOKEN $LC status e2e/gha
lg_eq "$rc" 77 "no token outside GitHub Actions"
grep -q "id-token" "$T/err" && lg_fail "outside GitHub, no word of id-token: $(cat "$T/err")"
grep -q "found no token" "$T/err" || lg_fail "no token: says lockctl found none: $(cat "$T/err")"

[ -z "$(ls -A "$T/tmp")" ] || lg_fail "lockctl left files behind: $(ls -A "$T/tmp")"
lg_stop
echo ok
