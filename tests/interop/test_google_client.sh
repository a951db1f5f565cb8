#!/bin/sh
# Interop: Google's own Node.js client (@google-cloud/storage) does to the
# fake what lockgate does to a lock object (google_client.js: create with
# ifGenerationMatch=0, patch and delete with both preconditions, list by
# prefix in pages) and judges the answers as it judges Cloud Storage's.
# The gcs and emulator dialects must pass, as Cloud Storage and Google's
# emulator do; the fake-gcs-server and firebase dialects must fail, so
# the check is seen to fail where a storage cannot referee locks.
# tests/interop/run.sh (`make interop`) installs the client into
# build/interop first.
set -e
LG_STORE=gs
. tests/e2e/lib.sh

MODS=build/interop/node_modules
[ -d "$MODS/@google-cloud/storage" ] ||
    lg_fail "no @google-cloud/storage in $MODS: run make interop"
FAKE=${LG_FAKE_GCS_URL#http://}

for d in gcs:0 emulator:0 fake-gcs-server:1 firebase:1; do
	dialect=${d%:*}
	lg_fake "config?dialect=$dialect" >/dev/null
	[ "$dialect" = gcs ] || [ "$dialect" = firebase ] ||
	    lg_fake_bucket "gs://lockgate-interop/"
	set +e
	# Not through STORAGE_EMULATOR_HOST, which the Node.js client takes
	# as its JSON API root (/b/..., not /storage/v1/b/...) and only with
	# a scheme; google_client.js sets apiEndpoint instead.
	env -u STORAGE_EMULATOR_HOST NODE_PATH=$MODS timeout 60 \
	    node tests/interop/google_client.js "$FAKE" \
	    lockgate-interop >"$LG_TMP/$dialect.out" 2>&1
	rc=$?
	set -e
	[ "$rc" -le 1 ] || lg_fail "$dialect: google_client.js exited $rc: $(cat "$LG_TMP/$dialect.out")"
	[ "$rc" = "${d#*:}" ] ||
	    lg_fail "$dialect: Google's client $([ "$rc" = 0 ] && echo passed || echo failed) it: $(cat "$LG_TMP/$dialect.out")"
	echo "$dialect: $(grep -c '^ok' "$LG_TMP/$dialect.out") steps as Cloud Storage answers them$(
	    [ "$rc" = 1 ] && echo ", then: $(grep -m 1 '^FAIL' "$LG_TMP/$dialect.out")")"
done
