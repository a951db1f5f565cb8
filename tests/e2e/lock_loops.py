#!/usr/bin/env python3
"""lock_loops.py: concurrent acquire/release loops against one lockgate,
then a check of what they saw.  Python's standard library only.

  lock_loops.py run --url URL --token T --loops N --names K --seconds S
                    --cycles C --out FILE [--prefix P] [--ttl TTL]
      N threads, each its own keep-alive connection, loop i on lock
      P/n(i mod K): acquire (wait=0), hold ~2 ms, release; until S seconds
      or C cycles each, whichever comes first.  A release answered other
      than 204 is not retried (the lease lapses at its TTL).  One JSON
      line per request to FILE: loop, name, op, code, retry_after, lease,
      token, t0 (request sent) and t1 (answer read), in ns of the
      monotonic clock.  Exit 0 once every loop has ended, whatever the
      answers were (check judges them).

  lock_loops.py check --out FILE --held HELD_JSON [--allow-503]
      (--allow-503 also lets a release be answered 404 when its lease
      may have expired first: answered over TTL after its acquire was sent)
                      [--min-grants G]
      Judges FILE: every answer is 200/204/409 (or 503 with Retry-After
      when --allow-503; a transport error fails); on each name, the
      intervals in which a client held a lease (grant answered to release
      sent) never overlap; fencing tokens are distinct per name and grow
      in grant order; at least G grants.  HELD_JSON (lockgate's list
      after the loops ended) holds no lock whose lease's release was
      answered 204, nor one nobody was granted unless an acquire on its
      name was answered 503 (the storage may have applied it).
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

HOLD_S = 0.002
TIMEOUT_S = 30  # one request, lockgate's storage deadline included


def request(conn, method, path, headers):
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    return r.status, r.getheader("Retry-After"), body


def loop(i, a, deadline, out, lock):
    u = urllib.parse.urlsplit(a.url)
    name = "%s/n%d" % (a.prefix, i % a.names)
    hdr = {"Authorization": "Bearer " + a.token}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT_S)
    rows = []

    def call(op, path):
        nonlocal conn
        t0 = time.monotonic_ns()
        try:
            code, ra, body = request(conn, "POST", path, hdr)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port,
                                              timeout=TIMEOUT_S)
            code, ra, body = 0, None, str(e).encode()
        row = {"loop": i, "name": name, "op": op, "code": code,
               "retry_after": ra, "t0": t0, "t1": time.monotonic_ns()}
        rows.append(row)
        return row, body

    cycles = 0
    while cycles < a.cycles and time.monotonic() < deadline:
        cycles += 1
        row, body = call("acquire", "/v1/locks/%s:acquire?ttl=%d&holder=l%d"
                         % (name, a.ttl, i))
        if row["code"] != 200:
            if row["code"] != 409:
                time.sleep(0.05)  # as a caller told to retry later
            continue
        d = json.loads(body)
        row["ttl"] = a.ttl
        row["lease"] = d["lease_id"]
        row["token"] = d["fencing_token"]
        time.sleep(HOLD_S)
        rel, _ = call("release", "/v1/locks/%s:release?lease_id=%s"
                      % (name, d["lease_id"]))
        rel["lease"] = d["lease_id"]
        rel["token"] = d["fencing_token"]
    conn.close()
    with lock:
        for r in rows:
            out.write(json.dumps(r) + "\n")


def run(a):
    deadline = time.monotonic() + a.seconds
    lock = threading.Lock()
    with open(a.out, "w") as out:
        ts = [threading.Thread(target=loop, args=(i, a, deadline, out, lock))
              for i in range(a.loops)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(a.seconds + 2 * TIMEOUT_S)
        if any(t.is_alive() for t in ts):
            print("lock_loops: a loop did not end", file=sys.stderr)
            return 1
    return 0


def check(a):
    rows = [json.loads(l) for l in open(a.out)]
    ok = {200, 204, 409} | ({503} if a.allow_503 else set())
    # Across a restart of the front, a release may be answered 404
    # lease_not_found when its lease expired and was taken over while the
    # storage was out of reach: only if the answer came over TTL after
    # the acquire was sent (the lease began after that).  A 404 sooner
    # would be a lost answer to a delete that went through, reported as
    # if the lease had gone: a failure.
    acq = {r["lease"]: r for r in rows
           if r["op"] == "acquire" and r["code"] == 200}
    lost = [r for r in rows if a.allow_503 and r["op"] == "release" and
            r["code"] == 404 and
            r["t1"] - acq[r["lease"]]["t0"] > acq[r["lease"]]["ttl"] * 1e9]
    if lost:
        print("lock_loops: %d releases answered 404 after their lease's "
              "TTL, across the outage" % len(lost))
    bad = [r for r in rows if (r["code"] not in ok and r not in lost) or
           (r["code"] == 503 and not r["retry_after"])]
    assert not bad, "unexpected answers: %s" % bad[:5]
    grants = [r for r in rows if r["op"] == "acquire" and r["code"] == 200]
    assert len(grants) >= a.min_grants, \
        "%d grants, want at least %d" % (len(grants), a.min_grants)
    rel = {r["lease"]: r for r in rows if r["op"] == "release"}
    by_name = {}
    for g in grants:
        r = rel.get(g["lease"])
        # Held from the grant's answer until the release was sent (or,
        # with no release sent, the end of the run).
        end = r["t0"] if r else float("inf")
        by_name.setdefault(g["name"], []).append((g["t1"], end, g))
    for name, iv in by_name.items():
        iv.sort(key=lambda x: x[0])
        toks = [int(x[2]["token"]) for x in iv]
        assert len(set(toks)) == len(toks), "%s: a token granted twice" % name
        for p, q in zip(iv, iv[1:]):
            assert p[1] <= q[0], "%s: %s overlaps %s" % (name, p[2], q[2])
            assert int(q[2]["token"]) > int(p[2]["token"]), \
                "%s: token went from %s to %s" % (name, p[2]["token"],
                                                  q[2]["token"])
    acked = {r["token"] for r in rows
             if r["op"] == "release" and r["code"] == 204}
    granted = {g["token"] for g in grants}
    maybe = {r["name"] for r in rows
             if r["op"] == "acquire" and r["code"] in (0, 503)}
    held = json.load(open(a.held))["locks"]
    for l in held:
        tok = l["fencing_token"]
        assert tok not in acked, \
            "%s: its release was answered 204 but it is held" % l["name"]
        assert tok in granted or l["name"] in maybe, \
            "%s: held by a lease nobody was granted" % l["name"]
    codes = {}
    for r in rows:
        k = "%s %d" % (r["op"], r["code"])
        codes[k] = codes.get(k, 0) + 1
    print("%d grants on %d names, none overlapping; %d releases answered "
          "204; %d held at the end; answers %s"
          % (len(grants), len(by_name), len(acked), len(held),
             json.dumps(codes, sort_keys=True)))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["run", "check"])
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--loops", type=int, default=64)
    p.add_argument("--names", type=int, default=16)
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--ttl", type=int, default=5)
    p.add_argument("--prefix", default="h2")
    p.add_argument("--out", required=True)
    p.add_argument("--held")
    p.add_argument("--allow-503", action="store_true")
    p.add_argument("--min-grants", type=int, default=1)
    a = p.parse_args()
    return run(a) if a.mode == "run" else check(a)


if __name__ == "__main__":
    sys.exit(main())
