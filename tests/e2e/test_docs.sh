#!/bin/sh
# The docs cannot drift: every ```sh block of README.md and docs/*.md runs
# under dash -e, in order, one shell per file (as a reader pastes them into
# one terminal), against a lockgate this test starts, unless the
# line before it is `<!-- doc-test: skip (why) -->` (Google Cloud, root,
# systemd).  The example server https://lock.example.com and the README's
# http://127.0.0.1:8080 become the test's server; LOCKGATE_URL is it,
# LOCKGATE_TOKEN an admin's and LOCKGATE_JWT_SECRET the server's secret, as
# a reader has them; `lockgate` is build/lockgate; ./deploy.sh and ./backup.sh exist.
# Every ```ini block after `<!-- doc-test: unit NAME -->` is a systemd unit
# that `systemd-analyze verify` must pass without a word.
set -u
. tests/e2e/lib.sh

T=$LG_TMP/docs
mkdir -p "$T/blocks" "$T/units" "$T/work" "$T/bin"
lg_start
ln -s "$PWD/build/lockgate" "$T/bin/lockgate"
for s in deploy.sh backup.sh; do
	printf '#!/bin/sh\necho "%s ran under $LOCKGATE_LOCK"\n' "$s" >"$T/work/$s"
	chmod +x "$T/work/$s"
done

python3 - "$T" README.md docs/*.md <<'PY' || lg_fail "the extractor failed"
import re, sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
listing = open(out + "/list", "w")
for f in files:
    lines = open(f).read().split("\n")
    script = ""
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        body = "\n".join(lines[start:j]) + "\n"
        prev = next((l for l in reversed(lines[:i]) if l.strip()), "")
        mark = re.match(r"^<!-- doc-test: (\w+) ?(.*?) ?-->$", prev.strip())
        where = "%s:%d" % (f, i + 1)
        if mark and mark.group(1) not in ("skip", "unit"):
            sys.exit("%s: unknown doc-test mark %r" % (where, mark.group(1)))
        if m.group(1) == "sh" and not (mark and mark.group(1) == "skip"):
            n += 1
            # Where a failure happened: the last mark on stderr.
            script += "echo '@@ %s' >&2\n%s" % (where, body)
        elif mark and mark.group(1) == "unit":
            if m.group(1) != "ini":
                sys.exit("%s: a unit block must be ```ini" % where)
            open("%s/units/%s" % (out, mark.group(2)), "w").write(body)
        i = j + 1
    if script:
        name = "%s/blocks/%s.sh" % (out, f.replace("/", "_"))
        open(name, "w").write(script)
        listing.write("%s %s\n" % (name, f))
print(n, file=open(out + "/count", "w"))
PY

URL=$LG_URL
ran=0
while read -r block where; do
	sed -e "s#https://lock\.example\.com#$URL#g" \
	    -e "s#http://127\.0\.0\.1:8080#$URL#g" "$block" >"$block.run"
	(
		cd "$T/work" || exit 1
		export PATH="$T/bin:$PATH" LOCKGATE_TOKEN="$(lg_token ops-docs admin)" \
		    LOCKGATE_JWT_SECRET="$LG_SECRET" TMPDIR="$T/work" \
		    LOCKGATE_URL="$URL"
		unset LOCKGATE_LOCK LOCKGATE_LEASE_ID
		exec timeout 60 dash -e "$block.run"
	) </dev/null >"$block.out" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		sed 's/^/    /' "$block.out" | tail -n 20 >&2
		at=$(sed -n 's/^@@ //p' "$block.out" | tail -n 1)
		lg_fail "the shell block at ${at:-$where} exits $rc"
	fi
	ran=$((ran + $(grep -c '^@@ ' "$block.out")))
done <"$T/list"
lg_eq "$ran" "$(cat "$T/count")" "shell blocks that ran to their end"
[ $ran -ge 10 ] || lg_fail "only $ran shell blocks ran: is the extractor broken?"
# What the runnable blocks did is there to see: the README tour took and
# released prod/deploy, lockctl ran the deploy and the backup.
grep -q 'deploy.sh ran under prod/deploy' "$T"/blocks/*.out ||
	lg_fail "no block ran ./deploy.sh under prod/deploy"
grep -q 'backup.sh ran under nightly/backup' "$T"/blocks/*.out ||
	lg_fail "no block ran ./backup.sh under nightly/backup"
echo "ok $ran shell blocks"

# systemd units, with the paths of this checkout.
if command -v systemd-analyze >/dev/null 2>&1; then
	units=0
	for u in "$T"/units/*; do
		[ -f "$u" ] || continue
		sed -i -e "s#/usr/local/bin/lockgate#$PWD/build/lockgate#" \
		    -e "s#/usr/local/bin/lockctl#$PWD/client/lockctl#" \
		    -e "s#/usr/local/bin/backup.sh#/bin/true#" "$u"
		units=$((units + 1))
	done
	[ $units -ge 3 ] || lg_fail "only $units systemd units in the docs"
	(cd "$T/units" && systemd-analyze verify --man=no ./*) >"$T/verify" 2>&1
	rc=$?
	[ $rc -eq 0 ] && [ ! -s "$T/verify" ] ||
		lg_fail "systemd-analyze verify (exit $rc): $(cat "$T/verify")"
	echo "ok $units systemd units verify"
else
	echo "systemd-analyze is not installed: units not verified"
fi
lg_stop
echo ok
