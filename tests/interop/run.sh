#!/bin/sh
# run.sh: `make interop`.  Installs what tests/interop/package.json names
# into build/interop (npm; once, and again when the file changes), then
# runs every tests/interop/test_*.sh, one line each (tests/run_one.sh).
# Exit 1 when one fails, and when they cannot run (no node 20 or newer,
# which firebase-tools requires, or no npm registry): a check that did not
# run has not passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    { echo "interop: not run: no node and npm" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] ||
    { echo "interop: not run: node $(node -v); firebase-tools needs 20 or newer" >&2; exit 1; }
mkdir -p build/interop build/logs/interop
if ! cmp -s tests/interop/package.json build/interop/package.json ||
    [ ! -d build/interop/node_modules ]; then
	echo "interop: installing tests/interop/package.json into build/interop (npm, about 300 MB)"
	cp tests/interop/package.json build/interop/package.json
	if ! npm install --prefix build/interop --no-audit --no-fund \
	    --no-package-lock --loglevel=error >build/logs/interop/npm.log 2>&1; then
		cat build/logs/interop/npm.log >&2
		rm -f build/interop/package.json # try again next time
		echo "interop: not run: npm install failed" >&2
		exit 1
	fi
fi
rc=0
for t in tests/interop/test_*.sh; do
	out=$(sh tests/run_one.sh "interop/$(basename "$t")" sh "$t")
	echo "$out"
	case $out in PASS*) ;; *) rc=1 ;; esac
done
exit $rc
