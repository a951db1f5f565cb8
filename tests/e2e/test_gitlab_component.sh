#!/bin/sh
# test_gitlab_component.sh: the GitLab CI/CD component templates/lock.yml.
#  1. Its shape: a spec: inputs: header document, then one job; every
#     $[[ inputs.X ]] it uses is declared and every declared input used;
#     the job's ID token is LOCKGATE_TOKEN for the url's audience; the
#     script is kept from GitLab's expansion (expand: false).
#  2. The job's script, taken from the template as GitLab would run it, under
#     dash with a PATH of only the tools lockctl needs, against a real
#     lockgate (the variables set as the component sets them): the user's
#     script runs holding the lock (holder the job URL, purpose, expected
#     duration), its $VARIABLES expand at run time, the lease outlives its
#     ttl, the lock is free afterwards; a failing line stops the script
#     (sh -e) and its status is the job's; two jobs never overlap; wait 0
#     on a held lock exits 73; an unreachable server exits 69; two jobs
#     with limit 2, or shared, hold the lock together, and another limit
#     exits 73 (limit_mismatch).
. tests/e2e/lib.sh
TPL=templates/lock.yml
[ -f "$TPL" ] || lg_fail "no $TPL"
command -v dash >/dev/null 2>&1 || lg_fail "dash is missing (make deps-test)"

# ---- 1. Shape.
lg_eq "$(grep -c '^---$' "$TPL")" 1 "YAML documents separators in $TPL"
lg_eq "$(grep -v '^#' "$TPL" | grep -v '^$' | head -n 2 | tr -d '\n')" "spec:  inputs:" "the header document"
sed -n '1,/^---$/p' "$TPL" | sed -n 's/^    \([a-z-]*\):$/\1/p' | sort >"$LG_TMP/declared"
sed -n '/^---$/,$p' "$TPL" | grep -o '\$\[\[ inputs\.[a-z-]* \]\]' |
    sed 's/.*inputs\.\([a-z-]*\) .*/\1/' | sort -u >"$LG_TMP/used"
for i in url name script; do
	grep -qx "$i" "$LG_TMP/declared" || lg_fail "$TPL does not declare input $i"
done
diff "$LG_TMP/declared" "$LG_TMP/used" >"$LG_TMP/diff" ||
    lg_fail "declared and used inputs differ: $(cat "$LG_TMP/diff")"
# url, name and script have no default: a pipeline must give them.
for i in url name script; do
	sed -n "/^    $i:\$/,/^    [a-z-]*:\$/p" "$TPL" | grep -q '^      default:' &&
	    lg_fail "input $i has a default"
done
grep -q '^    LOCKGATE_TOKEN:$' "$TPL" && grep -q '^      aud: \$\[\[ inputs.url \]\]$' "$TPL" ||
    lg_fail "the job's id_tokens are not LOCKGATE_TOKEN for the url"
sed -n '/^    LOCKGATE_SCRIPT:$/,/^    [A-Z_]*:/p' "$TPL" | grep -q '^      expand: false$' ||
    lg_fail "LOCKGATE_SCRIPT is not expand: false (GitLab would expand the script's \$VARS)"
# The job's script: the block scalar under "  script:", unindented.
awk '
	/^  script:$/ { s = 1; next }
	s == 1 && /^    - \|$/ { s = 2; next }
	s == 2 && /^      / { print substr($0, 7); next }
	s == 2 && /^$/ { print ""; next }
	s == 2 { exit }
' "$TPL" >"$LG_TMP/job.sh"
[ "$(wc -l <"$LG_TMP/job.sh")" -ge 5 ] || lg_fail "no script block in $TPL"
echo "ok 1 - $TPL: $(wc -l <"$LG_TMP/declared") inputs, a job with an ID token, a $(wc -l <"$LG_TMP/job.sh")-line script"

# ---- 2. The script under dash, only the tools lockctl needs.
B=$LG_TMP/bin
mkdir "$B" "$LG_TMP/tmp"
for tool in curl od tr awk sed head tail cat rm mkdir date sleep ps uname; do
	ln -s "$(command -v $tool)" "$B/$tool" || lg_fail "no $tool"
