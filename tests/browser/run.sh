#!/bin/sh
# run.sh [tests/browser/test_X.mjs ...]: run dashboard tests in Debian's
# chromium driven by playwright-core.  Installs node_modules with npm (from
# package-lock.json) when missing; never downloads a browser.  With no
# argument, runs every test_*.mjs.  Exit non-zero if any test failed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ ! -x "${LG_CHROMIUM:-/usr/bin/chromium}" ]; then
	echo "browser tests: ${LG_CHROMIUM:-/usr/bin/chromium} is missing" \
	    "(apt-get install -y chromium, or make deps-test)" >&2
	exit 1
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
	(cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
	    npm ci --no-audit --no-fund --loglevel=error) >&2
fi

cd "$root"
mkdir -p test-artifacts
[ $# -gt 0 ] || set -- tests/browser/test_*.mjs
status=0
for t in "$@"; do
	echo "== $t"
	node "$t" || status=1
done
exit $status
