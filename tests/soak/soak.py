#!/usr/bin/env python3
"""soak.py: many clients, faults and crashes against real lockgate
processes; every request recorded; check_history.py judges the history.

    soak.py [--scenario gs|file|both] [--seconds S] [--clients N]
            [--bin build/asan/lockgate] [--fake build/tools/fake_gcs]
            [--seed N] [--min-grants N] [--keep DIR]

Scenarios (--seconds is shared between them: gs 60 %, file 40 %):
  gs    three lockgate instances on one fake GCS whose faults are on all
        along: every FAULT_EVERY_S one fault is queued on a random storage
        operation (latency, 503, 429, reset before the request, drop:
        applied then the connection closed without an answer).
  file  two lockgate processes on one file:// directory.
In both, one instance at a time is killed with SIGKILL at random moments
and restarted on its port.  Clients send each request to a random
instance (a load balancer's way) and act as jobs:
  - a job takes a hot lock (few, contended, waiting up to a few seconds)
    or a cold one (many, wait=0), holds it briefly (some long enough to
    refresh every refresh_interval), and releases it;
  - a share of the jobs (GROUP_SHARE) take group locks instead (README
    "Semaphores and shared locks"), hot or cold as the client's other
    jobs: semaphores, each name always asked with its own limit (2 or
    3), and shared locks, where most jobs ask mode=shared and some
    mode=exclusive (a writer: an exclusive lease over the group); every
    request records the mode and limit it sent, and the checker holds
    each lock to its kind's number of holders; a few group jobs of key
    reusers leave their lease unreleased, so that a later job's key finds
    its own lease, live or past its expiry;
  - acquire retries as lockctl does: one client-chosen key (lease_id) for
    every retry of one acquire, Retry-After honoured (capped at
    RETRY_CAP_S to keep the soak dense); some clients use one key for all
    their jobs; a job that gives up after an unanswered attempt asks once
    more with its key and releases what that returns (lockctl's abandon);
  - a few acquires time out on purpose at the client (the server may
    grant after the client left: an ambiguous outcome);
  - stalls: a holder of a hot lock stops for ttl + STALL_EXTRA_S without
    refreshing, then refreshes with its old lease_id (it must be told
    lease_lost when a waiter took over; the checker judges it); on a
    semaphore the waiter asks with its limit, on a shared lock it asks
    mode=exclusive (it can only be granted once the stalled lease ends);
  - crashes: a holder of a fresh lock stops refreshing for good while a
    waiter asks for the lock with wait > ttl; the checker requires the
    grant within TTL + 2 s.
Every client records each request (times on time.monotonic(), one clock
for the whole process) in the format check_history.py reads.  At the end
every lock is inspected once, the servers are stopped by PID with SIGTERM
(each must exit 0: an ASan build then checks for leaks), their logs are
searched for sanitizer reports, and the checker judges the history.

Prints per scenario: grants, grants/s, the faults injected, kills,
stalls, crashes, the checker's verdict; and one closing line.  Exits 1 on
a violation, a sanitizer report, a server that did not exit 0, or fewer
grants than --min-grants.  Everything is bounded: client requests time
out, threads are joined with deadlines, servers are killed by PID.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_history  # noqa: E402

HOT_LOCKS = 3
COLD_LOCKS = 400
HOT_CLIENTS = 0.25       # clients whose jobs take hot locks
HOT_TTL = (3, 5)         # s
COLD_TTL = (3, 10)
HOT_WAIT = (0, 3)        # s a hot acquire asks to wait
LONG_HOLD_SHARE = 0.01   # jobs that hold past a refresh interval
KEY_REUSERS = 0.2        # clients using one key for all their jobs
SHORT_TIMEOUT_SHARE = 0.003  # acquires whose client gives up at once
SHORT_TIMEOUT_S = 0.002
GROUP_SHARE = 0.25       # jobs on group locks (semaphores, shared locks)
# Group kinds: a semaphore name is always asked with its own limit; a
# shared name with mode=shared, or by SHARED_WRITERS of its jobs with
# mode=exclusive (no limit).  Hot names: one per kind, asked with waits;
# cold: COLD_GROUP_LOCKS per kind, wait=0 (but for writers), few enough
# that jobs meet there.  Group jobs hold longer than others (GROUP_HOLD_S)
# so that semaphores fill up and shared leases overlap.
GROUP_KINDS = (("sem2", {"limit": 2}), ("sem3", {"limit": 3}),
               ("shr", {"mode": "shared"}))
COLD_GROUP_LOCKS = 3
SHARED_WRITERS = 0.1
GROUP_HOLD_S = (0, 0.3)
GROUP_FORGET_SHARE = 0.01  # a key reuser's group jobs left unreleased
ACQUIRE_TRIES = 6
RELEASE_TRIES = 5
RETRY_CAP_S = 0.5        # cap on a Retry-After pause (lockctl: 10 s)
CALL_TIMEOUT_S = 12      # beyond the storage retry budget below
GCS_RETRY_TOTAL_MS = 4000
FAULT_EVERY_S = (0.02, 0.1)
FAULT_KINDS = (("latency", 5), ("503", 2), ("429", 2), ("reset", 1),
               ("drop", 1))
FAULT_OPS = ("insert", "get", "patch", "delete", "write", "any")
LATENCY_MS = (20, 400)
# With storage faults on, the waiter's poll may be held by one latency
# fault and its read retried once after an injected error: the takeover
# bound grows by that much (without faults it is the 2 s).
FAULT_TAKEOVER_ALLOWANCE_S = LATENCY_MS[1] / 1000 + 0.3
KILL_EVERY_S = (4.0, 12.0)
KILL_DOWN_S = (0.1, 1.0)
STALL_EVERY_S = (3.0, 8.0)
STALL_EXTRA_S = 4.0      # past TTL + the 1 s margin + Date's 1 s + a poll
CRASH_EVERY_S = (1.0, 4.0)
CRASH_TTL = 3
CRASH_PAIRS = 3          # crashed jobs under way at once
START_TIMEOUT_S = 10
STOP_TIMEOUT_S = 10
SECRET = "soak-secret-0123456789abcdef0123456789abcdef"
SANITIZER_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|"
                          r"runtime error:")


def now():
    return time.monotonic()


# ------------------------------------------------------------ processes

class Server:
    """One lockgate instance; restarts keep its port."""

    def __init__(self, name, binary, store, env, tmp):
        self.name, self.binary, self.store = name, binary, store
        self.env, self.tmp = env, tmp
        self.proc, self.port, self.starts = None, 0, 0
        self.logs = []
        self.lock = threading.Lock()
        self.up = False

    def start(self):
        deadline = now() + START_TIMEOUT_S
        while True:
            self.starts += 1
            log = os.path.join(self.tmp, "%s.%d.log" % (self.name,
                                                       self.starts))
            self.logs.append(log)
            with open(log, "wb") as f:
                self.proc = subprocess.Popen(
                    [self.binary, "--listen", "127.0.0.1:%d" % self.port,
                     "--store", self.store], stdout=f, stderr=f,
                    env=self.env, stdin=subprocess.DEVNULL)
            port = self.wait_listening(log, deadline)
            if port:
                self.port = port
                self.up = True
                return
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if now() > deadline:
                raise RuntimeError("%s did not start (see %s)" % (self.name,
                                                                  log))
            time.sleep(0.2)   # the port may still be taken: try again

    def wait_listening(self, log, deadline):
        while now() < deadline:
            with open(log, "rb") as f:
                for line in f:
                    if b'"message":"listening"' in line:
                        m = re.search(rb'"port":(\d+)', line)
                        if m:
                            return int(m.group(1))
            if self.proc.poll() is not None:
                return 0
            time.sleep(0.05)
        return 0

    def kill9(self):
        self.up = False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        """SIGTERM by PID; returns the exit status (None: had to kill)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class FakeGcs:
    def __init__(self, binary, tmp):
        self.out = os.path.join(tmp, "fake_gcs.port")
        self.log = os.path.join(tmp, "fake_gcs.log")
        with open(self.out, "wb") as o, open(self.log, "wb") as e:
            self.proc = subprocess.Popen([binary, "--port", "0"], stdout=o,
                                         stderr=e, stdin=subprocess.DEVNULL)
        deadline = now() + START_TIMEOUT_S
        self.port = 0
        while now() < deadline and not self.port:
            with open(self.out) as f:
                line = f.readline().strip()
            if line.isdigit():
                self.port = int(line)
            elif self.proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if not self.port:
            raise RuntimeError("fake_gcs did not start")

    def control(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            c.request("GET", "/_fake/" + path)
            r = c.getresponse()
            body = r.read()
            return r.status, body
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def mint_token(binary, secret_file, sub):
    out = subprocess.run([binary, "token", "--secret-file", secret_file,
                          "--sub", sub, "--ttl", "6h"], capture_output=True,
                         timeout=30, check=True)
    return out.stdout.decode().strip()


# ------------------------------------------------------------ clients

class Recorder:
    """A client's history, one JSON line per record, streamed to a file
    (a long soak makes more than is worth keeping in memory)."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "w", encoding="utf-8", buffering=1 << 16)
        self.locks = set()

    def append(self, r):
        self.locks.add(r["lock"])
        self.f.write(json.dumps(r, separators=(",", ":")) + "\n")

    def close(self):
        self.f.close()


class Client:
    """One job runner with its own token, connections and history."""

    def __init__(self, soak, cid, token, rng):
        self.soak, self.cid, self.rng = soak, cid, rng
        self.auth = "Bearer " + token
        self.conns = {}
        self.hist = Recorder(os.path.join(soak.tmp, "h-%s.jsonl" % cid))
        self.fixed_key = (self.new_key() if rng.random() < KEY_REUSERS
                          else None)
        self.stall_next = False
        self.hot = False

    def new_key(self):
        return "k%s-%016x" % (self.cid, self.rng.getrandbits(64))

    def call(self, op, lock, params, timeout=CALL_TIMEOUT_S):
        srv = self.rng.choice(self.soak.servers)
        name = urllib.parse.quote(lock, safe="/")
        if op == "inspect":
            method, path = "GET", "/v1/locks/%s" % name
        else:
            method = "POST"
            path = "/v1/locks/%s:%s?%s" % (name, op,
                                           urllib.parse.urlencode(params))
        rec = {"c": self.cid, "op": op, "lock": lock, "inst": srv.name}
        if op == "acquire":
            rec.update(key=params["lease_id"], rttl=params["ttl"],
                       wait=params["wait"])
            if "mode" in params:
                rec["mode"] = params["mode"]
            if "limit" in params:
                rec["lim"] = params["limit"]
        elif op in ("refresh", "release"):
            rec["lid"] = params["lease_id"]
        # A connection to an earlier run of the instance is dead: a load
        # balancer would not use it (one made during a kill still fails).
        conn, gen = self.conns.get(srv.name, (None, None))
        if conn is None or gen != srv.starts:
            if conn is not None:
                conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", srv.port,
                                              timeout=timeout)
            self.conns[srv.name] = (conn, srv.starts)
        rec["i"] = now()
        try:
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.timeout = timeout
            conn.request(method, path, headers={
                "Authorization": self.auth, "Content-Length": "0"})
            resp = conn.getresponse()
            body = resp.read()
            rec["e"] = now()
            rec["st"] = resp.status
            ra = resp.getheader("Retry-After")
            if ra is not None:
                rec["ra"] = ra
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
        except (OSError, http.client.HTTPException) as ex:
            rec["e"] = now()
            rec["st"] = None
            rec["err"] = type(ex).__name__
            conn.close()
            self.conns.pop(srv.name, None)
            self.hist.append(rec)
            return rec
        if body:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                self.parse(rec, doc)
        self.hist.append(rec)
        return rec

    @staticmethod
    def holders(doc, top):
        """The fencing tokens of a lock's holders, when they tell more
        than its top-level token TOP (a group's other leases)."""
        hs = doc.get("holders")
        if not isinstance(hs, list):
            return None
        toks = [h.get("fencing_token") for h in hs if isinstance(h, dict)]
        return toks if toks and toks != [top] else None

    @classmethod
    def parse(cls, rec, doc):
        err = doc.get("error")
        if isinstance(err, dict):
            rec["code"] = err.get("code")
            lk = err.get("lock")
            if isinstance(lk, dict) and lk.get("fencing_token"):
                rec["htok"] = lk["fencing_token"]
                toks = cls.holders(lk, rec["htok"])
                if toks:
                    rec["htoks"] = toks
            return
        if rec["op"] == "inspect":
            rec["tok"] = doc.get("fencing_token")
            toks = cls.holders(doc, rec["tok"])
            if toks:
                rec["toks"] = toks
            return
        rec["lid"] = doc.get("lease_id", rec.get("lid"))
        rec["tok"] = doc.get("fencing_token")
        if rec["op"] == "acquire" and ("mode" in rec or "lim" in rec):
            # What the lease says it is, for the checker to compare.
            rec["amode"] = doc.get("mode")
            rec["alim"] = doc.get("limit")
        for src, dst in (("ttl", "ttl"), ("expires_in", "xin"),
                         ("expires_at", "xat"), ("refresh_interval", "ri")):
            if src in doc:
                rec[dst] = doc[src]

    def pause_for(self, rec, fallback):
        ra = rec.get("ra")
        s = int(ra) if ra and ra.isdigit() else fallback
        time.sleep(min(s, RETRY_CAP_S) * self.rng.uniform(0.5, 1.0))

    # A job's acquire: every retry with one key.  Returns the 200 record,
    # or None (refused, or given up).
    def acquire(self, lock, ttl, wait, key, budget_s, kind=None):
        """KIND: the mode and limit parameters of a group lock (None: a
        plain exclusive lock)."""
        deadline = now() + budget_s
        unsure = False
        for _ in range(ACQUIRE_TRIES):
            left = deadline - now()
            w = max(0, min(wait, int(left)))
            to = CALL_TIMEOUT_S + w
            if self.rng.random() < SHORT_TIMEOUT_SHARE:
                to = SHORT_TIMEOUT_S
            r = self.call("acquire", lock, dict(kind or {}, lease_id=key,
                                                ttl=ttl, wait=w), timeout=to)
            st = r["st"]
            if st == 200:
                self.soak.count("grants_seen")
                return r
            if st == 409 and r.get("code") == "limit_mismatch":
                # lockctl exits 73 at once: waiting would not help.
                self.soak.count("limit_mismatch")
                break
            if st == 409:
                if deadline - now() <= 0.5 or wait == 0:
                    break
                self.pause_for(r, 1)
                continue
            unsure = st is None or st >= 500
            self.soak.count("acquire_%s" % (st or "no_answer"))
            if self.soak.stopping.is_set() and not unsure:
                break
            self.pause_for(r, 1)
        if unsure:
            # lockctl's abandon: our key finds what the lost attempt left.
            r = self.call("acquire", lock, dict(kind or {}, lease_id=key,
                                                ttl=ttl, wait=0))
            if r["st"] == 200:
                self.soak.count("abandoned_leases_returned")
                self.release(lock, r["lid"])
        return None

    def refresh(self, lock, lid, ttl):
        return self.call("refresh", lock, {"lease_id": lid})

    def release(self, lock, lid):
        for _ in range(RELEASE_TRIES):
            r = self.call("release", lock, {"lease_id": lid})
            if r["st"] in (204, 404, 409):
                return r
            self.pause_for(r, 1)
        return None

    def hold(self, lock, lease, seconds):
        """Hold for SECONDS, refreshing every refresh_interval.  False
        when the lease was lost."""
        end = now() + seconds
        ri = lease.get("ri") or 1
        lid = lease["lid"]
        while True:
            t = now()
            if t >= end:
                return True
            time.sleep(min(ri, end - t))
            if now() >= end:
                return True
            r = self.refresh(lock, lid, lease.get("ttl"))
            if r["st"] in (404, 409):
                self.soak.count("refresh_lost")
                return False

    def group_lock(self, hot):
        """A group job's lock name and the mode and limit it asks with."""
        rng = self.rng
        base, kind = rng.choice(GROUP_KINDS)
        lock = ("%s/hot" % base if hot else
                "%s/cold/%d" % (base, rng.randrange(COLD_GROUP_LOCKS)))
        if kind.get("mode") == "shared" and rng.random() < SHARED_WRITERS:
            kind = {"mode": "exclusive"}
        return lock, kind

    def job(self):
        rng = self.rng
        hot = self.hot
        kind = None
        if rng.random() < GROUP_SHARE:
            lock, kind = self.group_lock(hot)
            ttl = rng.randint(*(HOT_TTL if hot else COLD_TTL))
            wait = rng.randint(*HOT_WAIT) if hot else 0
            if kind.get("mode") == "exclusive":
                # A writer among readers: without a wait it seldom finds
                # a gap; waiting, it holds new readers back (README).
                wait = rng.randint(1, HOT_WAIT[1])
        elif hot:
            lock = "hot/%d" % rng.randrange(HOT_LOCKS)
            ttl = rng.randint(*HOT_TTL)
            wait = rng.randint(*HOT_WAIT)
        else:
            lock = "cold/%d" % rng.randrange(COLD_LOCKS)
            ttl = rng.randint(*COLD_TTL)
            wait = 0
        key = self.fixed_key or self.new_key()
        lease = self.acquire(lock, ttl, wait, key, budget_s=wait + 2,
                             kind=kind)
        if lease is None:
            if hot:
                time.sleep(rng.uniform(0, 0.05))
            return
        if kind:
            self.soak.count("group_grants_seen")
        if hot and self.stall_next and \
                self.soak.left() > ttl + STALL_EXTRA_S + 2:
            self.stall_next = False
            self.stall(lock, lease, ttl, kind)
            return
        if rng.random() < LONG_HOLD_SHARE:
            # past two refresh intervals: at least two refreshes
            held = self.hold(lock, lease, 2 * (lease.get("ri") or 1) + 0.3)
        else:
            time.sleep(rng.uniform(*GROUP_HOLD_S) if kind else
                       rng.uniform(0, 0.15 if hot else 0.01))
            held = True
        if rng.random() < 0.02:
            self.call("inspect", lock, {})
        if kind and self.fixed_key and rng.random() < GROUP_FORGET_SHARE:
            # Gone without a release: the client's key comes back to the
            # name with a later job and finds its own lease, live or past
            # its expiry (which others counted free: it must not count).
            self.soak.count("group_leases_left")
            return
        if held:
            self.release(lock, lease["lid"])

    def stall(self, lock, lease, ttl, kind=None):
        """A stalled job: no refresh for ttl + STALL_EXTRA_S while a waiter
        asks for the lock, then carry on with the old lease_id.  On a
        shared lock the waiter is a writer (mode=exclusive), which only
        the stalled lease's end lets in; on a semaphore it asks with the
        semaphore's limit."""
        self.soak.count("stalls")
        if kind:
            self.soak.count("group_stalls")
        wkind = kind
        if kind and kind.get("mode") == "shared":
            wkind = {"mode": "exclusive"}
        n = self.soak.count("stall_waiters")
        w = Client(self.soak, "%s-sw%d" % (self.cid, n), self.soak.tokens[-1],
                   random.Random(self.rng.random()))
        self.soak.extra_clients.append(w)

        def wait_then_release():
            got = w.acquire(lock, ttl, ttl + 3, w.new_key(), ttl + 5,
                            kind=wkind)
            if got is not None:
                w.release(lock, got["lid"])
        t = threading.Thread(target=wait_then_release, daemon=True)
        t.start()
        time.sleep(ttl + STALL_EXTRA_S)
        r = self.refresh(lock, lease["lid"], ttl)
        if r["st"] in (404, 409):
            self.soak.count("stalls_told_lost")
        elif r["st"] == 200:
            self.soak.count("stalls_kept")   # nobody took over meanwhile
        self.release(lock, lease["lid"])
        t.join(CALL_TIMEOUT_S * 2 + ttl + 10)

    def run(self):
        while not self.soak.stopping.is_set():
            self.job()
        for c, _ in self.conns.values():
            c.close()


# ------------------------------------------------------------ the soak

class Soak:
    def __init__(self, args, scenario, seconds, seed, tmp):
        self.args, self.scenario, self.seconds = args, scenario, seconds
        self.rng = random.Random(seed)
        self.seed = seed
        self.tmp = tmp
        self.stopping = threading.Event()
        self.counts = {}
        self.count_lock = threading.Lock()
        self.servers = []
        self.fake = None
        self.problems = []
        self.extra_clients = []
        self.takeover_ms = []

    def count(self, what, n=1):
        with self.count_lock:
            self.counts[what] = self.counts.get(what, 0) + n
            return self.counts[what]

    def left(self):
        return self.deadline - now()

    def sleep(self, lo_hi):
        return self.stopping.wait(self.rng.uniform(*lo_hi))

    def setup(self):
        a = self.args
        secret = os.path.join(self.tmp, "secret")
        with open(secret, "w") as f:
            f.write(SECRET)
        env = dict(os.environ)
        env.update(LOCKGATE_JWT_SECRET_FILE=secret,
                   LOCKGATE_GCS_RETRY_TOTAL_MS=str(GCS_RETRY_TOTAL_MS),
                   ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:"
                                 "exitcode=87")
        for k in ("LOCKGATE_STORE", "LOCKGATE_LISTEN", "PORT",
                  "LOCKGATE_JWT_SECRET"):
            env.pop(k, None)
        if self.scenario == "gs":
            self.fake = FakeGcs(a.fake, self.tmp)
            env["STORAGE_EMULATOR_HOST"] = "127.0.0.1:%d" % self.fake.port
            store, n = "gs://lockgate-soak/locks/", 3
        else:
            store = "file://" + os.path.join(self.tmp, "data")
            n = 2
        for k in range(n):
            s = Server("%s%d" % (self.scenario, k), a.bin, store, env,
                       self.tmp)
            s.start()
            self.servers.append(s)
        self.tokens = [mint_token(a.bin, secret, "soak-c%02d" % k)
                       for k in range(a.clients + 2)]

    # Faults on the fake, one at a time, all along.
    def faults(self):
        kinds = [k for k, w in FAULT_KINDS for _ in range(w)]
        while not self.sleep(FAULT_EVERY_S):
            kind = self.rng.choice(kinds)
            op = self.rng.choice(FAULT_OPS)
            q = "op=%s&kind=%s&count=1" % (op, kind)
            if kind == "latency":
                q += "&ms=%d" % self.rng.randint(*LATENCY_MS)
            try:
                st, _ = self.fake.control("fault?" + q)
            except OSError:
                continue
            if st == 200:
                self.count("fault_" + kind)

    def chaos(self):
        while not self.sleep(KILL_EVERY_S):
            s = self.rng.choice(self.servers)
            s.kill9()
            self.count("kills")
            self.sleep(KILL_DOWN_S)   # restarted even when stopping
            try:
                s.start()
            except RuntimeError as ex:
                self.problems.append(str(ex))
                return

    def stalls(self):
        hot = [c for c in self.clients if c.hot]
        while not self.sleep(STALL_EVERY_S):
            self.rng.choice(hot).stall_next = True

    # Crashed jobs: a holder stops refreshing, a waiter must get the lock.
    def crashes(self, pair):
        holder = Client(self, "crasher%d" % pair, self.tokens[-2],
                        random.Random(self.seed + 7 + pair))
        waiter = Client(self, "waiter%d" % pair, self.tokens[-1],
                        random.Random(self.seed + 107 + pair))
        self.extra_clients += [holder, waiter]
        n = 0
        while not self.sleep(CRASH_EVERY_S):
            if self.left() < CRASH_TTL + 4:
                continue   # one would outlast the run
            n += 1
            lock = "crash/%d/%d" % (pair, n)
            lease = holder.acquire(lock, CRASH_TTL, 0, holder.new_key(), 5)
            if lease is None:
                continue
            r = holder.refresh(lock, lease["lid"], CRASH_TTL)
            if r["st"] != 200:
                holder.release(lock, lease["lid"])
                continue
            holder.hist.append({"c": holder.cid, "op": "crash",
                                "lock": lock, "lid": lease["lid"],
                                "i": now()})
            self.count("crashes")
            t0 = r["e"]
            got = waiter.acquire(lock, CRASH_TTL, CRASH_TTL + 5,
                                 waiter.new_key(), CRASH_TTL + 8)
            if got is not None:
                lat = got["e"] - (t0 + CRASH_TTL)
                self.count("takeovers")
                with self.count_lock:
                    self.takeover_ms.append(int(lat * 1000))
                waiter.release(lock, got["lid"])

    def run(self):
        self.setup()
        self.clients = [Client(self, "c%02d" % k, self.tokens[k],
                               random.Random(self.seed * 1000 + k))
                        for k in range(self.args.clients)]
        for c in self.clients[:max(1, int(len(self.clients) *
                                       HOT_CLIENTS))]:
            c.hot = True
        threads = [threading.Thread(target=c.run, daemon=True)
                   for c in self.clients]
        helpers = [threading.Thread(target=self.stalls, daemon=True),
                   ] + [threading.Thread(target=self.crashes, args=(k,),
                                         daemon=True)
                        for k in range(CRASH_PAIRS)]
        if self.fake and not self.args.no_faults:
            helpers.append(threading.Thread(target=self.faults, daemon=True))
        if not self.args.no_kills:
            helpers.append(threading.Thread(target=self.chaos, daemon=True))
        t0 = now()
        self.deadline = t0 + self.seconds
        for t in threads + helpers:
            t.start()
        self.stopping.wait(self.seconds)
        self.stopping.set()
        for t in helpers + threads:
            t.join(max(1.0, t0 + self.seconds + 60 - now()))
        stuck = sum(t.is_alive() for t in helpers + threads)
        if stuck:
            self.problems.append("%d threads still running after the "
                                 "deadline" % stuck)
        for s in self.servers:
            if not s.up:
                s.start()
        if self.fake:
            self.fake.control("clear-faults")
        self.elapsed = now() - t0
        self.final_inspect()
        self.teardown()
        return self.judge()

    def final_inspect(self):
        c = Client(self, "final", self.tokens[0], random.Random(self.seed))
        locks = sorted({lk for cl in self.all_clients()
                        for lk in cl.hist.locks})
        for lock in locks:
            c.call("inspect", lock, {})
        self.final = c

    def all_clients(self):
        extra = list(self.extra_clients)
        final = [self.final] if hasattr(self, "final") else []
        return self.clients + extra + final

    def teardown(self):
        for s in self.servers:
            st = s.stop()
            if st != 0:
                self.problems.append("%s exited %s on SIGTERM" % (s.name, st))
        if self.fake:
            try:
                _, body = self.fake.control("stats")
                self.fake_stats = json.loads(body)
            except (OSError, ValueError):
                self.fake_stats = {}
            self.fake.stop()
        for s in self.servers:
            for log in s.logs:
                with open(log, errors="replace") as f:
                    text = f.read()
                if SANITIZER_RE.search(text):
                    self.problems.append("sanitizer report in %s" % log)
                    m = SANITIZER_RE.search(text)
                    print(text[max(0, m.start() - 200):m.start() + 3000],
                          file=sys.stderr)

    def judge(self):
        path = os.path.join(self.tmp, "history-%s.jsonl" % self.scenario)
        with open(path, "w") as f:
            f.write(json.dumps({"meta": {"store": self.scenario,
                                         "seed": self.seed,
                                         "seconds": self.seconds}}) + "\n")
            for cl in self.all_clients():
                cl.hist.close()
                with open(cl.hist.path, encoding="utf-8") as h:
                    shutil.copyfileobj(h, f)
                os.unlink(cl.hist.path)
        self.history = path
        print("== %s: checker on %s" % (self.scenario, path))
        sys.stdout.flush()
        bound = self.args.takeover_slack
        if self.fake and not self.args.no_faults:
            bound += FAULT_TAKEOVER_ALLOWANCE_S
        print("== %s: a crashed job's waiter must hold the lock by TTL + "
              "%.1f s" % (self.scenario, bound))
        slack = ["--takeover-slack", str(bound)]
        sfile = os.path.join(self.tmp, "summary-%s.json" % self.scenario)
        rc = check_history.main(slack + ["--summary", sfile, path])
        try:
            with open(sfile, encoding="utf-8") as f:
                self.summary = json.load(f)
        except (OSError, ValueError):
            self.summary = {"grants": 0, "violations": -1}
        return rc

    def report(self):
        g = self.summary.get("grants", 0)
        c = self.counts
        faults = {k[6:]: v for k, v in sorted(c.items())
                  if k.startswith("fault_")}
        print("soak %s: %d grants in %.1f s = %.0f grants/s, %d requests, "
              "%d violations" % (self.scenario, g, self.elapsed,
                                 g / self.elapsed if self.elapsed else 0,
                                 self.summary.get("requests", 0),
                                 self.summary.get("violations", -1)))
        print("soak %s: faults injected %s (%d); kill -9 %d; stalls %d "
              "(told lease_lost %d, kept %d); crashed holders %d, taken "
              "over %d, worst %s ms after TTL" % (
                  self.scenario,
                  " ".join("%s=%d" % kv for kv in faults.items()) or "none",
                  sum(faults.values()), c.get("kills", 0),
                  c.get("stalls", 0), c.get("stalls_told_lost", 0),
                  c.get("stalls_kept", 0), c.get("crashes", 0),
                  c.get("takeovers", 0),
                  max(self.takeover_ms) if self.takeover_ms else "-"))
        st = self.summary.get("stats", {})
        print("soak %s: group locks: %d grants (%s); most valid at once "
              "%s; limit_mismatch %d; stalls on them %d; left unreleased "
              "%d; holders shown of pending leases %d" % (
                  self.scenario, self.summary.get("group_grants", 0),
                  " ".join("%s=%d" % (k[13:], v) for k, v in sorted(
                      st.items()) if k.startswith("group_grants_"))
                  or "none",
                  " ".join("%s=%d" % (k[11:], v) for k, v in sorted(
                      st.items()) if k.startswith("peak_valid_")) or "-",
                  c.get("limit_mismatch", 0),
                  c.get("group_stalls", 0), c.get("group_leases_left", 0),
                  st.get("holders_explained_by_pending", 0)))
        if self.takeover_ms:
            t = sorted(self.takeover_ms)
            print("soak %s: takeover after TTL (ms, from the last refresh's "
                  "answer): min %d median %d p90 %d max %d" % (
                      self.scenario, t[0], t[len(t) // 2],
                      t[int(len(t) * 0.9)], t[-1]))
        seen = {k: v for k, v in sorted(c.items())
                if k.startswith("acquire_")}
        print("soak %s: acquire retries after %s; no-answer requests %d; "
              "storage ops %s" % (
                  self.scenario,
                  " ".join("%s=%d" % (k[8:], v) for k, v in seen.items())
                  or "none",
                  self.summary.get("stats", {}).get("no_answer", 0),
                  json.dumps(getattr(self, "fake_stats", {}).get("ops"))
                  if self.fake else "(file)"))
        for p in self.problems:
            print("soak %s: PROBLEM: %s" % (self.scenario, p))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", choices=("gs", "file", "both"),
                    default="both")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=60)
    ap.add_argument("--bin", default="build/asan/lockgate")
    ap.add_argument("--fake", default="build/tools/fake_gcs")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--min-grants", type=int, default=0,
                    help="fail when all scenarios together grant fewer")
    ap.add_argument("--takeover-slack", type=float,
                    default=check_history.TAKEOVER_SLACK_S,
                    help="s past TTL a crashed job's waiter may wait "
                         "(default %(default)s, issue 24)")
    ap.add_argument("--no-faults", action="store_true",
                    help="gs: no storage faults (to tell causes apart)")
    ap.add_argument("--no-kills", action="store_true",
                    help="no kill -9 of instances")
    ap.add_argument("--keep", help="copy histories and logs to this dir")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(
        1 << 30)
    print("soak: seed %d (--seed %d repeats the schedule, not the timing)"
          % (seed, seed))
    plan = ([("gs", a.seconds)] if a.scenario == "gs" else
            [("file", a.seconds)] if a.scenario == "file" else
            [("gs", a.seconds * 0.6), ("file", a.seconds * 0.4)])
    total_grants, total_s, failed = 0, 0.0, False
    for k, (scen, secs) in enumerate(plan):
        tmp = tempfile.mkdtemp(prefix="lockgate-soak-%s." % scen)
        s = Soak(a, scen, secs, seed + k, tmp)
        try:
            rc = s.run()
        finally:
            s.stopping.set()
            for srv in s.servers:
                if srv.proc is not None and srv.proc.poll() is None:
                    srv.proc.kill()
                    srv.proc.wait()
            if s.fake:
                s.fake.stop()
        s.report()
        failed |= rc != 0 or bool(s.problems)
        total_grants += s.summary.get("grants", 0)
        total_s += s.elapsed
        if a.keep:
            dst = os.path.join(a.keep, os.path.basename(tmp))
            shutil.copytree(tmp, dst, ignore=shutil.ignore_patterns(
                "data", "secret"))
            print("soak %s: kept in %s" % (scen, dst))
        if rc != 0 or s.problems:
            # The evidence: history, summary and every server's log.
            print("soak %s: FAILED; history and logs kept in %s" % (scen,
                                                                   tmp))
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("soak: %d grants in %.1f s = %.0f grants/s, %s" % (
        total_grants, total_s, total_grants / total_s if total_s else 0,
        "FAILED" if failed else "clean"))
    if total_grants < a.min_grants:
        print("soak: FAIL: %d grants, fewer than --min-grants %d" % (
            total_grants, a.min_grants))
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