done
ln -s "$(command -v dash)" "$B/sh"
PATH=$B sh -c 'command -v jq || command -v bash' >/dev/null && lg_fail "the restricted PATH has jq or bash"
lg_start
TOKEN=$(lg_token "project_path:acme/site:ref_type:branch:ref:main")
ADMIN="Authorization: Bearer $(lg_token ops admin)"
out=$LG_TMP/out

# job ID NAME TTL WAIT SCRIPT [URL]: the component's job as a runner runs
# it, with the variables the template sets (limit $LIMIT, shared
# $SHARED); its status (at most 60 s).
LIMIT=1
SHARED=false
job() {
	env -i PATH="$B" HOME="$LG_TMP" TMPDIR="$LG_TMP/tmp" \
	    LOCKGATE_URL="${6:-$LG_URL}" LOCKGATE_TOKEN="$TOKEN" \
	    LOCKGATE_LOCK_NAME="$2" LOCKGATE_TTL="$3" LOCKGATE_WAIT="$4" \
	    LOCKGATE_LIMIT="$LIMIT" LOCKGATE_SHARED="$SHARED" \
	    LOCKGATE_PURPOSE="component test $1" LOCKGATE_EXPECTED=60 LOCKGATE_GRACE=0 \
	    CI_JOB_URL="https://gitlab.example/acme/site/-/jobs/$1" T="$LG_TMP" \
	    LOCKGATE_SCRIPT="$5" "$(command -v timeout)" 60 "$B/sh" "$LG_TMP/job.sh" \
	    >"$LG_TMP/job.$1.out" 2>&1
}

S='echo "$LOCKGATE_FENCING_TOKEN" >"$T/ft"
curl -sS -H "Authorization: Bearer $LOCKGATE_TOKEN" "$LOCKGATE_URL/v1/locks/$LOCKGATE_LOCK" >"$T/inside"
sleep 5
echo "ran as $CI_JOB_URL" >"$T/ran"'
job 1 gl/deploy 3 0 "$S"
lg_eq "$?" 0 "job 1: $(cat "$LG_TMP/job.1.out")"
lg_eq "$(cat "$LG_TMP/ran")" "ran as https://gitlab.example/acme/site/-/jobs/1" "the script's own \$VARIABLES"
lg_eq "$(lg_json holder <"$LG_TMP/inside")" "https://gitlab.example/acme/site/-/jobs/1" "holder seen inside the script"
lg_eq "$(lg_json purpose <"$LG_TMP/inside")" "component test 1" "purpose"
lg_eq "$(lg_json expected_duration <"$LG_TMP/inside")" 60 "expected duration"
lg_eq "$(lg_json fencing_token <"$LG_TMP/inside")" "$(cat "$LG_TMP/ft")" "the fencing token the script got"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$ADMIN" "$LG_URL/v1/locks/gl/deploy")
lg_eq "$code" 404 "gl/deploy after the job (a ttl=3 lease held through 5 s, then released)"
[ -z "$(ls "$LG_TMP/tmp")" ] || lg_fail "the job left files in TMPDIR: $(ls "$LG_TMP/tmp")"
echo "ok 2 - the script ran holding gl/deploy, past its ttl, and released it"

job 2 gl/deploy 5 0 'echo before >"$T/two"
false
echo after >>"$T/two"'
lg_eq "$?" 1 "job 2 (a failing line): $(cat "$LG_TMP/job.2.out")"
lg_eq "$(cat "$LG_TMP/two")" before "sh -e stops at the failing line"
job 3 gl/deploy 5 0 'exit 7'
lg_eq "$?" 7 "job 3's status is its script's"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$ADMIN" "$LG_URL/v1/locks/gl/deploy")
lg_eq "$code" 404 "gl/deploy after failing jobs"
echo "ok 3 - a failing script fails the job with its status and releases"

