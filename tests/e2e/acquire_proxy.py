#!/usr/bin/env python3
"""acquire_proxy.py MODE UPSTREAM ...: between a client and lockgate
(UPSTREAM), a proxy that meddles with the client's acquires, and hands
everything else on.  Each request's line goes to stdout; "port N" first.
It stops by itself after 60 s.

  late UPSTREAM LOCK HOLDER_AUTH HOLDER_LEASE: an acquire whose grant
    lands after the client stopped waiting for it.  The first acquire is
    answered 503 (Retry-After: 1) and kept back.  When an acquire has been
    answered 409 by lockgate, the proxy releases the holder's lease
    HOLDER_LEASE of LOCK (Authorization value HOLDER_AUTH), then hands the
    kept-back acquire on ("late first acquire: STATUS" on stdout), and
    only then answers the client's 409.
  outage UPSTREAM N: the first N acquires are answered 503 (Retry-After:
    1), and do not reach lockgate; the later ones do.
  empty UPSTREAM: every acquire is answered 200 with an empty body, as a
    server that is not lockgate may answer.
"""
import http.server, sys, threading, urllib.request, urllib.error

MODE, UP = sys.argv[1:3]
LOCK, XAUTH, XLEASE = (sys.argv[3:6] + ["", "", ""])[:3]
held = []  # late: the first acquire, kept back
refused = [int(sys.argv[3]) if MODE == "outage" else 0]  # outage: left


def forward(method, path, headers):
    req = urllib.request.Request(UP + path, method=method, data=b"")
    for k, v in headers:
        if k.lower() in ("authorization", "accept", "user-agent"):
            req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, list(r.getheaders()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, list(e.headers.items()), e.read()


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        acquire = ":acquire?" in self.path
        print("%s %s" % (self.command, self.path), flush=True)
        if acquire and MODE == "outage" and refused[0] > 0:
            refused[0] -= 1
            self.answer(503, [("Retry-After", "1")], b"")
            return
        if acquire and MODE == "empty":
            self.answer(200, [("Content-Type", "text/plain")], b"")
            return
        if MODE != "late":
            self.answer(*forward("POST", self.path, self.headers.items()))
            return
        if acquire and not held:
            held.append((self.path, list(self.headers.items())))
            self.answer(503, [("Retry-After", "1")], b"")
            return
        st, hdrs, body = forward("POST", self.path, self.headers.items())
        if acquire and st == 409 and len(held) == 1:
            forward("POST", "/v1/locks/%s:release?lease_id=%s" % (LOCK, XLEASE),
                    [("Authorization", XAUTH)])
            late = forward("POST", held[0][0], held[0][1])
            print("late first acquire: %d" % late[0], flush=True)
            held.append(late)
        self.answer(st, hdrs, body)

    def answer(self, st, hdrs, body):
        self.send_response(st)
        for k, v in hdrs:
            if k.lower() in ("content-type", "retry-after"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("port %d" % s.server_address[1], flush=True)
threading.Timer(60, s.shutdown).start()  # bounded, whatever happens
s.serve_forever()
