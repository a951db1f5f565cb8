#!/bin/sh
# test_action.sh: the GitHub Action (action.yml, action/*.mjs) run with this
# machine's node against a real lockgate, the runner simulated: INPUT_*
# variables, GITHUB_OUTPUT and GITHUB_STATE files (post gets the state as
# STATE_* variables), and the runner's OIDC token endpoint faked on
# loopback (tests/e2e/fake_oidc.py), its tokens signed by
# tests/tools/fake_jwks and verified by lockgate against that JWKS.
# action.yml says node24 (what GitHub runs); the code runs on node 18 on.
#  1. Two concurrent jobs on one lock never overlap, and both get it.
#  2. A job cancelled while waiting (SIGINT to main, then post) releases
#     nothing: the holder keeps its lease, and the lock is free once the
#     holder's post has run.
#  3. The heartbeat keeps a ttl=4 lease through a 12 s step.
#  4. Post after a force-release fails with a clear message (lost lease
#     seen by the heartbeat, and seen by the release itself).
#  5. keep + a later job's release input; releasing a gone lease fails.
#  6. The OIDC audience defaults to the url; the token input is used as
#     given; no token at all is a clear error.
#  7. The limit and shared inputs: two jobs hold a limit=2 semaphore,
#     another limit is refused with a clear message, two shared jobs hold
#     a lock a writer cannot take; bad inputs are refused before acquiring.
#  8. No token (OIDC or input) shows in any output, state, log, or the
#     heartbeat's command line or environment, except in ::add-mask::.
. tests/e2e/lib.sh
command -v node >/dev/null 2>&1 || lg_fail "node is missing (make deps-test)"
command -v timeout >/dev/null 2>&1 || lg_fail "timeout (coreutils) is missing"
FJ=build/tools/fake_jwks
[ -x "$FJ" ] || lg_fail "$FJ is not built (make build/tools/fake_jwks)"
ACT=$(pwd)/action

# ---- the action's shape: node24, main and post, no npm dependency.
grep -q '^  using: node24$' action.yml || lg_fail "action.yml: runs.using is not node24"
grep -q '^  main: action/main.mjs$' action.yml || lg_fail "action.yml: main is not action/main.mjs"
grep -q '^  post: action/post.mjs$' action.yml || lg_fail "action.yml: post is not action/post.mjs"
for i in url name ttl wait limit shared holder purpose expected-duration token audience release; do
	grep -q "^  $i:\$" action.yml || lg_fail "action.yml: no input $i"
done
for o in lease-id fencing-token expires-at; do
	grep -q "^  $o:\$" action.yml || lg_fail "action.yml: no output $o"
