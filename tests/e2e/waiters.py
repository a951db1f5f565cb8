#!/usr/bin/env python3
"""waiters.py: park N long-poll acquires on a held lock, signal lockgate,
and check how every waiter is answered.  One process, asyncio, stdlib only,
so the answer times are measured from the signal itself.

    waiters.py --port P --token T --name LOCK --count N --pid PID
               --signal TERM|INT [--metrics-token T] [--budget 1.0]

Steps: open N connections and send `POST /v1/locks/LOCK:acquire?wait=60`;
poll /metrics until lockgate_waiters reaches N (bounded); send the signal
to PID; read every answer.  Passes when every waiter got 503 with a
Retry-After header and a JSON error body, all within --budget seconds of
the signal.  Prints one summary line; exits 1 on any failure.
"""
import argparse
import asyncio
import os
import re
import signal
import sys
import time

WAIT_READY_S = 30      # waiting for the gauge to reach N
ANSWER_LIMIT_S = 10    # hard bound on reading the answers


async def request(host, port, method, path, token):
    r, w = await asyncio.open_connection(host, port)
    hdr = ("%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: 0\r\n"
           "Connection: close\r\n" % (method, path, host, port))
    if token:
        hdr += "Authorization: Bearer %s\r\n" % token
    w.write((hdr + "\r\n").encode())
    await w.drain()
    return r, w


async def read_answer(r):
    head = await r.readuntil(b"\r\n\r\n")
    t = time.monotonic()
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    body = await r.readexactly(n) if n else await r.read()
    return t, status, headers, body


async def gauge(host, port, token):
    r, w = await request(host, port, "GET", "/metrics", token)
    try:
        _, status, _, body = await read_answer(r)
    finally:
        w.close()
    if status != 200:
        raise RuntimeError("/metrics answered %d" % status)
    m = re.search(rb"^lockgate_waiters (\d+)$", body, re.M)
    return int(m.group(1)) if m else -1


async def main(a):
    host = "127.0.0.1"
    path = "/v1/locks/%s:acquire?wait=60&ttl=30" % a.name
    conns = []
    for _ in range(a.count):
        conns.append(await request(host, a.port, "POST", path, a.token))
    deadline = time.monotonic() + WAIT_READY_S
    seen = -1
    while time.monotonic() < deadline:
        seen = await gauge(host, a.port, a.metrics_token or a.token)
        if seen >= a.count:
            break
        await asyncio.sleep(0.1)
    if seen < a.count:
        print("FAIL: lockgate_waiters reached %d, not %d" % (seen, a.count))
        return 1
    t0 = time.monotonic()
    os.kill(a.pid, getattr(signal, "SIG" + a.signal))
    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(read_answer(r) for r, _ in conns),
                           return_exceptions=True), ANSWER_LIMIT_S)
    except asyncio.TimeoutError:
        print("FAIL: not every waiter was answered within %d s" %
              ANSWER_LIMIT_S)
        return 1
    bad = []
    worst = 0.0
    for i, ans in enumerate(answers):
        if isinstance(ans, BaseException):
            bad.append("waiter %d: no answer (%r)" % (i, ans))
            continue
        t, status, headers, body = ans
        worst = max(worst, t - t0)
        if status != 503:
            bad.append("waiter %d: status %d, not 503" % (i, status))
        elif not re.fullmatch(r"\d+", headers.get("retry-after", "")):
            bad.append("waiter %d: 503 without a Retry-After" % i)
        elif b'"error"' not in body:
            bad.append("waiter %d: 503 without a JSON error body" % i)
    for _, w in conns:
        w.close()
    if worst > a.budget:
        bad.append("the last waiter was answered %.3f s after SIG%s "
                   "(budget %.1f s)" % (worst, a.signal, a.budget))
    if bad:
        print("FAIL: %d problems; first: %s" % (len(bad), "; ".join(bad[:5])))
        return 1
    print("%d waiters answered 503 + Retry-After, last %.3f s after SIG%s"
          % (a.count, worst, a.signal))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--metrics-token")
    p.add_argument("--name", required=True)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--signal", choices=("TERM", "INT"), default="TERM")
    p.add_argument("--budget", type=float, default=1.0)
    sys.exit(asyncio.run(main(p.parse_args())))
