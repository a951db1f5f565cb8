#!/bin/sh
# --check and /readyz on gs://: the bucket must answer with the configured
# credentials; a missing bucket, a bad bucket name or a dead token source
# fail with a message that says which; a storage that does not refuse
# what its preconditions forbid is refused; one that cannot be asked yet
# is waited for, without listening meanwhile.  Always runs against
# fake_gcs.
LG_STORE=gs
. tests/e2e/lib.sh
out=$LG_TMP/out
check() { # STORE [ENV...]: run --check; sets $rc, output in $out
	store=$1
	shift
	set +e
	env LOCKGATE_JWT_SECRET="$LG_SECRET" "$@" timeout 30 "$LG_BIN" --check \
	    --store "$store" >"$out" 2>&1
	rc=$?
	set -e
}

check gs://lockgate-e2e/locks/
lg_eq "$rc" 0 "--check on a reachable bucket"
check gs://missing-bkt/locks/
[ "$rc" -ne 0 ] || lg_fail "--check passed on a missing bucket"
grep -q "bucket 'missing-bkt' not found" "$out" || lg_fail "--check message: $(cat "$out")"
check gs://A/
[ "$rc" -ne 0 ] || lg_fail "--check passed on a bad bucket name"
# Credentials from a metadata server that is not there.
check gs://lockgate-e2e/ STORAGE_EMULATOR_HOST= GCE_METADATA_HOST=127.0.0.1:1 \
    LOCKGATE_GCS_ENDPOINT="$LG_FAKE_GCS_URL" LOCKGATE_GCS_RETRY_TOTAL_MS=2000
[ "$rc" -ne 0 ] || lg_fail "--check passed without credentials"
grep -q "metadata server" "$out" || lg_fail "--check message: $(cat "$out")"

# /readyz follows the bucket: 503 with Retry-After while it fails.
LG_ENV="LOCKGATE_GCS_RETRY_TOTAL_MS=500"
lg_start
code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/readyz")
lg_eq "$code" 200 "readyz"
lg_fake "fault?op=list&kind=503&count=-1" >/dev/null
code=$(lg_curl -D "$LG_TMP/h" -o /dev/null -w '%{http_code}' "$LG_URL/readyz")
lg_eq "$code" 503 "readyz while the bucket fails"
grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "readyz 503 without Retry-After"
lg_fake clear-faults >/dev/null
code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/readyz")
lg_eq "$code" 200 "readyz again"
lg_stop

# Serving, the bucket goes missing (a fault makes every insert and list
# 404, as a deleted bucket would; at start lockgate waits for a bucket,
# below): a 404 to an insert or a list can only mean the bucket, so
# acquire and list answer 503 storage_unavailable with Retry-After and a
# message naming the bucket (never a 500, never "not held"), and the
# request's log line says why.
lg_start
lg_fake "fault?op=insert&kind=404&count=-1" >/dev/null
lg_fake "fault?op=list&kind=404&count=-1" >/dev/null
A="Authorization: Bearer $(lg_token alice)"
for req in "POST /v1/locks/x:acquire?ttl=30" "GET /v1/locks"; do
	code=$(lg_curl -D "$LG_TMP/h" -o "$LG_TMP/b" -w '%{http_code}' -X "${req% *}" \
	    -H "$A" "$LG_URL${req#* }")
	lg_eq "$code" 503 "$req on a missing bucket: $(cat "$LG_TMP/b")"
	lg_eq "$(lg_json error.code <"$LG_TMP/b")" storage_unavailable "$req: error code"
	grep -q "bucket 'lockgate-e2e' not found (check --store)" "$LG_TMP/b" ||
	    lg_fail "$req: message does not name the bucket: $(cat "$LG_TMP/b")"
	grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "$req: 503 without Retry-After"
done
# The acquire's log line: a loop writes its lines in batches, within a few
# ms, so look for up to 2 s.
why_logged() {
	grep '"message":"request"' "$LG_LOG" | grep '"route":"acquire"' |
	    grep '"status":503' | grep -q "bucket 'lockgate-e2e' not found"
}
i=0
until why_logged || [ $i -ge 20 ]; do
	sleep 0.1
	i=$((i + 1))
done
why_logged ||
    lg_fail "the acquire's log line does not say why: $(grep '"route":"acquire"' "$LG_LOG")"
lg_fake clear-faults >/dev/null
lg_stop

