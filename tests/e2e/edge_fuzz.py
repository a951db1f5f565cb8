"""Hostile requests, mutated at random from valid ones, each on a fresh
loopback connection to a running lockgate: no input a caller can send may
crash the server, get a 500 (API_INTERNAL: a bug, never input) or leave it
unable to serve.

Usage: edge_fuzz.py HOST:PORT TOKEN SECONDS SEED
Each exchange sends its bytes, half-closes, and reads until the server
closes, goes quiet after a whole answer, or EXCHANGE_S pass.  Checked: what comes back is empty (closed
unanswered) or starts with an HTTP/1.x answer, and no answer read is a
500; every HEALTH_EVERY_S, and at the end, /healthz answers 200 on a new
connection.  WORKERS exchanges run at once, each worker's inputs drawn
from a generator seeded from SEED; a failure prints SEED and the input.  Leaks and sanitizer reports are the caller's to
check, when the server exits (lg_stop).
"""
import random
import re
import socket
import sys
import threading
import time

HOST, PORT = sys.argv[1].rsplit(":", 1)
TOKEN = sys.argv[2].encode()
SECONDS = float(sys.argv[3])
SEED = int(sys.argv[4])
EXCHANGE_S = 0.5   # one exchange's bound
QUIET_S = 0.05     # no more bytes after a whole answer: the exchange ends
HEALTH_EVERY_S = 1.0  # /healthz is asked this often, on its own connection
WORKERS = 8           # exchanges at once
MAX_LEN = 20000    # bytes of one input, at most

AUTH = b"Authorization: Bearer " + TOKEN


def req(line, *headers, body=b""):
    h = b"".join(x + b"\r\n" for x in (b"Host: x",) + headers)
    return line + b"\r\n" + h + b"\r\n" + body


BODY = b'{"ttl":30,"holder":"fz","purpose":"p","labels":{"a":"b"}}'
SEEDS = [
    req(b"GET /healthz HTTP/1.1"),
    req(b"GET /readyz HTTP/1.1"),
    req(b"GET /v1/whoami HTTP/1.1", AUTH),
    req(b"GET /metrics HTTP/1.1", AUTH),
    req(b"GET / HTTP/1.1"),
    req(b"GET /app.js HTTP/1.1", b"Accept-Encoding: gzip"),
    req(b"POST /v1/locks/fz/a:acquire?ttl=30&wait=0 HTTP/1.1", AUTH,
        b"Content-Type: application/json",
        b"Content-Length: %d" % len(BODY), body=BODY),
    req(b"POST /v1/locks/fz/b:acquire?limit=3&mode=shared HTTP/1.1", AUTH,
        b"Transfer-Encoding: chunked",
        body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)),
    req(b"POST /v1/locks/fz/a:refresh?lease_id=0123456789abcdef&ttl=60"
        b" HTTP/1.1", AUTH, b"Content-Length: 0"),
    req(b"POST /v1/locks/fz/a:release?lease_id=0123456789abcdef HTTP/1.1",
        AUTH, b"Content-Length: 0"),
    req(b"POST /v1/locks/fz/a:forceRelease HTTP/1.1", AUTH,
        b"Content-Length: 0"),
    req(b"GET /v1/locks?prefix=fz/&limit=5&page_token=abc HTTP/1.1", AUTH),
    req(b"GET /v1/locks/fz/a?format=env HTTP/1.1", AUTH),
    req(b"GET /v1/locks/fz/a:events?timeout=1 HTTP/1.1", AUTH,
        b"Accept: text/event-stream"),
    req(b"GET /healthz HTTP/1.1") + req(b"GET /v1/whoami HTTP/1.1", AUTH),
    b"GET /healthz HTTP/1.0\r\n\r\n",
]
TOKENS = [
    b"\r\n", b"\n", b"\r", b"\0", b" ", b"\t", b":", b";", b",", b"%00",
    b"%", b"%2F", b"%3A", b"?", b"&", b"=", b"/", b"//", b"../", b"\xff",
    b"\xc3\xa9", b"\xed\xa0\x80", b'"', b"\\", b"\\u0000", b"{", b"}", b"[",
    b"]", b"0", b"-1", b"99999999999999999999", b"chunked", b"identity",
    b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding : chunked\r\n",
    b"Content-Length: 5\r\n", b"Content-Length: -1\r\n", b"Host: y\r\n",
    b"Expect: 100-continue\r\n", b"Connection: close\r\n",
    b"Connection: keep-alive\r\n", b"Authorization: Bearer x\r\n", AUTH + b"\r\n",
    b"0\r\n\r\n", b"ffffffff\r\n", b"HTTP/1.0", b"HTTP/1.1", b"HEAD",
    b"POST", b":acquire", b":release", b"wait=1", b"ttl=0", b"lease_id=",
    b"format=env", b"limit=", b"mode=shared",
]


