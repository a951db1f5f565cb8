#!/bin/sh
# lockctl run across a lockgate restart, under dash: the lease lives in the
# store, so refreshes that fail while the server is down are retried, the
# command runs to its end, nobody else gets the lock meanwhile, and it is
# released at the end.  And when the server is gone for good, the command
# is stopped before its lease can expire, with exit 75.  On a durable
# store: gs:// when LG_STORE says so (the fake keeps running across the
# restart, as a bucket would), file:// otherwise (mem:// keeps nothing).
[ "${LG_STORE:-}" = gs ] || LG_STORE=file
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/lockctl
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
port=${LG_URL##*:}
export LOCKGATE_URL="$LG_URL"
LOCKGATE_TOKEN=$(lg_token ci-restart)
export LOCKGATE_TOKEN
unset LOCKGATE_TOKEN_FILE LOCKGATE_LOCK LOCKGATE_LEASE_ID \
    ACTIONS_ID_TOKEN_REQUEST_URL 2>/dev/null

# ttl 8: refresh every 1 s; a 2 s outage leaves plenty of the lease.
$LC run e2e/restart --ttl 8 --grace 1 -- sh -c '
	echo "$LOCKGATE_FENCING_TOKEN" >"$0.tok"
	sleep 6
	echo done >"$0"' "$T/cmd" 2>"$T/run.err" &
runner=$!
i=0
while [ ! -s "$T/cmd.tok" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
tok=$(cat "$T/cmd.tok")
[ -n "$tok" ] || lg_fail "the command did not start: $(cat "$T/run.err")"
sleep 1
lg_stop
sleep 2
# Same port, same store directory.
lg_start --listen "127.0.0.1:$port"
lg_eq "$LG_URL" "$LOCKGATE_URL" "restarted on the same address"
$LC status e2e/restart >"$T/status" 2>&1
lg_eq "$?" 0 "held after the restart: $(cat "$T/status")"
grep -q "^LOCKGATE_FENCING_TOKEN='$tok'$" "$T/status" ||
	lg_fail "same lease after the restart: $(cat "$T/status")"
$LC acquire e2e/restart --ttl 2 >/dev/null 2>&1
lg_eq "$?" 73 "nobody else gets the lock after the restart"
wait $runner
lg_eq "$?" 0 "the run across a restart: $(cat "$T/run.err")"
lg_eq "$(cat "$T/cmd")" done "the command ran to its end"
grep -q 'retrying' "$T/run.err" ||
	lg_fail "no refresh failed while the server was down: $(cat "$T/run.err")"
grep -q 'lost' "$T/run.err" && lg_fail "lease reported lost: $(cat "$T/run.err")"
$LC status e2e/restart >/dev/null 2>&1
lg_eq "$?" 1 "released at the end"

# The server dies for good: refreshes fail, and lockctl stops the command
# before the lease could expire (ttl 4), and exits 75.
$LC run e2e/gone --ttl 4 --grace 1 -- sh -c '
	echo $$ >"$0.pid"
	sleep 30
	echo end >"$0.end"' "$T/gone" 2>"$T/gone.err" &
runner=$!
i=0
while [ ! -s "$T/gone.pid" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -s "$T/gone.pid" ] || lg_fail "the command did not start: $(cat "$T/gone.err")"
t0=$(date +%s)
lg_kill9
wait $runner
rc=$?
took=$(($(date +%s) - t0))
lg_eq "$rc" 75 "run whose server is gone: $(cat "$T/gone.err")"
[ $took -le 4 ] || lg_fail "the command was stopped $took s after the last refresh could succeed (ttl 4)"
[ -e "$T/gone.end" ] && lg_fail "the command went on without a lease"
grep -q 'lost' "$T/gone.err" || lg_fail "no word of the lost lease: $(cat "$T/gone.err")"
[ -z "$(ls -A "$T/tmp")" ] || lg_fail "lockctl left files behind: $(ls -A "$T/tmp")"
echo ok