# A storage that cannot referee locks: the fake's firebase dialect
# (firebase-tools' emulator) applies the writes whose preconditions fail;
# its fake-gcs-server dialect (fsouza/fake-gcs-server) leaves a patched
# object's metageneration at 1.  --check fails and lockgate will not serve
# on either, each saying why, and the object it asked with is gone.  On
# the same fake as Cloud Storage, both go on (above).
for d in "firebase:applied a second insert" \
    "fake-gcs-server:gave metageneration 1, not 2"; do
	lg_fake "config?dialect=${d%%:*}" >/dev/null
	lg_fake_bucket gs://lockgate-e2e/ # fake-gcs-server keeps none
	check gs://lockgate-e2e/locks/
	[ "$rc" -ne 0 ] || lg_fail "--check passed on ${d%%:*}"
	grep -q "the storage cannot referee locks: .*${d#*:}" "$out" ||
	    lg_fail "--check message on ${d%%:*}: $(cat "$out")"
	set +e
	env LOCKGATE_JWT_SECRET="$LG_SECRET" timeout 30 "$LG_BIN" \
	    --listen 127.0.0.1:0 --store gs://lockgate-e2e/locks/ >"$out" 2>&1
	rc=$?
	set -e
	lg_eq "$rc" 2 "exit status on ${d%%:*}"
	grep -q "\"severity\":\"CRITICAL\",\"message\":\"the storage cannot referee locks: .*${d#*:}.*two callers could hold one lock" \
	    "$out" || lg_fail "refusal on ${d%%:*}: $(cat "$out")"
	! grep -q '"message":"listening"' "$out" || lg_fail "it listened: $(cat "$out")"
	lg_eq "$(lg_fake_count objects)" 0 "objects left behind by the question"
done
lg_fake "config?dialect=gcs" >/dev/null

# A storage that cannot be asked yet (its bucket not made: Google's
# emulator keeps none) is asked again and again, a warning each time,
# and lockgate does not listen until it has answered.  --check asks once
# and fails.
lg_fake "config?dialect=emulator" >/dev/null
check gs://late-bkt/locks/ LOCKGATE_GCS_RETRY_TOTAL_MS=300
lg_eq "$rc" 1 "--check on a storage that has no bucket yet"
# waiting_start NAME BUCKET: start lockgate in the background on BUCKET,
# its log in $LG_TMP/NAME.log; sets $pid and $log.
waiting_start() {
	log=$LG_TMP/$1.log
	env LOCKGATE_JWT_SECRET="$LG_SECRET" LOCKGATE_GCS_RETRY_TOTAL_MS=300 \
	    "$LG_BIN" --listen 127.0.0.1:0 --store "gs://$2/locks/" >"$log" 2>&1 &
	pid=$!
	LG_PIDS="$LG_PIDS $pid"
}
# logged PATTERN: whether $log has a line matching PATTERN within 15 s
# (the pauses between askings are 1, 2 and 4 s).
logged() { lg_wait_line "$log" "$1" 15; }
WAITING='"severity":"WARNING","message":"could not check that the storage referees locks'
waiting_start late late-bkt
logged "$WAITING" || lg_fail "no warning while the bucket is missing: $(cat "$log")"
grep "$WAITING" "$log" | grep -q "bucket 'late-bkt' not found" ||
    lg_fail "the warning does not say why: $(cat "$log")"
logged "$WAITING.*\"retry_in_s\":2" || lg_fail "not asked again: $(cat "$log")"
! grep -q '"message":"listening"' "$log" || lg_fail "it listened unchecked: $(cat "$log")"
lg_fake_bucket gs://late-bkt/
logged '"message":"listening"' || lg_fail "not serving once the bucket was made: $(cat "$log")"
grep -q '"message":"the storage referees locks as Cloud Storage does' "$log" ||
    lg_fail "served without the storage's answer: $(cat "$log")"
port=$(sed -n 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' "$log")
code=$(lg_curl -o "$LG_TMP/b" -w '%{http_code}' -X POST -H "$A" \
    "http://127.0.0.1:$port/v1/locks/late:acquire?ttl=30")
lg_eq "$code" 200 "acquire once the storage answered: $(cat "$LG_TMP/b")"
lg_stop "$pid"

# A signal while waiting ends the wait: exit 0, never listening.
waiting_start never never-bkt
logged "$WAITING" || lg_fail "no warning while the bucket is missing: $(cat "$log")"
lg_stop "$pid"
grep -q '"message":"stopped before serving".*"signal":"SIGTERM"' "$log" ||
    lg_fail "the stop is not said: $(cat "$log")"
! grep -q '"message":"listening"' "$log" || lg_fail "it listened unchecked: $(cat "$log")"

# The storage that answers at last may be one that cannot referee locks:
# lockgate exits 2 then, as at once, never having listened.
lg_fake reset >/dev/null # the lease on late-bkt
lg_fake "config?dialect=firebase" >/dev/null
lg_fake "fault?op=insert&kind=503&count=-1" >/dev/null
waiting_start lax lockgate-e2e
logged "$WAITING" || lg_fail "no warning while inserts fail: $(cat "$log")"
lg_fake clear-faults >/dev/null
lg_wait_exit "$pid" 15 "lockgate on a storage that ignores preconditions"
lg_eq "$LG_RC" 2 "exit status once the storage answered that it ignores preconditions"
grep -q '"severity":"CRITICAL","message":"the storage cannot referee locks: ' "$log" ||
    lg_fail "refusal: $(cat "$log")"
! grep -q '"message":"listening"' "$log" || lg_fail "it listened: $(cat "$log")"
lg_eq "$(lg_fake_count objects)" 0 "objects left behind by the question"
lg_fake "config?dialect=gcs" >/dev/null
echo ok
