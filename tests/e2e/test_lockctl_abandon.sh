#!/bin/sh
# lockctl gives back what an attempt of unknown outcome may have left when
# it gives up.  A proxy between lockctl and lockgate answers lockctl's
# first acquire 503 and keeps it back; when the second (the retry, same
# key) has been answered 409 by lockgate, the proxy releases the holder's
# lease and only then hands the first acquire on, which lockgate grants
# (as a write held by a slow storage lands after the client stopped
# waiting).  lockctl, told 409 with no time left, exits 73, and on its
# way out asks with its key once more (it finds that lease, its own) and
# releases it: the lock is free.  Before, the lease held the lock until
# its TTL with nobody knowing of it.
set -u
. tests/e2e/lib.sh

LC="dash $PWD/client/lockctl"
T=$LG_TMP/abandon
mkdir "$T" "$T/tmp"
export TMPDIR="$T/tmp"
lg_start
XT="Bearer $(lg_token xavier)"
X="Authorization: $XT"
lg_curl -o "$T/x.body" -X POST -H "$X" "$LG_URL/v1/locks/ab/one:acquire?ttl=60"
XL=$(lg_json lease_id <"$T/x.body")
[ -n "$XL" ] || lg_fail "xavier holds ab/one: $(cat "$T/x.body")"

cat >"$T/proxy.py" <<'PY'
import http.server, sys, threading, urllib.request, urllib.error

UP, XAUTH, XLEASE = sys.argv[1], sys.argv[2], sys.argv[3]
held = []  # the first acquire, kept back


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
        if acquire and not held:
            held.append((self.path, list(self.headers.items())))
            self.answer(503, [("Retry-After", "1")], b"")
            return
        st, hdrs, body = forward("POST", self.path, self.headers.items())
        if acquire and st == 409 and len(held) == 1:
            forward("POST", "/v1/locks/ab/one:release?lease_id=" + XLEASE,
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
PY
python3 -u "$T/proxy.py" "$LG_URL" "$XT" "$XL" >"$T/proxy.log" 2>&1 &
px=$!
LG_PIDS="$LG_PIDS $px"
i=0
port=
while [ -z "$port" ] && [ $i -lt 100 ] && kill -0 $px 2>/dev/null; do
	sleep 0.1
	port=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$T/proxy.log")
	i=$((i + 1))
done
[ -n "$port" ] || lg_fail "the proxy did not start: $(cat "$T/proxy.log")"

LOCKGATE_URL="http://127.0.0.1:$port" LOCKGATE_TOKEN=$(lg_token alice) \
    $LC acquire ab/one --wait 0 --lease-id abandon-key-1 \
    >"$T/out" 2>"$T/err"
rc=$?
lg_eq "$rc" 73 "lockctl told 409 after a 503 ($(cat "$T/err"))"
grep -q "late first acquire: 200" "$T/proxy.log" ||
    lg_fail "the kept-back acquire was not granted: $(cat "$T/proxy.log")"
n=$(grep -c "acquire?lease_id=abandon-key-1" "$T/proxy.log")
lg_eq "$n" 3 "acquires with lockctl's key (2 and the give-back's): $(cat "$T/proxy.log")"
grep -q ":release?lease_id=" "$T/proxy.log" ||
    lg_fail "lockctl did not release what its key found: $(cat "$T/proxy.log")"
code=$(lg_curl -o "$T/st.body" -w '%{http_code}' -H "$X" "$LG_URL/v1/locks/ab/one")
lg_eq "$code" 404 "ab/one is free, no lease left behind ($(cat "$T/st.body"))"
kill "$px"
lg_wait_exit "$px" 5 "the proxy"
lg_stop
echo ok
