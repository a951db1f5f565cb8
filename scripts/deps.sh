#!/bin/sh
# deps.sh build|lint|test: install the Debian packages lockgate needs, and only
# those that are missing.  apt-get runs only when something is missing, and
# only as root; otherwise it says what to install and fails.
set -eu

BUILD="gcc make pkg-config libc6-dev libmicrohttpd-dev libcurl4-openssl-dev
libjansson-dev libssl-dev libjwt-dev ca-certificates"
TEST="libcmocka-dev curl dash python3 chromium clang clang-format cppcheck faketime
iproute2 nghttp2-proxy"
# make lint: the checkers themselves (awk is in Debian's base system).
LINT="clang-format cppcheck"

want=$BUILD
case "${1:-build}" in
test) want="$BUILD $TEST $LINT" ;;
lint) want="$BUILD $LINT" ;;
esac

missing=""
for p in $want; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done
# The browser tests need node and npm; any install of them will do, from
# node 18 on (Debian bookworm's own nodejs is 18, and tests/browser pins a
# playwright-core that runs on it as well as on 20 and later).
if [ "${1:-build}" = test ]; then
	command -v node >/dev/null 2>&1 || missing="$missing nodejs"
	command -v npm >/dev/null 2>&1 || missing="$missing npm"
	if command -v node >/dev/null 2>&1; then
		major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
		if [ "$major" -lt 18 ]; then
			echo "deps: node $(node -v) is too old for the browser" \
			    "tests; install node 18 or newer" >&2
			exit 1
		fi
	fi
fi

[ -z "$missing" ] && exit 0
echo "deps: missing packages:$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "deps: run as root, or: sudo apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
