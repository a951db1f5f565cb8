#!/bin/sh
# Interop: the Cloud Storage emulator of firebase-tools, run, not read.
#  1. The fake's firebase dialect answers lockgate's requests as the
#     emulator does, request by request (compare.py).
#  2. lockgate --check refuses the emulator, naming the write that went
#     wrong.
#  3. lockgate started on it exits 2 without listening, and its check
#     leaves no object behind.
# tests/interop/run.sh (`make interop`) installs firebase-tools into
# build/interop first.
set -e
LG_STORE=gs
LG_GCS_DIALECT=firebase
. tests/e2e/lib.sh

MODS=build/interop/node_modules
BUCKET=lockgate-interop
version=$(node -p "require('./$MODS/firebase-tools/package.json').version") ||
    lg_fail "no firebase-tools in $MODS: run make interop"

# The emulator (it is told its port: it cannot take 0 and say which).
port=$(lg_free_port) || lg_fail "no free port"
TMPDIR=$LG_TMP NODE_PATH=$MODS node tests/interop/firebase_storage.js "$port" \
    >"$LG_TMP/firebase.log" 2>&1 &
FB_PID=$!
LG_PIDS="$LG_PIDS $FB_PID"
lg_wait_line "$LG_TMP/firebase.log" "^listening $port" 30 ||
    lg_fail "the emulator did not start: $(cat "$LG_TMP/firebase.log")"
FB=127.0.0.1:$port

# 1. The fake against the emulator.
python3 tests/interop/compare.py "$BUCKET" "firebase=$FB" \
    "fake=${LG_FAKE_GCS_URL#http://}" >"$LG_TMP/compare.out" ||
    { cat "$LG_TMP/compare.out" >&2; lg_fail "the fake's firebase dialect is not the emulator"; }
tail -n 1 "$LG_TMP/compare.out"

# 2. --check.
set +e
STORAGE_EMULATOR_HOST=$FB LOCKGATE_JWT_SECRET="$LG_SECRET" timeout 60 "$LG_BIN" \
    --check --store "gs://$BUCKET/locks/" >"$LG_TMP/check.out" 2>&1
rc=$?
set -e
lg_eq "$rc" 1 "--check on firebase-tools' emulator: $(cat "$LG_TMP/check.out")"
grep -q 'the storage cannot referee locks: .*applied a second insert with ifGenerationMatch=0' \
    "$LG_TMP/check.out" || lg_fail "--check message: $(cat "$LG_TMP/check.out")"

# 3. Serving on it: refused at once, never listening.
log=$LG_TMP/serve.log
STORAGE_EMULATOR_HOST=$FB LOCKGATE_JWT_SECRET="$LG_SECRET" "$LG_BIN" \
    --listen 127.0.0.1:0 --store "gs://$BUCKET/locks/" >"$log" 2>&1 &
pid=$!
LG_PIDS="$LG_PIDS $pid"
lg_wait_exit "$pid" 30 "lockgate on firebase-tools' emulator"
lg_eq "$LG_RC" 2 "exit status on firebase-tools' emulator: $(cat "$log")"
grep -q '"severity":"CRITICAL","message":"the storage cannot referee locks: ' "$log" ||
    lg_fail "refusal: $(cat "$log")"
! grep -q '"message":"listening"' "$log" || lg_fail "it listened: $(cat "$log")"
lg_sanitizer_clean "$log"
left=$(curl -sS --max-time 5 "http://$FB/storage/v1/b/$BUCKET/o?prefix=locks/" |
    python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("items", [])))')
lg_eq "$left" 0 "objects the checks left on the emulator"
echo "firebase-tools $version: the fake's dialect answers as it does; lockgate refuses it"
