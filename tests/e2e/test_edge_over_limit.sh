#!/bin/sh
# Issue 20, 7: over the connection limit a new connection is answered 503
# (too_many_connections, Retry-After) and closed at once, instead of
# waiting in the kernel's backlog; once connections are free again,
# requests are served.  The limit is 16 (the least allowed), shared by the
# loops; 40 connections that send nothing are opened.
. tests/e2e/lib.sh
LG_ENV="LOCKGATE_MAX_CONNECTIONS=16 LOCKGATE_HEAD_TIMEOUT=60" lg_start
A="Authorization: Bearer $(lg_token alice)"

python3 - "${LG_URL#http://}" <<'PY' || lg_fail "over the limit"
import selectors, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
N, LIMIT, WAIT_S = 40, 16, 2.0
socks = [socket.create_connection((host, int(port)), timeout=5) for _ in range(N)]
sel = selectors.DefaultSelector()
got = {}
for s in socks:
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    got[s] = b""
closed = set()
end = time.monotonic() + WAIT_S  # the refused are answered at once
while time.monotonic() < end and len(closed) < N:
    for key, _ in sel.select(timeout=max(0.0, end - time.monotonic())):
        d = key.fileobj.recv(4096)
        if d:
            got[key.fileobj] += d
        else:
            closed.add(key.fileobj)
            sel.unregister(key.fileobj)
refused = 0
for s in closed:
    head, _, body = got[s].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), got[s][:200]
    assert b"\r\nRetry-After: " in head, head
    assert b'"too_many_connections"' in body, body
    refused += 1
for s in socks:
    s.close()
assert refused >= N - LIMIT, "%d of %d refused, want at least %d" % (refused, N, N - LIMIT)
print("refused", refused)
PY
sleep 0.5
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "$A" "$LG_URL/v1/locks")
lg_eq "$code" 200 "served once connections are free"
n=$(lg_curl -H "$A" "$LG_URL/metrics" | sed -n 's/^lockgate_connections_refused_total //p')
[ "${n:-0}" -ge 24 ] || lg_fail "refused connections counted: $n"
lg_stop
echo ok