def mutate(rng, data):
    """DATA changed by one to four of: a byte changed, a token put in, a
    span cut, a line doubled or moved, a cut short, a splice of another
    seed, a long run."""
    for _ in range(rng.randint(1, 4)):
        n = len(data)
        k = rng.randrange(8)
        at = rng.randint(0, n)
        if k == 0 and n:
            i = rng.randrange(n)
            data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        elif k == 1:
            data = data[:at] + rng.choice(TOKENS) + data[at:]
        elif k == 2 and n:
            j = min(n, at + rng.randint(1, 32))
            data = data[:at] + data[j:]
        elif k in (3, 4):
            lines = data.split(b"\r\n")
            i = rng.randrange(len(lines))
            if k == 3:
                lines.insert(i, lines[i])
            else:
                lines.insert(rng.randrange(len(lines)), lines.pop(i))
            data = b"\r\n".join(lines)
        elif k == 5:
            data = data[:at]
        elif k == 6:
            other = rng.choice(SEEDS)
            data = data[:at] + other[rng.randint(0, len(other)):]
        else:
            data = data[:at] + rng.choice((b"a", b"/", b"%", b"0", b" ")) * rng.choice(
                (64, 1000, 5000, 9000)) + data[at:]
    return data[:MAX_LEN]


def exchange(data):
    """Send DATA, half-close, and read until the server closes, or has
    been quiet for QUIET_S after a whole answer, or EXCHANGE_S pass (a
    connection libmicrohttpd keeps open after the client's half-close
    would wait for its idle timeout): (the bytes read, whether the server
    closed)."""
    s = socket.create_connection((HOST, int(PORT)), timeout=EXCHANGE_S)
    got, closed = b"", False
    try:
        # The server may close before all is sent: that is an answer.
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        end = time.monotonic() + EXCHANGE_S
        while time.monotonic() < end:
            try:
                d = s.recv(65536)
            except socket.timeout:
                if statuses(got):
                    break
                continue
            if not d:
                closed = True
                break
            got += d
            s.settimeout(QUIET_S)
    except OSError:  # reset, or not connected any more
        closed = True
    finally:
        s.close()
    return got, closed


STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


def statuses(got):
    """The status of each answer in GOT that can be framed (by
    Content-Length, or a 1xx, 204 or 304 with no body); the rest, an
    answer to a HEAD or one cut short, is left unread."""
    out = []
    while got:
        m = STATUS.match(got)
        head, sep, rest = got.partition(b"\r\n\r\n")
        if not m or not sep:
            break
        code = int(m.group(1))
        out.append(code)
        n = re.search(rb"(?im)^content-length: *(\d+)\r?$", head)
        if n:
            rest = rest[int(n.group(1)):]
        elif not (100 <= code < 200 or code in (204, 304)):
            break
        got = rest
    return out


def healthy():
    got, _ = exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    return got.startswith(b"HTTP/1.1 200 ")


class Run:
    """What the workers found, under a lock."""
    def __init__(self):
        self.mu = threading.Lock()
        self.seen = {}
        self.n = self.closed = self.left = 0
        self.failure = None

    def failed(self, why, data, got):
        with self.mu:
            if self.failure is None:
                self.failure = "%s\n  input %r\n  answer %r" % (
                    why, data[:600], got[:600])


def worker(run, rng, end):
    """Exchanges of inputs drawn from RNG until END or a failure."""
    while time.monotonic() < end and run.failure is None:
        data = mutate(rng, rng.choice(SEEDS))
        try:
            got, closed = exchange(data)
        except OSError as e:
            run.failed("no connection (%s)" % e, data, b"")
            return
        codes = statuses(got)
        with run.mu:
            run.n += 1
            run.closed += not got and closed
            run.left += not got and not closed
            for code in codes:
                run.seen[code] = run.seen.get(code, 0) + 1
        if got and not STATUS.match(got):
            run.failed("not an HTTP/1.x answer", data, got)
        elif 500 in codes:
            run.failed("a 500", data, got)


def main():
    run = Run()
    end = time.monotonic() + SECONDS
    if not healthy():
        run.failed("not healthy before the first input", b"", b"")
    # Each worker draws from its own generator, seeded from SEED: the
    # inputs are reproducible, their interleaving is not.
    threads = [threading.Thread(target=worker, args=(
        run, random.Random(SEED * WORKERS + i), end))
        for i in range(WORKERS)]
    for t in threads:
        t.start()
    while time.monotonic() < end and run.failure is None:
        time.sleep(HEALTH_EVERY_S)
        if not healthy():
            run.failed("/healthz is not 200", b"", b"")
    for t in threads:
        t.join()
    if run.failure is None and not healthy():
        run.failed("/healthz is not 200 at the end", b"", b"")
    if run.failure is not None:
        print("FAIL seed %d: %s" % (SEED, run.failure))
        sys.exit(1)
    print("edge fuzz, seed %d: %d inputs in %.0f s; unanswered: %d closed,"
          " %d left open (%.1f s); statuses %s" %
          (SEED, run.n, SECONDS, run.closed, run.left, EXCHANGE_S,
           " ".join("%d:%d" % kv for kv in sorted(run.seen.items()))))


main()
