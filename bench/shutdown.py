#!/usr/bin/env python3
"""bench/shutdown.py: SIGTERM under load (issue 24), a figure, not a test.

One lockgate on a durable file:// store, 64 holders that keep taking,
refreshing and releasing locks of their own, and 1,000 waiters (wait=250)
on locks those holders hold.  Then SIGTERM, by PID.  Measured and checked:

  - the time from SIGTERM to the process's exit, and its exit status (0);
  - every waiter was answered 503 shutting_down with Retry-After;
  - no held lease was lost: after a restart on the same directory, every
    lease a holder held at SIGTERM refreshes (200) and releases (204).

Prints one line per figure and "shutdown: OK" or the failures; exits 1 on
a failure.  Run: python3 bench/shutdown.py [--bin build/lockgate]
(`make bench-shutdown`).  Loopback only; bounded in count and time.
"""
import argparse
import asyncio
import json
import os
import resource
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests",
                                "soak"))
from soak import Server, mint_token  # noqa: E402  (one way to start one)

WAITERS, HOLDERS = 1000, 64
WAIT_S, TTL_S = 250, 120
BOUND_S = 60  # every phase ends by then


async def request(port, method, path, token, timeout=BOUND_S):
    """One HTTP/1.1 request on a new connection: (status, headers, body)."""
    r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port),
                                  timeout)
    w.write(("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Length: 0\r\nConnection: close\r\n\r\n" %
             (method, path, token)).encode())
    await w.drain()
    data = await asyncio.wait_for(r.read(), timeout)
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (ln.partition(":") for ln in lines[1:])}
    return status, headers, body


async def holder(port, token, k, held, stop):
    """Take lock h/K, refresh it, release it, again, until STOP or the
    server is gone; keep the lease it holds in HELD[K] (None between
    leases)."""
    try:
        await holder_loop(port, token, k, held, stop)
    except (OSError, asyncio.TimeoutError):
        pass  # the server went away under a request: SIGTERM


async def holder_loop(port, token, k, held, stop):
    while not stop.is_set():
        st, _, body = await request(port, "POST",
                                    "/v1/locks/h/%d:acquire?ttl=%d" %
                                    (k, TTL_S), token)
        if st != 200:
            return
        held[k] = json.loads(body)["lease_id"]
        for _ in range(3):
            if stop.is_set():
                return  # SIGTERM came: keep the lease across the restart
            st, _, _ = await request(port, "POST",
                                     "/v1/locks/h/%d:refresh?lease_id=%s" %
                                     (k, held[k]), token)
            if st != 200:
                return
        if stop.is_set():
            return
        st, _, _ = await request(port, "POST",
                                 "/v1/locks/h/%d:release?lease_id=%s" %
                                 (k, held[k]), token)
        held[k] = None
        if st != 204:
            return


async def waiter(port, token, k):
    try:
        return await request(port, "POST", "/v1/locks/w/%d:acquire?wait=%d"
                             % (k, WAIT_S), token, timeout=BOUND_S)
    except (OSError, asyncio.TimeoutError) as e:
        return 0, {}, str(e).encode()


async def run(args, tmp):
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write("bench-shutdown-secret-0123456789abcdef")
    env = dict(os.environ, LOCKGATE_JWT_SECRET_FILE=secret,
               LOCKGATE_MAX_CONNECTIONS="8000", LOCKGATE_MAX_WAITERS="4000",
               LOCKGATE_MAX_OWNER_WAITERS="4000")
    for k in ("LOCKGATE_STORE", "LOCKGATE_LISTEN", "PORT",
              "LOCKGATE_JWT_SECRET"):
        env.pop(k, None)
    store = "file://" + os.path.join(tmp, "data")
    srv = Server("shutdown", args.bin, store, env, tmp)
    srv.start()
    tok_h = mint_token(args.bin, secret, "holders")
    tok_w = mint_token(args.bin, secret, "waiters")
    tok_o = mint_token(args.bin, secret, "occupant")
    failures = []
    # The waiters' locks are held, so they wait.
    for k in range(20):
        st, _, _ = await request(srv.port, "POST",
                                 "/v1/locks/w/%d:acquire?ttl=%d" % (k, TTL_S),
                                 tok_o)
        if st != 200:
            failures.append("occupying w/%d: HTTP %d" % (k, st))
    held, stop = [None] * HOLDERS, asyncio.Event()
    busy = [asyncio.ensure_future(holder(srv.port, tok_h, k, held, stop))
            for k in range(HOLDERS)]
    waits = [asyncio.ensure_future(waiter(srv.port, tok_w, k % 20))
             for k in range(WAITERS)]
    t_end = time.monotonic() + BOUND_S
    while time.monotonic() < t_end:
        st, _, body = await request(srv.port, "GET", "/metrics", tok_o)
        n = [ln for ln in body.decode().splitlines()
             if ln.startswith("lockgate_waiters ")]
        if n and int(n[0].split()[1]) >= WAITERS:
            break
        await asyncio.sleep(0.2)
    else:
        failures.append("not every waiter was waiting within %d s" % BOUND_S)
    await asyncio.sleep(2)  # the holders busy meanwhile
    stop.set()
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    rc = await asyncio.get_running_loop().run_in_executor(
        None, srv.proc.wait, BOUND_S)
    took = time.monotonic() - t0
    answers = await asyncio.wait_for(asyncio.gather(*waits), BOUND_S)
    await asyncio.wait(busy, timeout=BOUND_S)
    print("shutdown: SIGTERM to exit %.2f s, exit status %d" % (took, rc))
    bad = [a for a in answers if a[0] != 503 or "retry-after" not in a[1] or
           b'"shutting_down"' not in a[2]]
    print("shutdown: %d waiters, %d answered 503 shutting_down with "
          "Retry-After" % (len(answers), len(answers) - len(bad)))
    if rc != 0:
        failures.append("exit status %d" % rc)
    if bad:
        failures.append("%d waiters otherwise answered, first: %r" %
                        (len(bad), bad[0][:1] + (bad[0][2][:120],)))
    # The leases held at SIGTERM live on: refresh and release them.
    srv.start()
    kept = [(k, lid) for k, lid in enumerate(held) if lid]
    ok = 0
    for k, lid in kept:
        st1, _, _ = await request(srv.port, "POST",
                                  "/v1/locks/h/%d:refresh?lease_id=%s" %
                                  (k, lid), tok_h)
        st2, _, _ = await request(srv.port, "POST",
                                  "/v1/locks/h/%d:release?lease_id=%s" %
                                  (k, lid), tok_h)
        ok += st1 == 200 and st2 == 204
    print("shutdown: %d leases held at SIGTERM, %d refreshed and released "
          "after the restart" % (len(kept), ok))
    if ok != len(kept):
        failures.append("%d held leases lost" % (len(kept) - ok))
    srv.stop()
    return failures


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/lockgate")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockgate-shutdown.") as tmp:
        failures = asyncio.run(run(args, tmp))
    for f in failures:
        print("shutdown: FAIL " + f)
    print("shutdown: " + ("OK" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
