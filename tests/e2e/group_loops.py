#!/usr/bin/env python3
"""group_loops.py: clients contending for a semaphore and a shared lock
across several lockgate instances, then a check of what they saw.
Python's standard library only.

  group_loops.py --urls U1,U2,U3 --token T --seconds S --out FILE
                 [--clients N] [--limit L]

N threads (default 9), each on its own instance in turn, for at most S
seconds: half loop on lock "sem" with limit=L (default 3), the others on
lock "rw", each acquire shared or (one in three) exclusive.  An acquire
waits up to 3 s; a grant is held ~100 ms and released.  Each grant is
logged as the interval the client held it (answer read .. release sent),
which lies inside the lease's validity.

Then the check, which exits 1 on a violation: on "sem" never more than L
intervals at once; on "rw" never an exclusive interval alongside any
other; fencing tokens distinct per name; every answer 200/204/409/503
(503 with Retry-After: the storage's faults); at least one grant of each
kind.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

HOLD_S = 0.1
TIMEOUT_S = 30


def client(i, a, deadline, grants, codes, lock):
    url = a.urls[i % len(a.urls)]
    u = urllib.parse.urlsplit(url)
    hdr = {"Authorization": "Bearer " + a.token}
    rnd = random.Random(i)
    sem = i % 2 == 0
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT_S)

    def call(path):
        nonlocal conn
        try:
            conn.request("POST", path, headers=hdr)
            r = conn.getresponse()
            body = r.read()
            code, ra = r.status, r.getheader("Retry-After")
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port,
                                              timeout=TIMEOUT_S)
            code, ra, body = 0, None, b""
        with lock:
            codes.append((code, ra))
        return code, body

    while time.monotonic() < deadline:
        if sem:
            name, q, kind = "sem", "limit=%d" % a.limit, "sem"
        elif rnd.randrange(3) == 0:
            name, q, kind = "rw", "mode=exclusive", "exclusive"
        else:
            name, q, kind = "rw", "mode=shared", "shared"
        code, body = call("/v1/locks/%s:acquire?%s&ttl=10&wait=3&holder=c%d"
                          % (name, q, i))
        if code != 200:
            time.sleep(0.05 + rnd.random() * 0.1)
            continue
        t1 = time.monotonic()
        d = json.loads(body)
        time.sleep(HOLD_S)
        t2 = time.monotonic()
        with lock:
            grants.append({"name": name, "kind": kind, "t1": t1, "t2": t2,
                           "token": d["fencing_token"], "client": i})
        call("/v1/locks/%s:release?lease_id=%s" % (name, d["lease_id"]))


def most_at_once(rows):
    ev = sorted([(r["t1"], 1) for r in rows] + [(r["t2"], -1) for r in rows],
                key=lambda e: (e[0], e[1]))
    n = best = 0
    for _, d in ev:
        n += d
        best = max(best, n)
    return best


def check(a, grants, codes):
    bad = []
    for code, ra in codes:
        if code in (200, 204, 409) or (code == 503 and ra):
            continue
        bad.append("answer %s (Retry-After %s)" % (code, ra))
    sem = [g for g in grants if g["name"] == "sem"]
    rw = [g for g in grants if g["name"] == "rw"]
    if most_at_once(sem) > a.limit:
        bad.append("%d semaphore leases at once, limit %d"
                   % (most_at_once(sem), a.limit))
    for x in [g for g in rw if g["kind"] == "exclusive"]:
        for y in rw:
            if y is not x and y["t1"] < x["t2"] and x["t1"] < y["t2"]:
                bad.append("exclusive lease %s alongside %s %s"
                           % (x["token"], y["kind"], y["token"]))
    for rows in (sem, rw):
        toks = [g["token"] for g in rows]
        if len(set(toks)) != len(toks):
            bad.append("a fencing token granted twice")
    kinds = {g["kind"] for g in grants}
    for k in ("sem", "shared", "exclusive"):
        if k not in kinds:
            bad.append("no %s grant at all" % k)
    print("    %d semaphore grants (at most %d at once), %d shared, "
          "%d exclusive; %d answers" %
          (len(sem), most_at_once(sem),
           len([g for g in rw if g["kind"] == "shared"]),
           len([g for g in rw if g["kind"] == "exclusive"]), len(codes)),
          file=sys.stderr)
    for b in bad[:20]:
        print("    " + b, file=sys.stderr)
    return not bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--urls", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--clients", type=int, default=9)
    p.add_argument("--limit", type=int, default=3)
    a = p.parse_args()
    a.urls = a.urls.split(",")
    grants, codes, lock = [], [], threading.Lock()
    deadline = time.monotonic() + a.seconds
    ts = [threading.Thread(target=client,
                           args=(i, a, deadline, grants, codes, lock))
          for i in range(a.clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(a.out, "w") as f:
        json.dump({"grants": grants, "codes": codes}, f)
    sys.exit(0 if check(a, grants, codes) else 1)


if __name__ == "__main__":
    main()
