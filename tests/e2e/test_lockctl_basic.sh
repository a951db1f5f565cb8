#!/bin/sh
# lockctl against a real lockgate, under dash: exit statuses passed through,
# the exported lease, acquire/refresh/release/status/list, eval-safe answers
# for hostile values, error statuses, GitHub OIDC, no token in `ps`, and a
# PATH with no jq and no bash.
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"

# Files of this test live in the harness's temporary directory (removed on
# exit); lockctl's own temporary directories land in $T/tmp, to check that
# it removes them.
T=$LG_TMP/lockctl
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
export LOCKGATE_URL="$LG_URL"
LOCKGATE_TOKEN=$(lg_token ci-basic)
export LOCKGATE_TOKEN
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID \
    LOCKGATE_FENCING_TOKEN ACTIONS_ID_TOKEN_REQUEST_URL \
    ACTIONS_ID_TOKEN_REQUEST_TOKEN GITHUB_RUN_ID CI_JOB_URL 2>/dev/null

st() { # run lockctl, print nothing, leave its status in $rc
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
}

# --- GET /lockctl serves this very script, without a token, and it runs
code=$(curl -sS --max-time 10 -o "$T/served" -w '%{http_code}' "$LG_URL/lockctl")
lg_eq "$code" 200 "GET /lockctl without a token"
cmp -s "$T/served" client/lockctl || lg_fail "GET /lockctl is not client/lockctl"
sed -n 2p "$T/served" | grep -q '^# lockctl [0-9][0-9.]*:' ||
	lg_fail "no version comment on line 2 of the served script"
dash "$T/served" run e2e/served --ttl 3 -- true
lg_eq "$?" 0 "the served script runs"

# --- exit status passed through, lease exported, lock free afterwards
st $LC run e2e/basic --ttl 5 -- sh -c 'exit 7'
lg_eq "$rc" 7 "run passes CMD's status 7"
st $LC run e2e/basic --ttl 5 -- true
lg_eq "$rc" 0 "run passes CMD's status 0"
st $LC run e2e/basic --ttl 5 -- /nonexistent/cmd
lg_eq "$rc" 127 "run passes 127 for a missing command"
st $LC run e2e/basic --ttl 5 -- sh -c \
    'printf "%s|%s|%s" "$LOCKGATE_LOCK" "$LOCKGATE_LEASE_ID" "$LOCKGATE_FENCING_TOKEN" >"$0"' \
    "$T/lease"
lg_eq "$rc" 0 "run with env"
IFS='|' read -r e_lock e_id e_tok <"$T/lease"
lg_eq "$e_lock" e2e/basic "LOCKGATE_LOCK"
[ -n "$e_id" ] || lg_fail "LOCKGATE_LEASE_ID is empty"
case $e_tok in '' | *[!0-9]*) lg_fail "LOCKGATE_FENCING_TOKEN '$e_tok' is not decimal" ;; esac
got=$(printf 'line1\nline2\n' | $LC run e2e/basic --ttl 5 -- cat)
lg_eq "$got" "line1
line2" "CMD reads lockctl's stdin"
st $LC run e2e/basic --ttl 5 -- sh -c 'read -r x || exit 0; exit 1' <&-
lg_eq "$rc" 0 "run with stdin closed"
[ -s "$T/err" ] && lg_fail "stderr with stdin closed: $(cat "$T/err")"
st $LC status e2e/basic
lg_eq "$rc" 1 "status after run: released"
grep -q "^LOCKGATE_STATE='free'" "$T/out" || lg_fail "status says free: $(cat "$T/out")"

# --- acquire / refresh / release for scripts, and a busy lock
out=$($LC acquire e2e/manual --ttl 10 --holder "job 1" --purpose "manual test")
lg_eq "$?" 0 "acquire"
eval "$out"
[ -n "${LOCKGATE_LEASE_ID:-}" ] || lg_fail "acquire printed no lease id: $out"
lg_eq "$LOCKGATE_LOCK" e2e/manual "acquire's LOCKGATE_LOCK"
lg_eq "${LOCKGATE_TTL:-}" 10 "acquire's ttl"
st $LC acquire e2e/manual --ttl 10 --wait 0
lg_eq "$rc" 73 "acquire of a held lock, wait 0"
lg_eq "$(wc -l <"$T/err" | tr -d ' ')" 1 "one line on stderr"
grep -q 'job 1' "$T/err" || lg_fail "the 409 names the holder: $(cat "$T/err")"
st $LC status e2e/manual
lg_eq "$rc" 0 "status of a held lock"
grep -q "^LOCKGATE_HOLDER='job 1'" "$T/out" || lg_fail "status holder: $(cat "$T/out")"
grep -q LOCKGATE_LEASE_ID "$T/out" && lg_fail "status shows a lease_id"
st $LC list e2e/
lg_eq "$rc" 0 "list"
grep -q "^e2e/manual	.*	job 1	" "$T/out" || lg_fail "list: $(cat "$T/out")"
st $LC refresh
lg_eq "$rc" 0 "refresh from exported LOCKGATE_LOCK/LEASE_ID"
st $LC release
lg_eq "$rc" 0 "release"
st $LC release
lg_eq "$rc" 75 "second release: the lease is gone"
st $LC refresh e2e/manual --lease-id "$LOCKGATE_LEASE_ID"
lg_eq "$rc" 75 "refresh after release"
unset LOCKGATE_LOCK LOCKGATE_LEASE_ID LOCKGATE_FENCING_TOKEN

