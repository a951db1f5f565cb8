#!/bin/sh
# test_config.sh: lockgate refuses to start on a bad configuration, with a
# message that names the option and says why; --check validates without
# serving; --help documents the options of design.md section 5.
#
# Every case runs the binary with a clean environment under `timeout`: a
# configuration that is wrongly accepted starts serving, is killed by the
# timeout (status 124) and fails the case.
set -u
cd "$(dirname "$0")/../.." || exit 1

BIN=${LG_BIN:-build/asan/lockgate}
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SECRET=config-test-secret-0123456789abcdef
LIMIT=8          # seconds any single run may take
fails=0
cases=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# run [VAR=VALUE | -VAR]... -- [ARG]...: run lockgate with every LOCKGATE_*
# variable and PORT cleared, then a valid HS256 secret, the mem:// store and
# a loopback listen address, changed by the VAR=VALUE given (-VAR unsets
# VAR).  Sets $rc and $TMP/out (stdout and stderr).
run() {
	(
		for v in $(env | sed -n 's/^\(LOCKGATE_[A-Z_]*\|PORT\|STORAGE_EMULATOR_HOST\|GOOGLE_APPLICATION_CREDENTIALS\)=.*/\1/p'); do
			unset "$v"
		done
		export LOCKGATE_JWT_SECRET="$SECRET" LOCKGATE_STORE=mem:// \
		    LOCKGATE_LISTEN=127.0.0.1:0 \
		    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1
		while [ $# -gt 0 ] && [ "$1" != -- ]; do
			case "$1" in
			-*) unset "${1#-}" ;;
			*) export "${1?}" ;;
			esac
			shift
		done
		[ $# -gt 0 ] && shift
		exec timeout "$LIMIT" "$BIN" "$@"
	) >"$TMP/stdout" 2>"$TMP/stderr"
	rc=$?
	cat "$TMP/stdout" "$TMP/stderr" >"$TMP/out"
}

# json_refusal OPTION: stdout (the log stream Cloud Logging reads) holds
# only JSON lines with severity, message and time, and one of them, at
# ERROR or above, names OPTION.
json_refusal() {
	python3 - "$TMP/stdout" "$1" <<'PY'
import json, re, sys
named = False
for i, line in enumerate(open(sys.argv[1]), 1):
    if not line.strip():
        continue
    try:
        o = json.loads(line)
    except ValueError:
        print("stdout line %d is not JSON: %r" % (i, line[:100])); sys.exit(1)
    if not all(k in o for k in ("severity", "message", "time")):
        print("stdout line %d lacks severity/message/time" % i); sys.exit(1)
    if o["severity"] in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY") and \
            re.search(sys.argv[2], o["message"]):
        named = True
if not named:
    print("no JSON log line at ERROR or above names the option on stdout")
    sys.exit(1)
PY
}

# refuse OPTION_REGEX WHY_REGEX [VAR=VALUE | -VAR]... -- [ARG]...
# OPTION_REGEX (extended) must match the message: the flag or the variable.
refuse() {
	opt=$1
	why=$2
	shift 2
	cases=$((cases + 1))
	run "$@"
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
		fail "[$opt] accepted (exit $rc): $*"
		return
	fi
	if grep -q 'Sanitizer' "$TMP/out"; then
		fail "[$opt] sanitizer report on refusal:"
		sed 's/^/    /' "$TMP/out" | head -n 20
		return
	fi
	if ! grep -qE -- "$opt" "$TMP/out"; then
		fail "[$opt] message does not name the option:"
		sed 's/^/    /' "$TMP/out" | head -n 5
		return
	fi
	if ! grep -qiE -- "$why" "$TMP/out"; then
		fail "[$opt] message does not say why (/$why/):"
		sed 's/^/    /' "$TMP/out" | head -n 5
		return
	fi
	if ! json_refusal "$opt"; then
		fail "[$opt] refusal is not logged as JSON on stdout:"
		sed 's/^/    /' "$TMP/out" | head -n 5
		return
	fi
	echo "ok [$opt] $(grep -hE -- "$opt" "$TMP/out" | head -n 1 | cut -c1-150)"
}

