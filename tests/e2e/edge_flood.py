#!/usr/bin/env python3
"""edge_flood.py: a lock's holder is served under a flood (issue 20, 7).

    edge_flood.py --port P --pid PID --holder-token T --lease L --name LOCK
                  --waiter-token T [--waiters 10000] [--half-open 4000]

One process, non-blocking sockets on one selector, stdlib only.  Steps:

1. Open HALF_OPEN connections that each send half a request head, and
   keep trickling a header line on each of them about once a second (as
   an attacker holding connections would; no token needed).
2. Read the server's VmRSS (/proc/PID/status): "before".
3. Park WAITERS authenticated acquires (wait=60) on LOCK; wait until the
   server's lockgate_waiters gauge says they are all parked; VmRSS again:
   "parked".  (parked - before) / WAITERS must be at most 20 KiB.
4. Meanwhile, the holder's refresh, inspect and release are each
   answered (each within a generous bound, a loop limit only); the
   refresh keeps the lease (same lease_id and fencing token).
5. The release wakes the first waiter, which is granted; every other
   waiter and every half-open connection is still open (none was dropped
   to serve the holder).

Prints a summary line; exits 1 with a FAIL line on any failure.  Every
loop is bounded in count and time; every socket is closed at the end.
"""
import argparse
import json
import os
import re
import selectors
import socket
import sys
import time

HOST = "127.0.0.1"
RSS_PER_WAITER_MAX_KIB = 20
ANSWER_BOUND_S = 20    # a loop limit for one answer, not a performance bound
PARK_BOUND_S = 40      # for every waiter to be parked
OPEN_BATCH = 500       # connections opened before waiting for the server
TRICKLE_EVERY_S = 1.0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^VmRSS:\s+(\d+) kB$", f.read(), re.M)
    if not m:
        fail("no VmRSS in /proc/%d/status" % pid)
    return int(m.group(1))


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Flood:
    def __init__(self, port, pid):
        self.port = port
        self.pid = pid
        self.sel = selectors.DefaultSelector()
        self.half_open = []
        self.waiters = []
        self.got = {}        # socket -> bytes received
        self.closed = set()  # sockets the server closed
        self.next_trickle = 0.0

    def connect(self, first):
        s = socket.create_connection((HOST, self.port), timeout=5)
        s.setblocking(False)
        s.sendall(first)
        self.got[s] = b""
        self.sel.register(s, selectors.EVENT_READ)
        return s

    def pump(self, timeout=0.0):
        """Read what came in; trickle a header line on each half-open
        connection when it is time."""
        for key, _ in self.sel.select(timeout):
            s = key.fileobj
            try:
                d = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                d = b""
            if d:
                self.got[s] += d
            else:
                self.closed.add(s)
                self.sel.unregister(s)
        now = time.monotonic()
        if now >= self.next_trickle:
            self.next_trickle = now + TRICKLE_EVERY_S
            for s in self.half_open:
                if s not in self.closed:
                    try:
                        s.send(b"X-T: 1\r\n")
                    except OSError:
                        pass

    def open_many(self, n, first, into):
        """Open N connections sending FIRST, in batches, waiting for the
        server to have accepted each batch (bounded), so that the
        kernel's accept queue never overflows (a dropped SYN costs the
        client a 1 s retransmission)."""
        base = open_fds(self.pid)
        end = time.monotonic() + PARK_BOUND_S
        for i in range(n):
            into.append(self.connect(first))
            if (i + 1) % OPEN_BATCH == 0 or i + 1 == n:
                while (open_fds(self.pid) < base + i + 1 - 16 and
                       time.monotonic() < end):
                    self.pump(0.01)
        if open_fds(self.pid) < base + n - 16:
            fail("the server accepted %d of %d connections" %
                 (open_fds(self.pid) - base, n))

    def ask(self, method, path, token):
        """One request on a new connection while the flood goes on:
        (status, body), or a FAIL when no answer came within the bound."""
        req = ("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: 0\r\nConnection: close\r\n\r\n" %
               (method, path, token)).encode()
        s = self.connect(req)
        end = time.monotonic() + ANSWER_BOUND_S
        while s not in self.closed and time.monotonic() < end:
            self.pump(0.05)
        if s not in self.closed:
            fail("no answer to %s %s within %d s" %
                 (method, path, ANSWER_BOUND_S))
        data = self.got.pop(s)
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 "):
            fail("%s %s: no HTTP answer: %r" % (method, path, data[:200]))
        return int(head.split(b" ")[1]), body

    def gauge(self, token):
        status, body = self.ask("GET", "/metrics", token)
        if status != 200:
            fail("/metrics answered %d" % status)
        m = re.search(rb"^lockgate_waiters (\d+)$", body, re.M)
        return int(m.group(1)) if m else -1

    def close_all(self):
        for s in self.half_open + self.waiters:
            s.close()
        self.sel.close()


