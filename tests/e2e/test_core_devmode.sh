#!/bin/sh
# With no key configured lockgate starts a development mode that is still
# closed: a random secret, a printed admin token and curl line, loopback
# only.  Without that token nothing is served; off loopback it refuses.
# `lockgate token --dev` mints a fresh token while it runs; a token of an
# earlier run is told why it fails; `make run PORT=N` picks the port.
. tests/e2e/lib.sh
log=$LG_TMP/dev.log
: >"$log"
env -u LOCKGATE_JWT_SECRET -u XDG_RUNTIME_DIR "$LG_BIN" --listen 127.0.0.1:0 --store mem:// >"$log" 2>&1 &
pid=$!
LG_PIDS="$LG_PIDS $pid"
i=0
while [ $i -lt 200 ] && ! grep -q '"message":"listening"' "$log"; do
	sleep 0.05
	i=$((i + 1))
done
port=$(sed -n 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' "$log")
[ -n "$port" ] || { cat "$log"; lg_fail "dev mode did not start"; }
grep -q '"dev_mode":true' "$log" || lg_fail "not logged as dev mode"
tok=$(sed -n 's/.*export LOCKGATE_TOKEN=\([^ ]*\).*/\1/p' "$log")
[ -n "$tok" ] || lg_fail "no token printed"
grep -q 'curl -sS -X POST' "$log" || lg_fail "no curl line printed"
U=http://127.0.0.1:$port
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST "$U/v1/locks/demo:acquire")
lg_eq "$code" 401 "dev mode is closed without the token"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
    "$U/v1/locks/demo:acquire?ttl=60")
lg_eq "$code" 200 "the printed token works"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $(lg_token x admin)" \
    "$U/v1/locks/demo:forceRelease")
lg_eq "$code" 401 "a token signed with another secret"
# No XDG_RUNTIME_DIR and mem://: no secret file, and the banner says so.
grep -q 'No secret file' "$log" || lg_fail "the banner does not say there is no secret file"
lg_stop "$pid"

# --- `lockgate token --dev`: a fresh admin token while a dev server runs,
# from a secret file (0600) in XDG_RUNTIME_DIR, removed at exit; a token
# of an earlier run gets a 401 that says the dev secret changed.
run=$LG_TMP/run
mkdir -m 700 "$run"
# dev_start N STORE [VAR=VALUE...]: a dev server; sets pid, port, log, U.
dev_start() {
	log=$LG_TMP/dev.$1.log
	store=$2
	shift 2
	: >"$log"
	env -u LOCKGATE_JWT_SECRET XDG_RUNTIME_DIR="$run" "$@" "$LG_BIN" \
	    --listen 127.0.0.1:0 --store "$store" >"$log" 2>&1 &
	pid=$!
	LG_PIDS="$LG_PIDS $pid"
	dev_port "$log"
}
# dev_port LOG: wait for the "listening" line; sets port and U.
dev_port() {
	i=0
	while [ $i -lt 200 ] && ! grep -q '"message":"listening"' "$1"; do
		sleep 0.05
		i=$((i + 1))
	done
	port=$(sed -n 's/.*"message":"listening".*"port":\([0-9]*\).*/\1/p' "$1")
	[ -n "$port" ] || { cat "$1"; lg_fail "dev mode did not start"; }
	U=http://127.0.0.1:$port
}
dev_start 1 mem://
secret=$run/.lockgate-dev-$port.secret
[ -f "$secret" ] || lg_fail "no secret file $secret: $(ls -la "$run")"
lg_eq "$(stat -c %a "$secret")" 600 "the secret file's mode"
# ... by the program as it was started (`make run`: ./build/lockgate).
grep -qF "$LG_BIN token --dev --port $port" "$log" ||
	lg_fail "the banner does not tell how to get a fresh token: $(cat "$log")"
old=$(sed -n 's/.*export LOCKGATE_TOKEN=\([^ ]*\).*/\1/p' "$log")
fresh=$(env -u LOCKGATE_LISTEN XDG_RUNTIME_DIR="$run" "$LG_BIN" token --dev --port "$port")
lg_eq "$?" 0 "lockgate token --dev"
[ -n "$fresh" ] && [ "$fresh" != "$old" ] || lg_fail "token --dev printed no new token"
lg_curl -H "Authorization: Bearer $fresh" "$U/v1/whoami" >"$LG_TMP/who"
lg_eq "$(lg_json admin <"$LG_TMP/who")" true "the fresh token is an admin's"
lg_eq "$(lg_json owner <"$LG_TMP/who")" dev "the fresh token's owner"
named=$(XDG_RUNTIME_DIR="$run" LOCKGATE_LISTEN=127.0.0.1:$port "$LG_BIN" token --dev --sub anna)
lg_curl -H "Authorization: Bearer $named" "$U/v1/whoami" >"$LG_TMP/who"
lg_eq "$(lg_json owner <"$LG_TMP/who")" anna "token --dev --sub, the port from LOCKGATE_LISTEN"
lg_stop "$pid"
[ -e "$secret" ] && lg_fail "the secret file outlived the server"
XDG_RUNTIME_DIR="$run" "$LG_BIN" token --dev --port "$port" >"$LG_TMP/out" 2>"$LG_TMP/err"
lg_eq "$?" 1 "token --dev without a running dev server"
grep -q "no development-mode lockgate is running on port $port" "$LG_TMP/err" ||
	lg_fail "token --dev says nothing runs: $(cat "$LG_TMP/err")"