# Numbers: not a number, out of range, from a variable and from a flag.
refuse LOCKGATE_MAX_WAIT 'whole number' LOCKGATE_MAX_WAIT=abc --
refuse --max-wait '0 to [0-9]+' -- --max-wait 5000
refuse --threads 'whole number' -- --threads 0
refuse LOCKGATE_CONNECTION_TIMEOUT 'whole number' \
    LOCKGATE_CONNECTION_TIMEOUT=-5 --
# Booleans.
refuse LOCKGATE_PUBLIC_READ 'true or false' LOCKGATE_PUBLIC_READ=maybe --
refuse --metrics-public 'true or false' -- --metrics-public=sometimes
# Addresses.
refuse --listen 'host:port' -- --listen nohost
refuse PORT 'port' -LOCKGATE_LISTEN PORT=99999 --
# Stores.
refuse LOCKGATE_STORE 'file://' LOCKGATE_STORE=ftp://example.com/x --
refuse --store 'needs a value' -- --store
refuse 'LOCKGATE_STORE|--store' 'bucket name' LOCKGATE_STORE=gs://x --
refuse 'LOCKGATE_STORE|--store' 'needs a directory' LOCKGATE_STORE=file:// --
# Keys and policy: the option that points at the bad thing is named.
refuse 'LOCKGATE_JWT_SECRET|--jwt-secret' 'at least [0-9]+ bytes' \
    LOCKGATE_JWT_SECRET=short --
refuse 'LOCKGATE_JWT_PUBLIC_KEYS|--jwt-public-keys' 'no such file' \
    LOCKGATE_JWT_PUBLIC_KEYS="$TMP/missing.pem" --
refuse 'LOCKGATE_POLICY|--policy' 'no such file' \
    LOCKGATE_POLICY="$TMP/missing.json" --
printf '%s\n' '{"rules": [{"name": "acme", "match": {"repository_owner": "acme"}, "locks": ["**"], "actions": ["read", "acquire"]}]}' >"$TMP/policy.json"
refuse 'LOCKGATE_JWKS_URL|--jwks-url' 'https://' LOCKGATE_JWKS_URL=notaurl \
    LOCKGATE_POLICY="$TMP/policy.json" LOCKGATE_JWT_ISSUER=https://x \
    LOCKGATE_JWT_AUDIENCE=https://y --
# An OIDC issuer signs for anyone: its keys without a policy are refused.
refuse 'LOCKGATE_JWKS_URL|--jwks-url' 'needs --policy' \
    LOCKGATE_JWKS_URL=https://token.actions.githubusercontent.com/.well-known/jwks --
refuse '--jwks-url' 'needs --policy' -- \
    --jwks-url https://gitlab.com/oauth/discovery/keys
# Nor without an issuer and an audience: a token the job asked for another
# service (AWS, Vault) would be as good here.
refuse 'LOCKGATE_JWKS_URL|--jwks-url' 'needs --jwt-issuer.*--jwt-audience' \
    LOCKGATE_JWKS_URL=https://gitlab.com/oauth/discovery/keys \
    LOCKGATE_POLICY="$TMP/policy.json" LOCKGATE_JWT_ISSUER=https://gitlab.com --
refuse '--jwks-url' 'needs --jwt-issuer.*--jwt-audience' -- \
    --jwks-url https://gitlab.com/oauth/discovery/keys \
    --policy "$TMP/policy.json" --jwt-audience https://lock.example.com
# Command line.
refuse --bogus 'unknown option' -- --bogus
refuse stray 'unexpected argument' -- stray
# Secrets: empty, or two sources at once.
refuse LOCKGATE_JWT_SECRET 'empty' LOCKGATE_JWT_SECRET= --
refuse LOCKGATE_JWT_SECRET_FILE 'not both' \
    LOCKGATE_JWT_SECRET_FILE="$TMP/none" --

