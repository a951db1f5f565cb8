#!/bin/sh
# lockctl with --limit N (a semaphore) and --shared (readers and a
# writer), under dash: three `run --limit 2` at once never have more than
# two commands running and two do run together; --shared runs run
# together and an exclusive run waits until they are done (both shown by
# the commands' own marks, not by how long anything took); status shows
# mode, limit and every lease, list a line per lease; another limit or mode is refused at once
# (exit 73, limit_mismatch); force-release of a group names its lease.
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/lockctl
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
export LOCKGATE_URL="$LG_URL"
LOCKGATE_TOKEN=$(lg_token ci-groups)
export LOCKGATE_TOKEN
ADMIN=$(lg_token ops-admin admin)
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID \
    LOCKGATE_FENCING_TOKEN ACTIONS_ID_TOKEN_REQUEST_URL GITHUB_RUN_ID \
    CI_JOB_URL 2>/dev/null

# The command of every run: job.sh ID MARKS NEED [GATE].  It marks its
# start, waits (at most 10 s) until NEED starts are marked in MARKS, then
# until the file GATE exists (at most 30 s), and marks its end with
# "met" when it saw NEED starts.  Marks carry date +%s%N.
cat >"$T/job.sh" <<'JOB'
id=$1 marks=$2 need=$3 gate=${4:-}
echo "start $id $(date +%s%N)" >>"$marks"
met=alone
i=0
while [ $i -lt 100 ]; do
	if [ "$(grep -c '^start' "$marks")" -ge "$need" ]; then
		met=met
		break
	fi
	sleep 0.1
	i=$((i + 1))
done
i=0
while [ -n "$gate" ] && [ ! -e "$gate" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
echo "end $id $(date +%s%N) $met" >>"$marks"
JOB

# The most commands that ran at once, by the marks in $1.
most_at_once() {
	sort -k3,3n "$1" | awk '
		$1 == "start" { n++; if (n > most) most = n }
		$1 == "end" { n-- }
		END { print most + 0 }'
}

# Wait (bounded: 100 x 0.1 s) until file $1 holds a line matching $2.
wait_grep() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" || lg_fail "timed out waiting for '$2' in $1: $(cat "$1")"
}

st() { # run lockctl, output in $T/out and $T/err, status in $rc
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
}

# --- --help documents both
$LC --help >"$T/help"
grep -q -- '--limit N' "$T/help" || lg_fail "--help: no --limit"
grep -q -- '--shared' "$T/help" || lg_fail "--help: no --shared"
grep -q 'limit_mismatch' "$T/help" || lg_fail "--help: no word of limit_mismatch"

# --- usage errors, before any request
st $LC run e2e/g/bad --shared --limit 2 -- true
lg_eq "$rc" 64 "--shared with --limit 2"
st $LC run e2e/g/bad --limit 0 -- true
lg_eq "$rc" 64 "--limit 0"
st $LC run e2e/g/bad --limit two -- true
lg_eq "$rc" 64 "--limit two"
st $LC status e2e/g/bad --shared
lg_eq "$rc" 64 "status --shared"
st $LC run e2e/g/bad --limit 1001 -- true
lg_eq "$rc" 65 "--limit 1001: the server's 400"
st $LC status e2e/g/bad
lg_eq "$rc" 1 "refused runs left nothing"

# --- three `run --limit 2` at once: at most two at a time, two together
for id in a b c; do
	$LC run e2e/g/sem --limit 2 --ttl 10 --wait 30 -- \
	    sh "$T/job.sh" "$id" "$T/sem" 2 2>>"$T/sem.err" &
	eval "pid_$id=\$!"
done
for id in a b c; do
	eval "wait \$pid_$id"
	lg_eq "$?" 0 "semaphore run $id: $(cat "$T/sem.err")"
done
lg_eq "$(grep -c '^start' "$T/sem")" 3 "three starts"
lg_eq "$(grep -c '^end .* met$' "$T/sem")" 3 \
    "every run saw a second one running: $(cat "$T/sem")"
lg_eq "$(most_at_once "$T/sem")" 2 "at most two at once: $(cat "$T/sem")"

# --- status and refusals while two hold a --limit 2 lock
$LC run e2e/g/stat --limit 2 --ttl 30 --holder "job 1" --purpose "it's" -- \
    sh "$T/job.sh" 1 "$T/stat" 2 "$T/stat.go" 2>"$T/stat1.err" &
s1=$!
wait_grep "$T/stat" '^start 1'
$LC run e2e/g/stat --limit 2 --ttl 30 --holder "job 2" -- \
    sh "$T/job.sh" 2 "$T/stat" 2 "$T/stat.go" 2>"$T/stat2.err" &
s2=$!
wait_grep "$T/stat" '^start 2'
st $LC status e2e/g/stat
lg_eq "$rc" 0 "status of a semaphore: $(cat "$T/err")"
(
	eval "$(cat "$T/out")"
	lg_eq "$LOCKGATE_MODE" exclusive "status: mode"
	lg_eq "$LOCKGATE_LIMIT" 2 "status: limit"
	lg_eq "$LOCKGATE_HOLDERS" 2 "status: holders"
	lg_eq "$LOCKGATE_HOLDER_0_HOLDER,$LOCKGATE_HOLDER_1_HOLDER" \
	    "job 1,job 2" "status: each holder, earliest first"
	lg_eq "$LOCKGATE_HOLDER_0_PURPOSE" "it's" "status: a holder's purpose"
	lg_eq "$LOCKGATE_HOLDER_1_OWNER" ci-groups "status: a holder's owner"
	[ -n "$LOCKGATE_HOLDER_1_EXPIRES_AT" ] || lg_fail "status: no expiry"
	[ "$LOCKGATE_HOLDER_0_FENCING_TOKEN" != "$LOCKGATE_HOLDER_1_FENCING_TOKEN" ] ||
		lg_fail "status: one fencing token for two leases"
) || exit 1
# list: one line per holder of the semaphore, its name repeated.
st $LC list e2e/g/stat
lg_eq "$rc" 0 "list of a semaphore: $(cat "$T/err")"
lg_eq "$(awk -F'\t' 'NR > 1 { printf "%s|%s|%s|%s;", $1, $2, $3, $6 }' "$T/out")" \
    "e2e/g/stat|ci-groups|job 1|held;e2e/g/stat|ci-groups|job 2|held;" \
    "list: a line per holder: $(cat "$T/out")"