def holder_served(fl, a):
    """The holder's refresh, inspect and release, under the flood."""
    lock = "/v1/locks/" + a.name
    status, body = fl.ask("POST", lock + ":refresh?lease_id=" + a.lease,
                          a.holder_token)
    if status != 200:
        fail("refresh answered %d: %r" % (status, body[:200]))
    lease = json.loads(body)
    if lease.get("lease_id") != a.lease or lease.get("owner") != "holder":
        fail("the refresh did not keep the lease: %r" % body[:300])
    status, body = fl.ask("GET", lock, a.holder_token)
    if status != 200:
        fail("inspect answered %d: %r" % (status, body[:200]))
    held = json.loads(body)
    if held.get("owner") != "holder" or \
            held.get("fencing_token") != lease.get("fencing_token"):
        fail("inspect does not show the holder's lease: %r" % body[:300])
    status, body = fl.ask("POST", lock + ":release?lease_id=" + a.lease,
                          a.holder_token)
    if status != 204:
        fail("release answered %d: %r" % (status, body[:200]))


def main(a):
    fl = Flood(a.port, a.pid)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    start = rss_kib(a.pid)
    fl.open_many(a.half_open, head, fl.half_open)
    fl.pump(0.2)
    before = rss_kib(a.pid)
    print("VmRSS %d KiB, %d KiB with %d half-open connections: %.1f KiB "
          "each (for the record)" % (start, before, a.half_open,
                                     (before - start) / a.half_open))
    acquire = ("POST /v1/locks/%s:acquire?wait=60&ttl=30 HTTP/1.1\r\n"
               "Host: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: 0\r\n\r\n" % (a.name, a.waiter_token))
    fl.open_many(a.waiters, acquire.encode(), fl.waiters)
    end = time.monotonic() + PARK_BOUND_S
    parked = -1
    while time.monotonic() < end:
        parked = fl.gauge(a.holder_token)
        if parked >= a.waiters:
            break
        fl.pump(0.2)
    if parked != a.waiters:
        fail("lockgate_waiters reached %d, not %d" % (parked, a.waiters))
    after = rss_kib(a.pid)
    per = (after - before) / a.waiters
    print("VmRSS %d KiB before, %d KiB with %d waiters parked: %.1f KiB "
          "each" % (before, after, a.waiters, per))
    if per > RSS_PER_WAITER_MAX_KIB:
        fail("a parked waiter costs %.1f KiB of RSS (at most %d)" %
             (per, RSS_PER_WAITER_MAX_KIB))
    holder_served(fl, a)
    # The release wakes the first waiter: it is granted, nobody else.
    end = time.monotonic() + ANSWER_BOUND_S
    while time.monotonic() < end and not any(fl.got[s] for s in fl.waiters):
        fl.pump(0.05)
    answered = [s for s in fl.waiters if fl.got[s]]
    if len(answered) != 1 or \
            not fl.got[answered[0]].startswith(b"HTTP/1.1 200 "):
        fail("after the release, %d waiters answered (want the first, "
             "granted): %r" % (len(answered),
                               [fl.got[s][:40] for s in answered[:3]]))
    fl.pump(0.2)
    gone = [s for s in fl.half_open + fl.waiters if s in fl.closed]
    if gone:
        fail("%d flood connections were closed by the server" % len(gone))
    fl.close_all()
    print("holder refreshed, inspected and released under %d waiters and "
          "%d half-open connections; the first waiter was granted" %
          (a.waiters, a.half_open))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--holder-token", required=True)
    p.add_argument("--lease", required=True)
    p.add_argument("--waiter-token", required=True)
    p.add_argument("--waiters", type=int, default=10000)
    p.add_argument("--half-open", type=int, default=4000)
    sys.exit(main(p.parse_args()))
