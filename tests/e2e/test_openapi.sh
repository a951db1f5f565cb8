#!/bin/sh
# api/openapi.yaml describes the API as built: every route the server
# serves (lockgate --routes prints the dispatcher's own tables) is a path
# of the spec with that method, and the spec names no /v1 route the server
# does not serve.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${LG_BIN:-build/asan/lockgate}
"$BIN" --routes >/tmp/lockgate-routes.$$ || { echo "FAIL: --routes"; exit 1; }
python3 - /tmp/lockgate-routes.$$ api/openapi.yaml <<'PY'
import re, sys
routes = [l.split() for l in open(sys.argv[1]) if l.strip()]
spec = {}
path = None
for line in open(sys.argv[2]):
    m = re.match(r"^  (/\S*):\s*$", line)
    if m:
        path = m.group(1)
        spec[path] = set()
        continue
    if re.match(r"^\S", line):
        path = None
    m = re.match(r"^    (get|post|put|delete|patch):", line)
    if m and path:
        spec[path].add(m.group(1).upper())
assert len(routes) >= 10, routes
bad = []
for method, p in routes:
    key = p
    if key not in spec and re.match(r"^/[^/]+\.(html|js|css|svg|ico)$", p):
        key = "/{asset}"
    if method not in spec.get(key, set()):
        bad.append(f"{method} {p}")
served = {p for _, p in routes}
extra = [p for p in spec if p.startswith("/v1") and p not in served]
if bad or extra:
    print("FAIL: served but not in openapi.yaml:", bad, "; in openapi.yaml but not served:", extra)
    sys.exit(1)
print(len(routes), "routes, all described")
PY
rc=$?
rm -f /tmp/lockgate-routes.$$
[ $rc -eq 0 ] && echo ok
exit $rc