st $LC run e2e/g/stat --limit 2 -- true
lg_eq "$rc" 73 "a third lease of two"
grep -q 'held by 2 of 2 leases: ci-groups (job 1)' "$T/err" ||
	lg_fail "a full semaphore names its holders: $(cat "$T/err")"
st $LC run e2e/g/stat --limit 3 --wait 20 -- true
lg_eq "$rc" 73 "another limit"
grep -q 'limit_mismatch' "$T/err" && grep -q 'limit=2' "$T/err" ||
	lg_fail "limit_mismatch names the current limit: $(cat "$T/err")"
grep -q 'waiting' "$T/err" && lg_fail "waited on a limit_mismatch: $(cat "$T/err")"
st $LC run e2e/g/stat --shared -- true
lg_eq "$rc" 73 "a reader on a semaphore"
grep -q 'limit_mismatch' "$T/err" || lg_fail "reader: $(cat "$T/err")"
st $LC run e2e/g/stat -- true
lg_eq "$rc" 73 "an exclusive run on a semaphore"
: >"$T/stat.go"
wait $s1
lg_eq "$?" 0 "status run 1: $(cat "$T/stat1.err")"
wait $s2
lg_eq "$?" 0 "status run 2: $(cat "$T/stat2.err")"

# --- --shared runs run together; an exclusive run waits for all of them
for id in r1 r2 r3; do
	$LC run e2e/g/rw --shared --ttl 30 --wait 30 -- \
	    sh "$T/job.sh" "$id" "$T/rw" 3 "$T/rw.go" 2>>"$T/rw.err" &
	eval "pid_$id=\$!"
done
i=0
while [ "$(grep -c '^start' "$T/rw" 2>/dev/null)" != 3 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
st $LC status e2e/g/rw
(
	eval "$(cat "$T/out")"
	lg_eq "$LOCKGATE_MODE" shared "shared status: mode"
	lg_eq "$LOCKGATE_LIMIT" "" "shared status: no limit"
	lg_eq "$LOCKGATE_HOLDERS" 3 "shared status: three readers"
) || exit 1
$LC run e2e/g/rw --ttl 30 --wait 30 -- sh "$T/job.sh" w "$T/rw" 1 \
    2>"$T/writer.err" &
writer=$!
wait_grep "$T/writer.err" 'waiting for e2e/g/rw: held by 3 shared lease'
: >"$T/rw.go"
for id in r1 r2 r3; do
	eval "wait \$pid_$id"
	lg_eq "$?" 0 "reader $id: $(cat "$T/rw.err")"
done
wait $writer
lg_eq "$?" 0 "the writer: $(cat "$T/writer.err")"
lg_eq "$(grep -c '^end r[123] .* met$' "$T/rw")" 3 \
    "the three readers ran together: $(cat "$T/rw")"
sort -k3,3n "$T/rw" | awk '
	$1 == "end" && $2 ~ /^r/ { ends++ }
	$1 == "start" && $2 == "w" { exit (ends == 3 ? 0 : 1) }' ||
	lg_fail "the writer started before every reader ended: $(cat "$T/rw")"

# --- force-release of a group: which lease, by its fencing token
o1=$(LOCKGATE_TOKEN=$(lg_token fr-1) $LC acquire e2e/g/fr --limit 2 --ttl 60 --holder one)
o2=$(LOCKGATE_TOKEN=$(lg_token fr-2) $LC acquire e2e/g/fr --limit 2 --ttl 60 --holder two)
tok1=$(eval "$o1"; echo "$LOCKGATE_FENCING_TOKEN")
tok2=$(eval "$o2"; echo "$LOCKGATE_FENCING_TOKEN")
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/g/fr --reason test
lg_eq "$rc" 64 "force-release of two leases without --fencing-token"
grep -q 'fencing-token' "$T/err" || lg_fail "says to name the lease: $(cat "$T/err")"
st env LOCKGATE_TOKEN="$ADMIN" $LC force-release e2e/g/fr --reason test \
    --fencing-token "$tok2"
lg_eq "$rc" 0 "force-release one lease: $(cat "$T/err")"
grep -q "force-released e2e/g/fr (held by fr-2 (two), fencing token $tok2)" "$T/err" ||
	lg_fail "force-release says whose lease: $(cat "$T/err")"
st $LC status e2e/g/fr
(
	eval "$(cat "$T/out")"
	lg_eq "$LOCKGATE_HOLDERS" 1 "one lease left"
	lg_eq "$LOCKGATE_HOLDER_0_FENCING_TOKEN" "$tok1" "the other lease left"
) || exit 1

[ -z "$(ls -A "$T/tmp")" ] || lg_fail "lockctl left files behind: $(ls -A "$T/tmp")"
lg_stop "$LG_PID"
echo ok
