#!/bin/sh
# run.sh [tests/browser/test_X.mjs ...]: run dashboard tests in Debian's
# chromium driven by playwright-core.  Installs node_modules with npm (from
# package-lock.json) when missing or stale; never downloads a browser.  With no
# argument, runs every test_*.mjs.  Exit non-zero if any test failed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ ! -x "${LG_CHROMIUM:-/usr/bin/chromium}" ]; then
	echo "browser tests: ${LG_CHROMIUM:-/usr/bin/chromium} is missing" \
	    "(apt-get install -y chromium, or make deps-test)" >&2
	exit 1
fi
# playwright-core is pinned to a release whose engines say node >=18, so
# Debian bookworm's own nodejs (18) runs these tests; 1.62 and later refuse
# anything older than node 20.
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 18 ]; then
	echo "browser tests: node 18 or newer is needed, found" \
	    "$(node -v 2>/dev/null || echo none)" >&2
	exit 1
fi
# Install from package-lock.json when node_modules is missing or holds
# another version than the lock (a checkout made before a pin changed).
# make test runs several of these scripts at once, and npm ci first deletes
# node_modules: the check and the install are one step under a lock, so one
# script installs and the others wait, then find the version they want.
install_deps() {
	want=$(node -p 'require(process.argv[1]).packages["node_modules/playwright-core"].version' \
	    "$here/package-lock.json")
	have=$(node -p 'require(process.argv[1]).version' \
	    "$here/node_modules/playwright-core/package.json" 2>/dev/null || true)
	if [ "$have" != "$want" ]; then
		(cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
		    npm ci --no-audit --no-fund --loglevel=error) >&2
	fi
}
exec 9>"$here/.install.lock"
flock 9
install_deps
flock -u 9
exec 9>&-

cd "$root"
mkdir -p test-artifacts
[ $# -gt 0 ] || set -- tests/browser/test_*.mjs
status=0
for t in "$@"; do
	echo "== $t"
	node "$t" || status=1
done
exit $status