# --- hostile holder and purpose come back byte for byte and run nothing
# (the server refuses control characters such as newlines in them; the
# unit test of srv_env_format covers those)
hostile="it's \$(touch $T/pwned) \`touch $T/pwned\` '\\'' \"q\" \$HOME; LOCKGATE_LEASE_ID='stolen' \\"
st $LC run e2e/hostile --ttl 5 --holder "$hostile" --purpose "$hostile" -- \
    sh -c 'dash "$0" status e2e/hostile >"$1"' "$PWD/client/lockctl" "$T/hostile"
lg_eq "$rc" 0 "run with a hostile holder"
got=$(LOCKGATE_HOLDER=; . "$T/hostile"; printf '%s|' "$LOCKGATE_HOLDER")
lg_eq "$got" "$hostile|" "hostile holder round trip"
got=$(. "$T/hostile"; printf '%s|' "$LOCKGATE_PURPOSE")
lg_eq "$got" "$hostile|" "hostile purpose round trip"
[ -e "$T/pwned" ] && lg_fail "a value ran a command"

# --- lockctl's check of an answer before it evaluates it (lc_env_valid)
sed -n '/^lc_env_valid() {/,/^}/p' client/lockctl >"$T/valid.sh"
. "$T/valid.sh"
Q='\047'
check_env() { # PRINTF-FORMAT WANT
	printf "$1" >"$T/env"
	if lc_env_valid "$T/env"; then got=valid; else got=invalid; fi
	lg_eq "$got" "$2" "lc_env_valid on $(od -An -c "$T/env" | tr -s ' \n' ' ')"
}
check_env "LOCKGATE_A=${Q}x${Q}\n" valid
check_env "LOCKGATE_A=${Q}it${Q}\\\\${Q}${Q}s${Q}\nLOCKGATE_B=${Q}a\nb${Q}\n" valid
check_env "LOCKGATE_A=${Q}a\n${Q}\nLOCKGATE_B=${Q}\$(x)${Q}\n" valid
check_env "" valid
check_env "LOCKGATE_A=${Q}x${Q}; touch $T/pwned\n" invalid
check_env "LOCKGATE_A=${Q}x\n" invalid
check_env "FOO=${Q}x${Q}\n" invalid
check_env "LOCKGATE_a=${Q}x${Q}\n" invalid
check_env " LOCKGATE_A=${Q}x${Q}\n" invalid
check_env "LOCKGATE_A=x\n" invalid
check_env "LOCKGATE_A=${Q}x${Q}\\\\${Q}\n" invalid
check_env "LOCKGATE_A=${Q}a${Q}${Q}b${Q}\n" invalid
check_env "LOCKGATE_A=${Q}a${Q}\\\\${Q}${Q}\n" invalid
check_env "<html><body>502</body></html>\n" invalid
check_env "#!/bin/sh\necho hi\n" invalid

# --- error statuses
st $LC run
lg_eq "$rc" 64 "usage: no name"
st $LC run e2e/x --ttl soon -- true
lg_eq "$rc" 64 "usage: bad ttl"
st $LC run 'bad name!' -- true
lg_eq "$rc" 64 "usage: bad name"
st env LOCKGATE_URL= $LC status e2e/x
lg_eq "$rc" 64 "no LOCKGATE_URL"
st $LC run e2e/x --ttl 1 -- true
lg_eq "$rc" 65 "ttl under the server's minimum"
st env LOCKGATE_TOKEN=not.a.valid-token $LC status e2e/x
lg_eq "$rc" 77 "bad token"
st env LOCKGATE_TOKEN= $LC status e2e/x
lg_eq "$rc" 77 "no token"
# A URL that answers 200 with something that is not env lines: /lockctl.
st env "LOCKGATE_URL=$LG_URL/lockctl?x=" $LC status e2e/x
lg_eq "$rc" 76 "not lockgate's answer is never evaluated"

