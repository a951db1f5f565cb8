#!/bin/sh
# --check and /readyz on gs://: the bucket must answer with the configured
# credentials; a missing bucket, a bad bucket name or a dead token source
# fail with a message that says which; a storage that does not refuse
# what its preconditions forbid is refused.  Always runs against fake_gcs.
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

# Serving on a missing bucket: a 404 to an insert or a list can only mean
# the bucket, so acquire and list answer 503 storage_unavailable with
# Retry-After and a message naming the bucket (never a 500, never "not
# held"), and the request's log line says why.
LG_STORE_URL=gs://missing-bkt/locks/
lg_start
A="Authorization: Bearer $(lg_token alice)"
for req in "POST /v1/locks/x:acquire?ttl=30" "GET /v1/locks"; do
	code=$(lg_curl -D "$LG_TMP/h" -o "$LG_TMP/b" -w '%{http_code}' -X "${req% *}" \
	    -H "$A" "$LG_URL${req#* }")
	lg_eq "$code" 503 "$req on a missing bucket: $(cat "$LG_TMP/b")"
	lg_eq "$(lg_json error.code <"$LG_TMP/b")" storage_unavailable "$req: error code"
	grep -q "bucket 'missing-bkt' not found (check --store)" "$LG_TMP/b" ||
	    lg_fail "$req: message does not name the bucket: $(cat "$LG_TMP/b")"
	grep -qi '^Retry-After: [0-9]' "$LG_TMP/h" || lg_fail "$req: 503 without Retry-After"
done
# The acquire's log line: a loop writes its lines in batches, within a few
# ms, so look for up to 2 s.
why_logged() {
	grep '"message":"request"' "$LG_LOG" | grep '"route":"acquire"' |
	    grep '"status":503' | grep -q "bucket 'missing-bkt' not found"
}
i=0
until why_logged || [ $i -ge 20 ]; do
	sleep 0.1
	i=$((i + 1))
done
why_logged ||
    lg_fail "the acquire's log line does not say why: $(grep '"route":"acquire"' "$LG_LOG")"
lg_stop

# A storage that applies the writes whose preconditions fail (the fake's
# firebase dialect: firebase-tools' emulator) cannot referee locks:
# --check fails and lockgate will not serve on it, each saying why, and
# the object it asked with is gone.  On the same fake as Cloud Storage,
# both go on (above).
lg_fake "config?dialect=firebase" >/dev/null
check gs://lockgate-e2e/locks/
[ "$rc" -ne 0 ] || lg_fail "--check passed on a storage that ignores preconditions"
grep -q "the storage cannot referee locks: the storage applied a second insert" \
    "$out" || lg_fail "--check message: $(cat "$out")"
set +e
env LOCKGATE_JWT_SECRET="$LG_SECRET" timeout 30 "$LG_BIN" \
    --listen 127.0.0.1:0 --store gs://lockgate-e2e/locks/ >"$out" 2>&1
rc=$?
set -e
lg_eq "$rc" 2 "exit status on a storage that ignores preconditions"
grep -q '"severity":"CRITICAL","message":"the storage cannot referee locks: .*two callers could hold one lock' \
    "$out" || lg_fail "refusal: $(cat "$out")"
! grep -q '"message":"listening"' "$out" || lg_fail "it listened: $(cat "$out")"
lg_eq "$(lg_fake_count objects)" 0 "objects left behind by the question"
lg_fake "config?dialect=gcs" >/dev/null
echo ok