[ -s "$LG_TMP/out" ] && lg_fail "token --dev printed a token with no server"
"$LG_BIN" token --dev --help >"$LG_TMP/out" 2>"$LG_TMP/err"
lg_eq "$?" 0 "token --dev --help"
grep -q -- '--port' "$LG_TMP/out" || lg_fail "token --dev --help on stdout"

# A restart makes a new secret: the old token's 401 says why.
dev_start 2 mem://
code=$(lg_curl -o "$LG_TMP/body" -w '%{http_code}' -H "Authorization: Bearer $fresh" "$U/v1/whoami")
lg_eq "$code" 401 "a token of the previous dev run"
grep -q 'development-mode.*new at every start.*lockgate token --dev' "$LG_TMP/body" ||
	lg_fail "the 401 does not hint that the dev secret changed: $(cat "$LG_TMP/body")"
lg_stop "$pid"

# Without XDG_RUNTIME_DIR (empty counts as unset), a file:// store keeps
# the file in its directory.
dev_start 3 "file://$LG_TMP/devdata" XDG_RUNTIME_DIR=
[ -f "$LG_TMP/devdata/.lockgate-dev-$port.secret" ] ||
	lg_fail "no secret file in the store's directory: $(ls -la "$LG_TMP/devdata")"
tok=$(env -u XDG_RUNTIME_DIR LOCKGATE_STORE="file://$LG_TMP/devdata" "$LG_BIN" token --dev --port "$port")
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
    "$U/v1/locks/demo:acquire?ttl=60")
lg_eq "$code" 200 "a token --dev of a file:// dev server acquires"
code=$(lg_curl -o "$LG_TMP/body" -w '%{http_code}' -H "Authorization: Bearer $tok" "$U/v1/locks")
lg_eq "$code" 200 "list with the secret file in the store's directory"
lg_eq "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["locks"]))' <"$LG_TMP/body")" 1 \
    "the secret file is not a lock"
lg_stop "$pid"
[ -e "$LG_TMP/devdata/.lockgate-dev-$port.secret" ] && lg_fail "the secret file outlived the server"

# Outside dev mode, a bad signature says nothing of dev mode.
lg_start
code=$(lg_curl -o "$LG_TMP/body" -w '%{http_code}' -H "Authorization: Bearer $fresh" "$LG_URL/v1/whoami")
lg_eq "$code" 401 "a foreign token, outside dev mode"
grep -q 'development' "$LG_TMP/body" && lg_fail "a non-dev 401 speaks of dev mode: $(cat "$LG_TMP/body")"
lg_stop

# --- `make run PORT=N` serves on loopback port N (here in dev mode, the
# port the kernel picks); LOCKGATE_LISTEN or LOCKGATE_STORE in the
# environment win over the Makefile's defaults.
line=$(make -s -n run PORT=9090 | tail -n 1)
case $line in *"--listen 127.0.0.1:9090 "*) ;; *) lg_fail "make run PORT=9090: $line" ;; esac
line=$(LOCKGATE_LISTEN=127.0.0.1:9191 make -s -n run | tail -n 1)
case $line in *--listen*) lg_fail "make run overrides LOCKGATE_LISTEN: $line" ;; esac
line=$(LOCKGATE_STORE=mem:// make -s -n run | tail -n 1)
case $line in *--store*) lg_fail "make run overrides LOCKGATE_STORE: $line" ;; esac
log=$LG_TMP/make-run.log
: >"$log"
env -u LOCKGATE_JWT_SECRET -u LOCKGATE_LISTEN -u PORT LOCKGATE_STORE=mem:// \
    XDG_RUNTIME_DIR="$run" make -s --no-print-directory run PORT=0 >"$log" 2>&1 &
mk=$!
LG_PIDS="$LG_PIDS $mk"
dev_port "$log"
tok=$(XDG_RUNTIME_DIR="$run" "$LG_BIN" token --dev --port "$port")
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$U/v1/whoami")
lg_eq "$code" 200 "make run PORT=0 serves, and token --dev reaches it"
srv=$(ps -o pid= --ppid "$mk" | tr -d ' ' | head -n 1)
[ -n "$srv" ] || lg_fail "no lockgate under make run"
kill -TERM "$srv"
wait "$mk"
lg_eq "$?" 0 "make run exits 0 when lockgate is stopped"
LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $mk\b//")

# Off loopback, no key: refuse to start.
set +e
env -u LOCKGATE_JWT_SECRET timeout 10 "$LG_BIN" --listen 0.0.0.0:0 --store mem:// >"$LG_TMP/out" 2>&1
rc=$?
set -e
lg_eq "$rc" 2 "no key off loopback is refused"
grep -q 'LOCKGATE_JWT_SECRET' "$LG_TMP/out" || lg_fail "the refusal does not say what to set"
echo ok