# --- the token comes from LOCKGATE_TOKEN_FILE, and never shows in ps:
# while lockctl long-polls for a held lock, its curl is in the process list
printf '%s\n' "$LOCKGATE_TOKEN" >"$T/token"
eval "$($LC acquire e2e/ps --ttl 10)"
env -u LOCKGATE_TOKEN LOCKGATE_TOKEN_FILE="$T/token" \
    $LC run e2e/ps --ttl 4 --wait 20 -- true 2>"$T/ps.err" &
runner=$!
i=0
while [ $i -lt 50 ]; do
	ps -A -o args= >"$T/ps"
	grep -q 'e2e/ps:acquire' "$T/ps" && break
	sleep 0.1
	i=$((i + 1))
done
grep -q 'e2e/ps:acquire' "$T/ps" || lg_fail "never saw the waiting curl in ps"
grep -qF -- "$LOCKGATE_TOKEN" "$T/ps" && lg_fail "the token shows in the process list"
st $LC release
lg_eq "$rc" 0 "release for the waiting run"
wait $runner
lg_eq "$?" 0 "run with LOCKGATE_TOKEN_FILE after a wait: $(cat "$T/ps.err")"
unset LOCKGATE_LOCK LOCKGATE_LEASE_ID LOCKGATE_FENCING_TOKEN

# --- GitHub Actions OIDC: the token comes from the request URL's "value"
printf '{"count":1,"value":"%s"}' "$LOCKGATE_TOKEN" >"$T/oidc.json"
st env -u LOCKGATE_TOKEN ACTIONS_ID_TOKEN_REQUEST_URL="file://$T/oidc.json?api-version=2.0" \
    ACTIONS_ID_TOKEN_REQUEST_TOKEN=request.token.x GITHUB_RUN_ID=42 \
    GITHUB_REPOSITORY=acme/site GITHUB_SERVER_URL=https://github.example \
    $LC run e2e/oidc --ttl 5 -- sh -c 'dash "$0" status e2e/oidc >"$1"' \
    "$PWD/client/lockctl" "$T/oidc.out"
lg_eq "$rc" 0 "run with a GitHub OIDC token: $(cat "$T/err")"
grep -q "^LOCKGATE_HOLDER='https://github.example/acme/site/actions/runs/42'" \
    "$T/oidc.out" || lg_fail "default holder in GitHub: $(cat "$T/oidc.out")"
st env CI_JOB_URL=https://gitlab.example/acme/site/-/jobs/7 \
    $LC run e2e/gitlab --ttl 5 -- sh -c 'dash "$0" status e2e/gitlab >"$1"' \
    "$PWD/client/lockctl" "$T/gitlab.out"
lg_eq "$rc" 0 "run in GitLab CI: $(cat "$T/err")"
grep -q "^LOCKGATE_HOLDER='https://gitlab.example/acme/site/-/jobs/7'" \
    "$T/gitlab.out" || lg_fail "default holder in GitLab: $(cat "$T/gitlab.out")"
printf '{"count":1}' >"$T/oidc.json"
st env -u LOCKGATE_TOKEN ACTIONS_ID_TOKEN_REQUEST_URL="file://$T/oidc.json?x=1" \
    ACTIONS_ID_TOKEN_REQUEST_TOKEN=request.token.x $LC status e2e/oidc
lg_eq "$rc" 77 "OIDC answer without a token"

# --- a PATH with no jq and no bash: only what lockctl needs, dash as sh
mkdir "$T/bin"
for tool in curl od tr awk sed head tail cat rm mkdir date sleep ps uname; do
	ln -s "$(command -v $tool)" "$T/bin/$tool" || lg_fail "no $tool"
done
ln -s "$(command -v dash)" "$T/bin/sh"
PATH=$T/bin sh -c 'command -v jq || command -v bash' >/dev/null &&
	lg_fail "the restricted PATH has jq or bash"
st env PATH="$T/bin" "$T/bin/sh" "$PWD/client/lockctl" run e2e/nojq --ttl 3 \
    --holder 'x'"'"'y' -- sh -c 'sleep 1; echo "$LOCKGATE_LOCK"; exit 5'
lg_eq "$rc" 5 "run with no jq, no bash: $(cat "$T/err")"
lg_eq "$(cat "$T/out")" e2e/nojq "CMD's stdout under the restricted PATH"
[ -s "$T/err" ] && lg_fail "stderr under the restricted PATH: $(cat "$T/err")"
st env PATH="$T/bin" "$T/bin/sh" "$PWD/client/lockctl" status e2e/nojq
lg_eq "$rc" 1 "released under the restricted PATH"

[ -z "$(ls -A "$T/tmp")" ] || lg_fail "lockctl left files behind: $(ls -A "$T/tmp")"
# Stopped by lg_stop, not left to the EXIT trap: it exits 0 with a clean
# sanitizer log, or the test fails.
lg_stop
echo ok
