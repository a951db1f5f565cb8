#!/bin/sh
# The soak's history checker (tests/soak/check_history.py) is shown to
# catch violations: made-up histories with an overlap, a reused token, a
# lost release (and the other checks) are each reported, a clean history
# and the ambiguous outcomes it must not count pass.  No server needed.
set -u
cd "$(dirname "$0")/../.."
python3 -m unittest -v tests/soak/test_check_history.py 2>&1 || {
	echo "FAIL: the checker missed or invented a violation" >&2
	exit 1
}
