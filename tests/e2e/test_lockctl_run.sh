#!/bin/sh
# lockctl run against a real lockgate, under dash: concurrent runs never
# overlap; a run three TTLs long keeps its lease; a force-released lease
# stops the command (and its children) within refresh_interval + grace and
# exits 75 (77 when its token expired meanwhile); SIGTERM and SIGINT to
# lockctl stop the command and release at once; a wait longer than one
# request's wait is re-asked.
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
MAIN_PID=$LG_PID
export LOCKGATE_URL="$LG_URL"
LOCKGATE_TOKEN=$(lg_token ci-run)
export LOCKGATE_TOKEN
ADMIN=$(lg_token ops-admin admin)
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID \
    ACTIONS_ID_TOKEN_REQUEST_URL 2>/dev/null

now_ms() { date +%s%3N; }

# 0 when pid $1 runs; zombies do not count (PID 1 of a container may not
# reap orphans).
running() {
	kill -0 "$1" 2>/dev/null || return 1
	case $(ps -o stat= -p "$1" 2>/dev/null) in
	Z*) return 1 ;;
	esac
	return 0
}

# Wait (bounded: 100 x 0.1 s) until file $1 exists.
wait_file() {
	i=0
	while [ ! -s "$1" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -s "$1" ] || lg_fail "timed out waiting for $1"
}

# --- three concurrent runs on one lock never overlap
for id in a b c; do
	$LC run e2e/overlap --ttl 2 --wait 30 -- sh -c '
		echo "start $0 $(date +%s%N)" >>"$1"
		sleep 1
		echo "end $0 $(date +%s%N)" >>"$1"' "$id" "$T/marks" \
	    2>>"$T/overlap.err" &
	eval "pid_$id=\$!"
done
for id in a b c; do
	eval "wait \$pid_$id"
	lg_eq "$?" 0 "concurrent run $id: $(cat "$T/overlap.err")"
done
lg_eq "$(wc -l <"$T/marks" | tr -d ' ')" 6 "six marks"
awk '
	NR % 2 == 1 { if ($1 != "start" || $3 < last) bad = 1; who = $2; last = $3 }
	NR % 2 == 0 { if ($1 != "end" || $2 != who || $3 < last) bad = 1; last = $3 }
	END { exit bad }' "$T/marks" || lg_fail "runs overlapped: $(cat "$T/marks")"

# --- a command running three TTLs long keeps the lock throughout
$LC run e2e/long --ttl 2 -- sh -c '
	echo "$LOCKGATE_FENCING_TOKEN" >"$0.tok"; sleep 7; echo done >"$0"' \
    "$T/long" 2>"$T/long.err" &
runner=$!
wait_file "$T/long.tok"
tok=$(cat "$T/long.tok")
checks=0
while kill -0 $runner 2>/dev/null && [ ! -e "$T/long" ] && [ $checks -lt 30 ]; do
	$LC status e2e/long >"$T/long.st" 2>&1
	rc=$?
	[ -e "$T/long" ] && break
	lg_eq "$rc" 0 "status while the long run holds the lock: $(cat "$T/long.st")"
	grep -q "^LOCKGATE_FENCING_TOKEN='$tok'" "$T/long.st" ||
		lg_fail "another lease took the lock: $(cat "$T/long.st")"
	$LC acquire e2e/long --ttl 2 >/dev/null 2>&1
	rc=$?
	# The command may end, and its lease be released, between the status
	# above and this acquire: a grant is then right. The command writes
	# its mark before lockctl releases, so a grant with no mark is a
	# second holder.
	[ $rc -eq 0 ] && [ -e "$T/long" ] && break
	lg_eq "$rc" 73 "a competitor cannot take the long-held lock"
	checks=$((checks + 1))
	sleep 1
done
wait $runner
lg_eq "$?" 0 "the long run: $(cat "$T/long.err")"
lg_eq "$(cat "$T/long")" done "the long command finished"
[ $checks -ge 3 ] || lg_fail "only $checks checks during the long run"

# --- a force-released lease stops the command and its children: exit 75
$LC run e2e/forced --ttl 2 --grace 1 -- sh -c '
	sleep 60 &
	echo $! >"$0.child"
	echo $$ >"$0.pid"
	wait
	echo end >"$0.end"' "$T/forced" 2>"$T/forced.err" &
runner=$!
wait_file "$T/forced.pid"
wait_file "$T/forced.child"
t0=$(now_ms)
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $ADMIN" "$LG_URL/v1/locks/e2e/forced:forceRelease")
lg_eq "$code" 204 "forceRelease"
wait $runner
rc=$?
took=$(($(now_ms) - t0))
lg_eq "$rc" 75 "run whose lease was force-released: $(cat "$T/forced.err")"
# refresh_interval (1 s for ttl 2) + grace (1 s) + request and scheduling slack
[ $took -le 4500 ] || lg_fail "the command was stopped after $took ms"
[ -e "$T/forced.end" ] && lg_fail "the command went on after losing its lease"
running "$(cat "$T/forced.pid")" && lg_fail "the command still runs"
running "$(cat "$T/forced.child")" && lg_fail "the command's child still runs"
grep -q 'lost' "$T/forced.err" || lg_fail "no word of the lost lease: $(cat "$T/forced.err")"