done
bad=$(grep -h "from '\|import(\|require(" action/*.mjs | grep -v "from 'node:\|from './" || true)
[ -z "$bad" ] || lg_fail "action/ imports something other than node: and ./ modules: $bad"

# ---- the issuer: a JWKS, a fake runner token endpoint, lockgate.
K=$LG_TMP/jwks
O=$LG_TMP/oidc
mkdir -p "$K" "$O"
$FJ keygen "$K" k1 rsa >/dev/null || lg_fail keygen
$FJ serve "$K" "$LG_TMP/jwks.port" &
LG_PIDS="$LG_PIDS $!"
REQTOK=runner-request-token-0123456789
ISS=https://token.actions.githubusercontent.com
AUD=https://lock.example.test
python3 tests/e2e/fake_oidc.py "$FJ" "$K" k1 "$REQTOK" \
    "\"sub\":\"repo:acme/app:ref:refs/heads/main\",\"repository\":\"acme/app\",\"iss\":\"$ISS\"" "$O" &
LG_PIDS="$LG_PIDS $!"
i=0
while { [ ! -s "$LG_TMP/jwks.port" ] || [ ! -s "$O/port" ]; } && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -s "$LG_TMP/jwks.port" ] && [ -s "$O/port" ] || lg_fail "fake_jwks or fake_oidc did not start"
OIDC=http://127.0.0.1:$(cat "$O/port")
# One owner for every job (one repository's workflow): only lease ids
# keep the jobs' leases apart, the case where releasing another job's
# lease would go unnoticed.  ops may force-release.
cat >"$LG_TMP/policy.json" <<'JSON'
{"rules": [{"match": {"repository": "acme/*"}, "locks": ["ci/**"], "actions": ["acquire"]},
           {"match": {"sub": "ops"}, "locks": ["**"], "actions": ["admin"]}]}
JSON
lg_start --jwks-url "http://127.0.0.1:$(cat "$LG_TMP/jwks.port")/jwks" \
    --jwt-issuer "$ISS" --jwt-audience "$AUD" --policy "$LG_TMP/policy.json"
now=$(date +%s)
ADMIN="Authorization: Bearer $(lg_jwt "{\"sub\":\"ops\",\"iat\":$now,\"exp\":$((now + 3600))}")"
# An HS256 token for the token input: the same repository.
INTOK=$(lg_jwt "{\"sub\":\"repo:acme/app:ref:refs/heads/main\",\"repository\":\"acme/app\",\"iat\":$now,\"exp\":$((now + 3600))}")
out=$LG_TMP/out

# ---- the simulated runner.
# job_main JOB [VAR=value...]: main of job JOB in the background ($JOB_PID),
# with the runner's variables and the given inputs.
job_main() {
	_j=$1
	shift
	_d=$LG_TMP/job.$_j
	mkdir -p "$_d/tmp"
	: >"$_d/state"
	: >"$_d/output"
	env GITHUB_STATE="$_d/state" GITHUB_OUTPUT="$_d/output" RUNNER_TEMP="$_d/tmp" \
	    GITHUB_SERVER_URL=https://github.com GITHUB_REPOSITORY=acme/app \
	    GITHUB_RUN_ID="$_j" GITHUB_JOB=deploy \
	    ACTIONS_ID_TOKEN_REQUEST_URL="$OIDC/token?api-version=2.0" \
	    ACTIONS_ID_TOKEN_REQUEST_TOKEN="$REQTOK" \
	    INPUT_URL="$LG_URL" INPUT_AUDIENCE="$AUD" "$@" \
	    node "$ACT/main.mjs" >"$_d/main.log" 2>&1 &
	JOB_PID=$!
}
# job_run JOB [VAR=value...]: main in the foreground; its exit status.
# A main still running after 40 s fails the test (lg_wait_exit): a job
# expected to fail must fail, not hang.
job_run() {
	job_main "$@"
	lg_wait_exit "$JOB_PID" 40 "main of job $1"
	return "$LG_RC"
}
# job_post JOB [VAR=value...]: post with the state main saved, as the runner
# hands it over (STATE_name), and the same inputs main had.
job_post() {
	_j=$1
	shift
	_d=$LG_TMP/job.$_j
	_hb=$(st "$_j" hb_pid)
	[ -n "$_hb" ] && LG_PIDS="$LG_PIDS $_hb" # stopped on the way out, whatever happens
	set -- "$@" GITHUB_STATE= GITHUB_OUTPUT=
	while IFS= read -r _l; do
		set -- "$@" "STATE_${_l%%=*}=${_l#*=}"
	done <"$_d/state"
	env ACTIONS_ID_TOKEN_REQUEST_URL="$OIDC/token?api-version=2.0" \
	    ACTIONS_ID_TOKEN_REQUEST_TOKEN="$REQTOK" \
	    INPUT_URL="$LG_URL" INPUT_AUDIENCE="$AUD" "$@" \
	    timeout 30 node "$ACT/post.mjs" >"$_d/post.log" 2>&1
}
st() { sed -n "s/^$2=//p" "$LG_TMP/job.$1/state" | tail -n 1; }
output() { sed -n "s/^$2=//p" "$LG_TMP/job.$1/output" | tail -n 1; }
log_of() { cat "$LG_TMP/job.$1/$2.log"; }
holder_token() { # LOCK: the fencing token of its holder, or the error code
	lg_curl -H "$ADMIN" "$LG_URL/v1/locks/$1" >"$out"
	t=$(lg_json fencing_token <"$out")
	[ -n "$t" ] && echo "$t" || lg_json error.code <"$out"
}

# ---- 1. Two concurrent jobs never overlap.
# The step between main and post: inside the lock for 2 s.  mkdir is
# atomic: a second job inside at the same time cannot make the directory.
step() {
	mkdir "$LG_TMP/inside" 2>/dev/null || echo "$1 entered while another job was inside" >>"$LG_TMP/errors"
	sleep 2
	rmdir "$LG_TMP/inside"
}
job() {
	job_run "$1" INPUT_NAME=ci/deploy INPUT_TTL=10 INPUT_WAIT=30 \
	    INPUT_PURPOSE="job $1" INPUT_EXPECTED-DURATION=5 ||
	    { echo "main of $1 failed: $(log_of "$1" main)" >>"$LG_TMP/errors"; return; }
	step "$1"
	job_post "$1" || echo "post of $1 failed: $(log_of "$1" post)" >>"$LG_TMP/errors"
}
: >"$LG_TMP/errors"
job A &
pa=$!
job B &
pb=$!
wait "$pa"
wait "$pb"
[ -s "$LG_TMP/errors" ] && lg_fail "concurrent jobs: $(cat "$LG_TMP/errors")"
ta=$(output A fencing-token)
tb=$(output B fencing-token)
[ -n "$ta" ] && [ -n "$tb" ] && [ "$ta" != "$tb" ] ||
    lg_fail "concurrent jobs: fencing tokens '$ta' and '$tb'"
[ -n "$(output A lease-id)" ] && [ -n "$(output A expires-at)" ] || lg_fail "job A: outputs missing"
[ "$(output A lease-id)" = "$(st A lease_id)" ] || lg_fail "job A: output lease-id is not the saved one"
cat "$LG_TMP/job.A/main.log" "$LG_TMP/job.B/main.log" | grep -q "ci/deploy is held by https://github.com/acme/app/actions/runs/[AB] job deploy" ||
    lg_fail "the waiting job did not say who held the lock"
grep -q "released ci/deploy" "$LG_TMP/job.A/post.log" || lg_fail "post A: $(log_of A post)"
lg_eq "$(holder_token ci/deploy)" not_held "ci/deploy after both posts"
echo "ok 1 - two concurrent jobs took ci/deploy in turn ($ta, $tb)"

# ---- 2. Cancelled while waiting: nothing released, the holder keeps it.
job_run H INPUT_NAME=ci/cancel INPUT_TTL=30 || lg_fail "main H: $(log_of H main)"
th=$(output H fencing-token)
job_main C INPUT_NAME=ci/cancel INPUT_TTL=30 INPUT_WAIT=60
pc=$JOB_PID
lg_wait_line "$LG_TMP/job.C/main.log" "is held by" ||
    lg_fail "job C never waited: $(log_of C main)"
sleep 1 # into the long poll
kill -INT "$pc"
lg_wait_exit "$pc" 5 "main C after SIGINT"
[ "$LG_RC" -ne 0 ] || lg_fail "main C after SIGINT: status 0: $(log_of C main)"
grep -q "nothing was taken" "$LG_TMP/job.C/main.log" || lg_fail "main C: $(log_of C main)"
[ -z "$(st C lease_id)" ] || lg_fail "cancelled main C saved a lease"
job_post C || lg_fail "post C failed: $(log_of C post)"
grep -q "nothing to release" "$LG_TMP/job.C/post.log" || lg_fail "post C: $(log_of C post)"
lg_eq "$(holder_token ci/cancel)" "$th" "ci/cancel after the waiter's cancel and post"
sleep 2 # two heartbeats of H later, still H's
lg_eq "$(holder_token ci/cancel)" "$th" "ci/cancel 2 s later"
job_post H || lg_fail "post H failed: $(log_of H post)"
grep -q "released ci/cancel" "$LG_TMP/job.H/post.log" || lg_fail "post H: $(log_of H post)"
sleep 1 # the cancelled waiter's request is gone: it takes nothing now
lg_eq "$(holder_token ci/cancel)" not_held "ci/cancel after H's post"
echo "ok 2 - a job cancelled while waiting released nothing"

# ---- 3. The heartbeat keeps a ttl=4 lease through a 12 s step.
job_run L INPUT_NAME=ci/long INPUT_TTL=4 || lg_fail "main L: $(log_of L main)"
tl=$(output L fencing-token)
hb=$(st L hb_pid)
[ -n "$hb" ] && kill -0 "$hb" 2>/dev/null || lg_fail "job L: no heartbeat running"
LG_PIDS="$LG_PIDS $hb"
n=0
while [ $n -lt 12 ]; do
	sleep 1
	n=$((n + 1))
	lg_eq "$(holder_token ci/long)" "$tl" "ci/long after $n s of a ttl=4 lease"
done
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$ADMIN" "$LG_URL/v1/locks/ci/long:acquire?ttl=5")
lg_eq "$code" 409 "another acquire of ci/long after 12 s"
# The heartbeat's environment and command line hold no token (it came on
# a pipe), while main's environment had the token input... here OIDC; job F
# below checks the token input.
for f in cmdline environ; do
	for tok in $(cat "$O/tokens"); do
		tr '\0' '\n' <"/proc/$hb/$f" | grep -qF -- "$tok" && lg_fail "the heartbeat's $f holds a token"
	done
done
job_post L || lg_fail "post L failed: $(log_of L post)"
refreshes=$(sed -n 's/.*after \([0-9]*\) refreshes.*/\1/p' "$LG_TMP/job.L/post.log")
[ "${refreshes:-0}" -ge 6 ] || lg_fail "post L: only '${refreshes}' refreshes in 12 s: $(log_of L post)"
kill -0 "$hb" 2>/dev/null && lg_fail "the heartbeat of L still runs after post"
grep -i "warning\|error" "$LG_TMP"/job.L/tmp/*/heartbeat.log && lg_fail "the heartbeat of L logged the above"
lg_eq "$(holder_token ci/long)" not_held "ci/long after post"
echo "ok 3 - the heartbeat kept a ttl=4 lease for 12 s ($refreshes refreshes)"

# ---- 4. Post after a force-release fails, and says why.
job_run F INPUT_NAME=ci/force INPUT_TTL=8 INPUT_TOKEN="$INTOK" || lg_fail "main F: $(log_of F main)"
hb=$(st F hb_pid)
LG_PIDS="$LG_PIDS $hb"
tr '\0' '\n' <"/proc/$hb/environ" | grep -qF -- "$INTOK" && lg_fail "the heartbeat's environment holds the token input"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$ADMIN" "$LG_URL/v1/locks/ci/force:forceRelease")
lg_eq "$code" 204 "forceRelease ci/force"
sleep 3 # the heartbeat refreshes every second: it sees the loss
if job_post F INPUT_TOKEN="$INTOK"; then
	lg_fail "post F passed after a force-release: $(log_of F post)"
fi
grep -q "^::error::the lease on ci/force was lost while the job ran (409 lease_lost\|^::error::the lease on ci/force was lost while the job ran (404 lease_not_found" \
    "$LG_TMP/job.F/post.log" || lg_fail "post F: $(log_of F post)"
# Lost before the heartbeat noticed: the release itself says so.
job_run G INPUT_NAME=ci/force INPUT_TTL=60 || lg_fail "main G: $(log_of G main)"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$ADMIN" "$LG_URL/v1/locks/ci/force:forceRelease")
lg_eq "$code" 204 "forceRelease ci/force (G)"
if job_post G; then
	lg_fail "post G passed after a force-release: $(log_of G post)"
fi
grep -q "^::error::the lease on ci/force was lost before the job ended" "$LG_TMP/job.G/post.log" ||
    lg_fail "post G: $(log_of G post)"
echo "ok 4 - post after a force-release fails with a clear message"

# ---- 5. keep, then release in a later job.
job_run P INPUT_NAME=ci/span INPUT_TTL=60 INPUT_KEEP=true || lg_fail "main P: $(log_of P main)"
tp=$(output P fencing-token)
id=$(output P lease-id)
job_post P INPUT_KEEP=true || lg_fail "post P failed: $(log_of P post)"
grep -q "keeping ci/span held" "$LG_TMP/job.P/post.log" || lg_fail "post P: $(log_of P post)"
lg_eq "$(holder_token ci/span)" "$tp" "ci/span after post with keep"
job_run R INPUT_NAME=ci/span INPUT_RELEASE="$id" || lg_fail "main R (release): $(log_of R main)"
lg_eq "$(holder_token ci/span)" not_held "ci/span after the release input"
job_post R || lg_fail "post R failed: $(log_of R post)"
grep -q "nothing to release" "$LG_TMP/job.R/post.log" || lg_fail "post R: $(log_of R post)"
if job_run S INPUT_NAME=ci/span INPUT_RELEASE="$id"; then
	lg_fail "releasing a released lease passed: $(log_of S main)"
fi
grep -q "^::error::could not release ci/span: that lease is gone" "$LG_TMP/job.S/main.log" ||
    lg_fail "main S: $(log_of S main)"
echo "ok 5 - keep, then release in a later job"

# ---- 6. Identity: the audience defaults to the url; no token is an error.
: >"$O/requests"
if job_run D INPUT_NAME=ci/aud INPUT_AUDIENCE=; then
	lg_fail "a token for the wrong audience was accepted"
fi
# (asked twice: a 401 makes main fetch a fresh token once)
lg_eq "$(sort -u "$O/requests")" "audience $LG_URL" "the OIDC audience without the audience input"
grep -q "^::error::could not acquire ci/aud: 401 " "$LG_TMP/job.D/main.log" || lg_fail "main D: $(log_of D main)"
if job_run N INPUT_NAME=ci/none ACTIONS_ID_TOKEN_REQUEST_URL= ACTIONS_ID_TOKEN_REQUEST_TOKEN=; then
	lg_fail "main without any token passed"
fi
grep -q "^::error::no token: set the token input" "$LG_TMP/job.N/main.log" || lg_fail "main N: $(log_of N main)"
job_run W INPUT_NAME=ci/oidc ACTIONS_ID_TOKEN_REQUEST_TOKEN=wrong
[ $? -ne 0 ] || lg_fail "a refused OIDC request passed"
grep -q "^::error::the runner's OIDC token endpoint answered 401" "$LG_TMP/job.W/main.log" ||
    lg_fail "main W: $(log_of W main)"
echo "ok 6 - audience default, no token, a refused OIDC request"

# ---- 7. limit and shared: sent on the acquire, checked before it.
job_run L1 INPUT_NAME=ci/sem INPUT_LIMIT=2 INPUT_TTL=60 || lg_fail "main L1: $(log_of L1 main)"
job_run L2 INPUT_NAME=ci/sem INPUT_LIMIT=2 INPUT_TTL=60 || lg_fail "main L2 (second of 2): $(log_of L2 main)"
lg_curl -H "$ADMIN" "$LG_URL/v1/locks/ci/sem" >"$out"
lg_eq "$(lg_json limit <"$out")" 2 "ci/sem's limit"
lg_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["holders"]))' <"$out")" 2 \
    "both jobs hold ci/sem"
if job_run L3 INPUT_NAME=ci/sem INPUT_LIMIT=3; then
	lg_fail "another limit passed: $(log_of L3 main)"
fi
grep -q "^::error::could not acquire ci/sem: its holders use another limit or mode" "$LG_TMP/job.L3/main.log" ||
    lg_fail "main L3: $(log_of L3 main)"
if job_run L4 INPUT_NAME=ci/sem INPUT_LIMIT=2; then
	lg_fail "a third lease of 2 passed: $(log_of L4 main)"
fi
grep -q "^::error::ci/sem is held by" "$LG_TMP/job.L4/main.log" || lg_fail "main L4: $(log_of L4 main)"
job_run S1 INPUT_NAME=ci/rw INPUT_SHARED=true INPUT_TTL=60 || lg_fail "main S1: $(log_of S1 main)"
job_run S2 INPUT_NAME=ci/rw INPUT_SHARED=true INPUT_TTL=60 || lg_fail "main S2 (a second reader): $(log_of S2 main)"
lg_curl -H "$ADMIN" "$LG_URL/v1/locks/ci/rw" >"$out"
lg_eq "$(lg_json mode <"$out")" shared "ci/rw's mode"
if job_run S3 INPUT_NAME=ci/rw; then
	lg_fail "a writer beside readers passed: $(log_of S3 main)"
fi
grep -q "^::error::ci/rw is held by" "$LG_TMP/job.S3/main.log" || lg_fail "main S3: $(log_of S3 main)"
for bad in "INPUT_LIMIT=0" "INPUT_LIMIT=1001" "INPUT_LIMIT=two" "INPUT_SHARED=yes"; do
	if job_run B "INPUT_NAME=ci/bad" "$bad"; then
		lg_fail "$bad passed: $(log_of B main)"
	fi
	grep -q "^::error::input" "$LG_TMP/job.B/main.log" || lg_fail "$bad: $(log_of B main)"
done
if job_run B INPUT_NAME=ci/bad INPUT_SHARED=true INPUT_LIMIT=2; then
	lg_fail "shared with limit 2 passed: $(log_of B main)"
fi
grep -q "^::error::inputs shared and limit 2" "$LG_TMP/job.B/main.log" || lg_fail "shared+limit: $(log_of B main)"
lg_eq "$(holder_token ci/bad)" not_held "refused inputs took nothing"
for j in L1 L2 S1 S2; do
	job_post "$j" || lg_fail "post $j: $(log_of "$j" post)"
done
lg_eq "$(holder_token ci/sem)" not_held "ci/sem after both posts"
lg_eq "$(holder_token ci/rw)" not_held "ci/rw after both posts"
echo "ok 7 - limit and shared inputs"

# ---- 7b. A grant that lands after the step stopped waiting for it: a
# proxy answers main's first acquire 503 and hands it on only once main's
# retry was answered 409 and the holder has let go (acquire_proxy.py late).
# main gives up (wait 0) and, on its way out, finds that lease with its
# key and releases it: the lock is free.
lg_curl -o "$out" -X POST -H "Authorization: Bearer $INTOK" "$LG_URL/v1/locks/ci/late:acquire?ttl=60"
xl=$(lg_json lease_id <"$out")
[ -n "$xl" ] || lg_fail "a holder for ci/late: $(cat "$out")"
lg_serve "$LG_TMP/late.log" 's/^port \([0-9]*\)$/\1/p' \
    python3 -u tests/e2e/acquire_proxy.py late "$LG_URL" ci/late "Bearer $INTOK" "$xl"
lp=$LG_SERVE_PID
lport=$LG_SERVE_PORT
if job_run K INPUT_NAME=ci/late INPUT_URL="http://127.0.0.1:$lport"; then
	lg_fail "main K passed with ci/late held: $(log_of K main)"
fi
grep -q "late first acquire: 200" "$LG_TMP/late.log" ||
    lg_fail "the kept-back acquire was not granted: $(cat "$LG_TMP/late.log")"
lg_eq "$(holder_token ci/late)" not_held "ci/late after main K gave up ($(cat "$LG_TMP/late.log"))"
kill "$lp"
lg_wait_exit "$lp" 5 "acquire_proxy"
echo "ok 7b - a late grant is given back"

# ---- 8. No token anywhere but in ::add-mask::.
[ "$(wc -l <"$O/tokens")" -ge 10 ] || lg_fail "only $(wc -l <"$O/tokens") OIDC tokens were issued"
grep -qxF "::add-mask::$INTOK" "$LG_TMP/job.F/main.log" || lg_fail "the token input was not masked"
grep -q "^::add-mask::ey" "$LG_TMP/job.A/main.log" || lg_fail "the OIDC token was not masked"
files=$(find "$LG_TMP"/job.* -type f)
for tok in "$INTOK" $(cat "$O/tokens"); do
	# shellcheck disable=SC2086
	if grep -F -- "$tok" $files | grep -v ":::add-mask::$tok\$" >"$out"; then
		lg_fail "a token shows outside ::add-mask::: $(cut -d: -f1 "$out" | sort -u)"
	fi
done
grep -qF -- "$REQTOK" $files && lg_fail "the runner's request token shows in an output"
echo "ok 8 - no token shows in $(echo "$files" | wc -l) output, state and log files"

lg_stop "$LG_PID"
echo ok
