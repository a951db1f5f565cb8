#!/usr/bin/env python3
"""fake_oidc.py: the GitHub runner's OIDC token endpoint, on loopback.

  fake_oidc.py FAKE_JWKS KEYDIR KID REQUEST_TOKEN CLAIMS_JSON LOGDIR

Serves GET /token?...&audience=AUD on 127.0.0.1 and a free port (written,
with a newline, to LOGDIR/port).  A request whose Authorization is not
"bearer REQUEST_TOKEN" gets 401, as the runner's does.  Otherwise the answer
is {"value": JWT}: CLAIMS_JSON (an object's members, without braces) plus
"aud": AUD and fresh iat, nbf, exp, signed by `FAKE_JWKS sign KEYDIR KID`
(tests/tools/fake_jwks.c), so lockgate verifies it against that JWKS.
Appends "audience AUD" to LOGDIR/requests and each token it issued to
LOGDIR/tokens (the test checks that none of them shows in any output).
Stops on SIGTERM.
"""
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

fj, keydir, kid, reqtok, claims, logdir = sys.argv[1:7]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path != "/token":
            return self.answer(404, {"message": "not found"})
        if self.headers.get("Authorization") != "bearer " + reqtok:
            return self.answer(401, {"message": "bad request token"})
        aud = parse_qs(u.query).get("audience", [""])[0]
        with open(os.path.join(logdir, "requests"), "a") as f:
            f.write("audience %s\n" % aud)
        now = int(time.time())
        payload = "{%s,\"aud\":%s,\"iat\":%d,\"nbf\":%d,\"exp\":%d}" % (
            claims, json.dumps(aud), now, now - 300, now + 900)
        tok = subprocess.run([fj, "sign", keydir, kid, payload],
                             capture_output=True, text=True, check=True,
                             timeout=10).stdout.strip()
        with open(os.path.join(logdir, "tokens"), "a") as f:
            f.write(tok + "\n")
        self.answer(200, {"count": 1, "value": tok})


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
with open(os.path.join(logdir, "port.tmp"), "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(os.path.join(logdir, "port.tmp"), os.path.join(logdir, "port"))
srv.serve_forever()
