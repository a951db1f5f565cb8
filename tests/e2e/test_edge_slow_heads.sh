#!/bin/sh
# Issue 20, 7: clients that open connections and trickle their request
# heads cannot hold every connection.  With a 2 s head timeout and room for
# 100 connections, 40 tricklers (a header line every 0.4 s, which restarts
# libmicrohttpd's idle timeout each time) are closed within the timeout
# and a sweep; meanwhile and after, a holder's refresh and release are
# answered; a kept connection that is idle between two requests is not cut
# by the head timeout (only by the idle timeout); the closes are counted.
. tests/e2e/lib.sh
LG_ENV="LOCKGATE_HEAD_TIMEOUT=2 LOCKGATE_MAX_CONNECTIONS=100" lg_start
A="Authorization: Bearer $(lg_token alice)"
out=$LG_TMP/out

lg_curl -o "$out" -X POST -H "$A" "$LG_URL/v1/locks/held:acquire?ttl=60" >/dev/null
L=$(lg_json lease_id <"$out")

python3 - "${LG_URL#http://}" "$A" <<'PY' || lg_fail "slow heads"
import socket, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1)
auth = sys.argv[2]
N, TIMEOUT, BOUND = 40, 2.0, 6.0

def trickle(results, i):
    s = socket.create_connection((host, int(port)), timeout=BOUND)
    s.settimeout(0.4)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    closed = None
    while time.monotonic() - t0 < BOUND:
        try:
            s.sendall(b"X-Slow: a\r\n")
            if s.recv(4096) == b"":
                closed = time.monotonic() - t0
                break
        except socket.timeout:
            continue
        except OSError:
            closed = time.monotonic() - t0
            break
    s.close()
    results[i] = closed

results = [None] * N
threads = [threading.Thread(target=trickle, args=(results, i)) for i in range(N)]
for t in threads:
    t.start()
time.sleep(0.5)
# The holder is served while they trickle (a few connections are left).
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(("GET /v1/locks/held HTTP/1.1\r\nHost: x\r\n" + auth +
    "\r\nConnection: close\r\n\r\n").encode())
got = s.recv(65536)
s.close()
assert got.startswith(b"HTTP/1.1 200 "), got[:100]
for t in threads:
    t.join()
late = [r for r in results if r is None]
assert not late, "%d of %d trickling connections still open after %s s" % (
    len(late), N, BOUND)
early = [r for r in results if r < TIMEOUT - 0.5]
assert not early, "closed before the head timeout: %r" % early

# A kept connection idle between two requests is not cut by the head
# timeout: 3 s of quiet, then a second request on it is answered.
s = socket.create_connection((host, int(port)), timeout=5)
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
s.sendall(req)
assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
time.sleep(3.0)
s.sendall(req)
assert s.recv(65536).startswith(b"HTTP/1.1 200 "), "a kept connection was cut"
s.close()
PY

code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/held:refresh?lease_id=$L")
lg_eq "$code" 200 "the holder refreshes after the flood"
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST -H "$A" \
    "$LG_URL/v1/locks/held:release?lease_id=$L")
lg_eq "$code" 204 "and releases"
n=$(lg_curl -H "$A" "$LG_URL/metrics" | sed -n 's/^lockgate_slow_heads_closed_total //p')
lg_eq "$n" 40 "slow heads closed, counted"
lines=$(grep -c 'request head took over' "$LG_LOG")
[ "$lines" -le 8 ] || lg_fail "$lines log lines for 40 closes: want one per sweep"
lg_stop
echo ok