# --- a token that expires during the run: refreshes are refused (401)
# until the lease can no longer be trusted, then the command is stopped
# and lockctl exits 77 (not authenticated), not 75 (lost); the release it
# then tries is refused too, and said so.  The token is good for about
# 3 s more, under the server's 60 s leeway.
now=$(date +%s)
SHORT=$(lg_jwt "{\"sub\":\"ci-run\",\"iat\":$((now - 60)),\"exp\":$((now - 57))}")
LOCKGATE_TOKEN=$SHORT $LC run e2e/expiring --ttl 4 --grace 1 -- sh -c '
	echo $$ >"$0.pid"
	sleep 60 &
	wait
	echo end >"$0.end"' "$T/expiring" 2>"$T/expiring.err" &
runner=$!
wait_file "$T/expiring.pid"
wait $runner
lg_eq "$?" 77 "run whose token expired: $(cat "$T/expiring.err")"
[ -e "$T/expiring.end" ] && lg_fail "the command went on after its refreshes were refused"
running "$(cat "$T/expiring.pid")" && lg_fail "the command still runs"
grep -q 'HTTP 401' "$T/expiring.err" || lg_fail "no word of the 401: $(cat "$T/expiring.err")"
grep -q '^lockctl: release e2e/expiring: .*401' "$T/expiring.err" ||
    lg_fail "the refused release went unsaid: $(cat "$T/expiring.err")"

# --- SIGTERM to lockctl reaches the command, and the lock is released
$LC run e2e/term --ttl 3 -- sh -c '
	trap "echo term >\"\$0.term\"; exit 9" TERM
	echo $$ >"$0.pid"
	sleep 60 &
	wait' "$T/term" 2>"$T/term.err" &
runner=$!
wait_file "$T/term.pid"
kill -TERM $runner
wait $runner
lg_eq "$?" 9 "lockctl's status after SIGTERM is the command's"
lg_eq "$(cat "$T/term.term")" term "the command got SIGTERM"
$LC status e2e/term >/dev/null 2>&1
lg_eq "$?" 1 "released at once after SIGTERM (not by the TTL)"

# --- SIGINT (Ctrl-C) too: lockctl must start with SIGINT not ignored, which
# a background job of a script never is, hence the exec through python3
python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' dash "$PWD/client/lockctl" run e2e/int \
    --ttl 3 -- sh -c '
	trap "echo term >\"\$0.term\"; exit 8" TERM
	echo $$ >"$0.pid"
	sleep 60 &
	wait' "$T/int" 2>"$T/int.err" &
runner=$!
wait_file "$T/int.pid"
kill -INT $runner
wait $runner
lg_eq "$?" 8 "lockctl's status after SIGINT is the command's"
lg_eq "$(cat "$T/int.term")" term "SIGINT reached the command as SIGTERM"
$LC status e2e/int >/dev/null 2>&1
lg_eq "$?" 1 "released at once after SIGINT"

# --- Stopped while still waiting: lockctl leaves nothing behind.  Its
# last request may be granted after it stopped listening; it asks once
# more with its key and gives back whatever that finds, and the server
# gives back a waiter's grant whose client left.  So once the holder
# releases, the lock is free, not held by the cancelled run until its TTL.
eval "$(LOCKGATE_TOKEN=$(lg_token other-job) $LC acquire e2e/cancelled --ttl 60)"
held_by_other=$LOCKGATE_LEASE_ID
$LC run e2e/cancelled --ttl 60 --wait 30 -- true 2>"$T/cancel.err" &
runner=$!
sleep 1 # it waits
kill -TERM $runner
wait $runner
LOCKGATE_TOKEN=$(lg_token other-job) $LC release e2e/cancelled \
    --lease-id "$held_by_other" || lg_fail "the holder's release"
sleep 1
$LC status e2e/cancelled >/dev/null 2>&1
lg_eq "$?" 1 "a run cancelled while waiting holds nothing ($(cat "$T/cancel.err"))"

# --- --wait longer than one request's wait: lockctl asks again.  On a
# server whose maximum wait (1 s) is under lockctl's own (55 s), the first
# ask gets a 400 that states the maximum, and lockctl uses it.
LG_ENV="LOCKGATE_MAX_WAIT=1" lg_start
short=$LG_URL
out=$(LOCKGATE_URL=$short $LC acquire e2e/rewait --ttl 30)
eval "$out"
(sleep 3; LOCKGATE_URL=$short $LC release e2e/rewait --lease-id "$LOCKGATE_LEASE_ID") &
releaser=$!
t0=$(now_ms)
LOCKGATE_URL=$short $LC run e2e/rewait --ttl 2 --wait 15 -- true 2>"$T/rewait.err"
lg_eq "$?" 0 "run after several 1 s waits: $(cat "$T/rewait.err")"
took=$(($(now_ms) - t0))
[ $took -ge 2500 ] || lg_fail "got a held lock after $took ms"
wait $releaser
LOCKCTL_MAX_POLL=1 $LC run e2e/rewait2 --ttl 2 --wait 0 -- true
lg_eq "$?" 0 "free lock with wait 0"
unset LOCKGATE_LOCK LOCKGATE_LEASE_ID LOCKGATE_FENCING_TOKEN

[ -z "$(ls -A "$T/tmp")" ] || lg_fail "lockctl left files behind: $(ls -A "$T/tmp")"
# Both instances stopped by lg_stop, not left to the EXIT trap: each exits
# 0 with a clean sanitizer log, or the test fails.
lg_stop "$LG_PID"
lg_stop "$MAIN_PID"
echo ok