: >"$LG_TMP/errors"
S='mkdir "$T/inside.d" 2>/dev/null || echo "overlap in $CI_JOB_URL" >>"$T/errors"
sleep 1
rm -r "$T/inside.d"'
job 4 gl/turn 5 30 "$S" &
p4=$!
job 5 gl/turn 5 30 "$S" &
p5=$!
wait "$p4"
s4=$?
wait "$p5"
s5=$?
lg_eq "$s4:$s5" 0:0 "two concurrent jobs: $(cat "$LG_TMP/job.4.out" "$LG_TMP/job.5.out")"
[ -s "$LG_TMP/errors" ] && lg_fail "$(cat "$LG_TMP/errors")"
echo "ok 4 - two concurrent jobs took gl/turn in turn"

job 6 gl/busy 10 0 'sleep 3' &
p6=$!
i=0
until [ "$(lg_curl -o /dev/null -w '%{http_code}' -H "$ADMIN" "$LG_URL/v1/locks/gl/busy")" = 200 ] || [ $i -ge 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
job 7 gl/busy 10 0 'echo ran >"$T/seven"'
lg_eq "$?" 73 "wait 0 on a held lock: $(cat "$LG_TMP/job.7.out")"
[ -f "$LG_TMP/seven" ] && lg_fail "the script ran without the lock"
wait "$p6"
lg_eq "$?" 0 "job 6"
job 8 gl/none 5 0 'echo ran >"$T/eight"' http://127.0.0.1:1
lg_eq "$?" 69 "an unreachable server: $(cat "$LG_TMP/job.8.out")"
[ -f "$LG_TMP/eight" ] && lg_fail "the script ran without a server"
echo "ok 5 - busy lock exits 73, no server exits 69, the script never runs"

# Two jobs at once, each waiting (at most 10 s) for the other's mark: both
# exit 0 only when they held the lock together.
meet() { # MINE OTHER: the script of a job that must meet another
	printf ': >"$T/%s"\ni=0\nwhile [ ! -e "$T/%s" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\n[ -e "$T/%s" ]\n' "$1" "$2" "$2"
}
# They hold on until job 11 has been refused (at most 10 s): without
# that they could meet, release and leave job 11 a free lock.
hold='i=0
while [ ! -e "$T/sem.go" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done'
LIMIT=2
job 9 gl/sem 10 30 "$(meet sem9 sem10)
$hold" &
p9=$!
job 10 gl/sem 10 30 "$(meet sem10 sem9)
$hold" &
p10=$!
i=0
until [ "$(lg_curl -o /dev/null -w '%{http_code}' -H "$ADMIN" "$LG_URL/v1/locks/gl/sem")" = 200 ] || [ $i -ge 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
LIMIT=3
job 11 gl/sem 10 0 'echo ran >"$T/eleven"'
lg_eq "$?" 73 "another limit: $(cat "$LG_TMP/job.11.out")"
grep -q limit_mismatch "$LG_TMP/job.11.out" || lg_fail "job 11: $(cat "$LG_TMP/job.11.out")"
[ -f "$LG_TMP/eleven" ] && lg_fail "the script ran with another limit"
: >"$LG_TMP/sem.go"
wait "$p9"
s9=$?
wait "$p10"
lg_eq "$s9:$?" 0:0 "two jobs of limit 2 together: $(cat "$LG_TMP/job.9.out" "$LG_TMP/job.10.out")"
LIMIT=1
SHARED=true
job 12 gl/rw 10 30 "$(meet rw12 rw13)" &
p12=$!
job 13 gl/rw 10 30 "$(meet rw13 rw12)"
s13=$?
wait "$p12"
lg_eq "$?:$s13" 0:0 "two shared jobs together: $(cat "$LG_TMP/job.12.out" "$LG_TMP/job.13.out")"
SHARED=false
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$ADMIN" "$LG_URL/v1/locks/gl/sem")
lg_eq "$code" 404 "gl/sem after its jobs"
echo "ok 6 - limit 2 and shared jobs hold the lock together; another limit exits 73"

lg_stop "$LG_PID"
echo ok