# A comment pasted with the value (from a doc's table or an env file): the
# shell, env files and systemd keep it as part of the value.
refuse LOCKGATE_OWNER_CLAIM 'pasted comment' \
    "LOCKGATE_OWNER_CLAIM=repository   # or job_workflow_ref" --
refuse --jwt-audience 'pasted comment' -- \
    --jwt-audience 'https://lock.example.com	# the URL callers use'
refuse LOCKGATE_STORE 'pasted comment' "LOCKGATE_STORE=mem:// # tests" --
# ... but a '#' inside a value is no comment, and a secret is never judged
# (nor quoted back).
cases=$((cases + 1))
run "LOCKGATE_JWT_SECRET=$SECRET #1" "LOCKGATE_DISPLAY_CLAIMS=a#b" -- --check
if [ "$rc" -ne 0 ]; then
	fail "a '#' in a value, or ' #' in a secret, was refused (exit $rc):"
	sed 's/^/    /' "$TMP/out" | head -n 5
else
	echo "ok a '#' that is no comment is kept"
fi
cases=$((cases + 1))
run "LOCKGATE_OWNER_CLAIM=repository   # or job_workflow_ref" -- --check
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
	fail "--check accepted a pasted comment (exit $rc)"
else
	echo "ok --check refuses a pasted comment"
fi

# A refusal is said once: not a plain copy next to the JSON log line when
# nobody reads stderr at a terminal, and no JSON on a terminal.
cases=$((cases + 1))
run LOCKGATE_MAX_WAIT=abc --
n=$(grep -c 'LOCKGATE_MAX_WAIT' "$TMP/out")
if [ "$n" -ne 1 ] || [ -s "$TMP/stderr" ]; then
	fail "a refusal off a terminal is said $n times (stderr: $(cat "$TMP/stderr"))"
else
	echo "ok a refusal off a terminal: one JSON line"
fi
cases=$((cases + 1))
if command -v script >/dev/null 2>&1; then
	script -qec "env -i PATH=/usr/bin:/bin LOCKGATE_MAX_WAIT=abc \
	    ASAN_OPTIONS=detect_leaks=1 $BIN --check" /dev/null >"$TMP/tty" 2>&1
	n=$(grep -c 'LOCKGATE_MAX_WAIT' "$TMP/tty")
	if [ "$n" -ne 1 ] || grep -q '"severity"' "$TMP/tty" ||
	    ! grep -q '^lockgate: bad configuration: LOCKGATE_MAX_WAIT must be' "$TMP/tty"; then
		fail "a refusal at a terminal is not one plain line:"
		sed 's/^/    /' "$TMP/tty" | head -n 5
	else
		echo "ok a refusal at a terminal: one plain line"
	fi
else
	echo "ok (skipped: no script(1) for a terminal)"
fi

# --check: a good configuration passes and exits at once without serving.
cases=$((cases + 1))
run -- --check
if [ "$rc" -ne 0 ]; then
	fail "--check refused a good configuration (exit $rc):"
	sed 's/^/    /' "$TMP/out" | head -n 10
else
	echo "ok --check accepts a good configuration"
fi
# --threads is accepted (existing settings still start) but does nothing:
# start-up says so.
run LOCKGATE_THREADS=16 -- --check
if [ "$rc" != 0 ] || ! grep -q '"--threads (LOCKGATE_THREADS) has no effect' "$TMP/out"; then
	fail "LOCKGATE_THREADS=16: exit $rc, no warning:"
	cat "$TMP/out"
else
	echo "ok --threads is accepted, with a warning that it does nothing"
fi

# --check on a bad configuration fails with the same message as a start.
cases=$((cases + 1))
run LOCKGATE_MAX_WAIT=99999 -- --check
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] ||
    ! grep -qF LOCKGATE_MAX_WAIT "$TMP/out"; then
	fail "--check accepted LOCKGATE_MAX_WAIT=99999 (exit $rc)"
else
	echo "ok --check refuses a bad configuration"
fi
# --check reaches the store: a file:// store that cannot be created.
cases=$((cases + 1))
: >"$TMP/afile"
run LOCKGATE_STORE="file://$TMP/afile/sub" -- --check
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
	fail "--check accepted a store under a regular file (exit $rc)"
else
	echo "ok --check refuses an unusable store"
fi

# --help documents every option of design.md section 5 and exits 0.
cases=$((cases + 1))
run -- --help
if [ "$rc" -ne 0 ]; then
	fail "--help exits $rc"
else
	for v in LOCKGATE_LISTEN LOCKGATE_STORE LOCKGATE_JWT_SECRET \
	    LOCKGATE_JWT_PUBLIC_KEYS LOCKGATE_JWKS_URL LOCKGATE_JWT_ISSUER \
	    LOCKGATE_JWT_AUDIENCE LOCKGATE_POLICY LOCKGATE_PUBLIC_READ \
	    LOCKGATE_MAX_WAIT PORT; do
		grep -qF "$v" "$TMP/out" || { fail "--help does not mention $v"; v=""; break; }
	done
	[ -n "$v" ] && echo "ok --help"
fi
# ... and every server setting the docs name: a LOCKGATE_* or GOOGLE_*
# variable of README.md or docs/*.md that is neither lockctl's (named in
# client/lockctl) nor a key of an env-format answer (a field of
# api/openapi.yaml).
cases=$((cases + 1))
missing=
for v in $(grep -ohE '\b(LOCKGATE_[A-Z0-9_]*[A-Z0-9]|GOOGLE_[A-Z_]*[A-Z]|STORAGE_EMULATOR_HOST|GCE_METADATA_HOST|XDG_RUNTIME_DIR)\b' \
    README.md docs/*.md | sort -u); do
	grep -qw -- "$v" "$TMP/out" && continue
	grep -qw -- "$v" client/lockctl && continue
	f=$(printf '%s' "${v#LOCKGATE_}" | tr 'A-Z' 'a-z')
	case $v in
	LOCKGATE_HOLDER_FENCING_TOKEN) continue ;; # a 409's holder, format_env.c
	GOOGLE_ID) continue ;; # a shell variable of deploy.md's example
	LOCKGATE_*) grep -qE "(^|[ {])$f:" api/openapi.yaml && continue ;;
	esac
	missing="$missing $v"
done
if [ -n "$missing" ]; then
	fail "--help does not mention what the docs use:$missing"
else
	echo "ok --help names every setting the docs use"
fi
# The token subcommand: --iss and --aud (docs/identity.md) are in both
# helps, and `token --help` is asked for, so it goes to stdout, exit 0.
cases=$((cases + 1))
run -- token --help
if [ "$rc" -ne 0 ] || [ -s "$TMP/stderr" ] ||
    ! grep -q -- '--iss' "$TMP/stdout" || ! grep -q -- '--aud' "$TMP/stdout" ||
    ! grep -q -- 'token --dev' "$TMP/stdout"; then
	fail "token --help (exit $rc): stdout $(head -c 200 "$TMP/stdout"), stderr $(head -c 200 "$TMP/stderr")"
else
	run -- --help
	if ! grep -q -- '--iss ISS.*--aud AUD' "$TMP/stdout" ||
	    ! grep -q 'token --dev' "$TMP/stdout"; then
		fail "--help does not show token --iss/--aud and token --dev"
	else
		echo "ok token --help on stdout; --help shows token --iss, --aud, --dev"
	fi
fi
# A wrong token option: the usage goes to stderr, exit 2.
cases=$((cases + 1))
run -- token --bogus x
if [ "$rc" -ne 2 ] || [ -s "$TMP/stdout" ] || ! grep -q usage "$TMP/stderr"; then
	fail "token --bogus: exit $rc, usage not on stderr alone"
else
	echo "ok token usage errors on stderr"
fi

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ] || exit 1
echo ok
