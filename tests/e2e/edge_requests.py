"""Raw HTTP/1.1 requests that a careful server reads one way only (issue 20,
items 1-4): whitespace before a header's colon, raw NUL bytes, routes
written with percent-encoding, too many query arguments; and (5) a request
line with a bare CR, a space or tab in the target or a method that is no
token, an HTTP/1.1 request with no Host or two, Transfer-Encoding in
HTTP/1.0.

Usage: edge_requests.py HOST:PORT TOKEN_A TOKEN_B
Each case sends its bytes on a fresh loopback connection and reads every
answer until the server closes (bounded by a timeout): a refused request
must get exactly one answer, a 400, and the connection closed after it.
Prints one line per case; exits 1 on the first failure.
"""
import json
import socket
import sys
import time

HOST, PORT = sys.argv[1].rsplit(":", 1)
TOKEN_A, TOKEN_B = sys.argv[2], sys.argv[3]
AUTH_A = b"Authorization: Bearer " + TOKEN_A.encode()
AUTH_B = b"Authorization: Bearer " + TOKEN_B.encode()
TIMEOUT = 5.0


def exchange(raw, until=0):
    """Send RAW; read until the server closes, or has given UNTIL answers
    when UNTIL > 0.  Returns (bytes read, whether the server closed)."""
    s = socket.create_connection((HOST, int(PORT)), timeout=TIMEOUT)
    s.sendall(raw)
    got, closed = b"", False
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            got += d
            if until and len(answers(got)) >= until:
                break
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return got, closed


def answers(got):
    """The status lines and bodies of every answer in GOT."""
    out = []
    while got.startswith(b"HTTP/1."):
        head, sep, rest = got.partition(b"\r\n\r\n")
        if not sep:
            break
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        out.append((int(head.split(b" ")[1]), rest[:n]))
        got = rest[n:]
    return out


class Failed(Exception):
    pass


FAILED = []


def fail(name, why, got):
    raise Failed("FAIL %s: %s: %r" % (name, why, got[:400]))


def case(fn):
    """Run every case, failed or not: the output lists each failure."""
    def run(name, *args, **kw):
        try:
            return fn(name, *args, **kw)
        except Failed as e:
            print(e)
            FAILED.append(name)
            return None
    return run


@case
def refused(name, raw, code=None):
    """RAW gets one 400 (error.code CODE when given) and the close."""
    got, closed = exchange(raw)
    a = answers(got)
    if len(a) != 1:
        fail(name, "%d answers, want exactly one" % len(a), got)
    status, body = a[0]
    if status != 400:
        fail(name, "status %d, want 400" % status, got)
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError):
        fail(name, "not a JSON error", got)
    if code is not None and err.get("code") != code:
        fail(name, "code %s, want %s" % (err.get("code"), code), got)
    if not closed:
        fail(name, "the connection was left open", got)
    print("ok %s: 400 %s, closed" % (name, err.get("code")))


@case
def served(name, raw, want, code=None, n=1):
    """RAW gets N answers, the last one WANT (error.code CODE)."""
    got, _ = exchange(raw, until=n)
    a = answers(got)
    if len(a) != n:
        fail(name, "%d answers, want %d" % (len(a), n), got)
    status, body = a[-1]
    if status != want:
        fail(name, "status %d, want %d" % (status, want), got)
    if code is not None and json.loads(body)["error"]["code"] != code:
        fail(name, "want code %s" % code, got)
    print("ok %s: %d" % (name, status))
    return body


def req(line, *headers, body=b""):
    h = b"".join(x + b"\r\n" for x in (b"Host: x",) + headers)
    return line + b"\r\n" + h + b"\r\n" + body


WHOAMI = req(b"GET /v1/whoami HTTP/1.1", AUTH_A)


def item1():
    # One POST read two ways: the chunk data held a second request.
    body = b"0\r\n\r\n" + WHOAMI
    refused("TE with a space before its colon, and a Content-Length",
            req(b"POST /v1/locks/x:acquire HTTP/1.1", AUTH_A,
                b"Content-Length: 5", b"Transfer-Encoding : chunked",
                body=body))
    refused("a second Authorization with a space before its colon",
            req(b"GET /v1/whoami HTTP/1.1", b"Authorization : Bearer " +
                TOKEN_B.encode(), AUTH_A))
    refused("a tab before the colon",
            req(b"GET /healthz HTTP/1.1", b"X-Trace\t: 1"))
    refused("a space before the colon of a harmless header",
            req(b"GET /healthz HTTP/1.1", b"Accept : */*"))
    refused("a space inside a header name",
            req(b"GET /healthz HTTP/1.1", b"X Trace: 1"))


def item2():
    refused("NUL in the path",
            req(b"GET /v1/locks/prod/a\0zz HTTP/1.1", AUTH_A))
    refused("NUL in the query",
            req(b"GET /v1/locks?prefix=prod\0&x=1 HTTP/1.1", AUTH_A))
    refused("NUL after the token",
            req(b"GET /v1/whoami HTTP/1.1", AUTH_A + b"\0garbage"))
    refused("NUL inside Transfer-Encoding",
            req(b"POST /v1/locks/x:acquire HTTP/1.1", AUTH_A,
                b"Transfer-Encoding: chunked\0gzip",
                body=b"0\r\n\r\n" + WHOAMI))
    refused("NUL in the method", req(b"GET\0X /healthz HTTP/1.1"))
    refused("NUL in a harmless header",
            req(b"GET /healthz HTTP/1.1", b"X-Trace: 1\0 2"))
    refused("NUL right after a colon",
            req(b"GET /healthz HTTP/1.1", b"X-Trace:\0 2"))
    refused("NUL in the last header",
            req(b"GET /healthz HTTP/1.1", b"X-Trace: 1", b"X-Last: 2\0"))
    refused("a bare CR in a header value",
            req(b"GET /healthz HTTP/1.1", b"X-Trace: 1\r2"))


def item3():
    served("an encoded ':' in a lock name is a name, not a verb",
           req(b"POST /v1/locks/prod/a%3Aacquire HTTP/1.1", AUTH_A,
               b"Content-Length: 0"), 400, "bad_name")
    served("an encoded '/' in a lock name",
           req(b"GET /v1/locks/prod%2Fa HTTP/1.1", AUTH_A), 400,
           "bad_name")
    served("/%6detrics is not /metrics",
           req(b"GET /%6detrics HTTP/1.1", AUTH_A), 404)
    served("/v1/%77hoami is not /v1/whoami",
           req(b"GET /v1/%77hoami HTTP/1.1", AUTH_A), 404)
    served("/%68ealthz is not /healthz", req(b"GET /%68ealthz HTTP/1.1"),
           404)


def item5():
    # The request line and Host read one way (RFC 9112, sections 3 and
    # 3.2), and Transfer-Encoding only where HTTP/1.1 defines it (6.1).
    refused("a bare CR in the request line: not a path holding two",
            b"GET /healthz HTTP/1.1\rHost: x\r\r" + WHOAMI, "bad_request")
    refused("a space inside the target",
            req(b"GET /v1/locks/prod/a b HTTP/1.1", AUTH_A), "bad_request")
    refused("a tab inside the target",
            req(b"GET /v1/locks/prod/a\tb HTTP/1.1", AUTH_A), "bad_request")
    refused("a method that is no token", req(b"G@T /healthz HTTP/1.1"),
            "bad_request")
    refused("HTTP/1.1 without Host",
            b"GET /healthz HTTP/1.1\r\n\r\n" + WHOAMI, "bad_request")
    refused("two Host headers",
            req(b"GET /healthz HTTP/1.1", b"Host: y") + WHOAMI,
            "duplicate_header")
    refused("Transfer-Encoding in HTTP/1.0",
            req(b"POST /v1/locks/prod/te10:acquire HTTP/1.0", AUTH_A,
                b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + WHOAMI),
            "bad_framing")


@case
def many_args(name, n):
    q = "&".join("a%d=1" % i for i in range(n)).encode()
    t0 = time.monotonic()
    got, closed = exchange(req(b"GET /v1/locks?" + q + b" HTTP/1.1", AUTH_A))
    a = answers(got)
    took = time.monotonic() - t0
    if took > 2 or not closed:
        fail(name, "not closed at once (%.1f s)" % took, got)
    if a and (a[0][0] != 400 or b"too_many_parameters" not in a[0][1]):
        fail(name, "want 400 too_many_parameters", got)
    if n == 65 and not a:
        fail(name, "no answer", got)
    print("ok %s: %s in %.2f s" % (name, "400" if a else "closed", took))


def item4():
    # Past what libmicrohttpd 0.9.75 can store: refused at once (a 400,
    # or the connection closed), never left to the idle timeout.
    for n in (65, 600, 3000):
        many_args("%d arguments" % n, n)


def still_served():
    """What clients do send is still read as before."""
    served("bare LF line ends", b"GET /healthz HTTP/1.1\nHost: x\n\n", 200)
    served("no space after a colon, and several",
           req(b"GET /healthz HTTP/1.1", b"X-A:1", b"X-B: \t 2"), 200)
    served("HTTP/1.0 without headers (no Host needed)",
           b"GET /healthz HTTP/1.0\r\n\r\n", 200)
    served("an empty Host", b"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", 200)
    served("two requests on one connection",
           req(b"GET /healthz HTTP/1.1") + WHOAMI, 200, n=2)
    served("a request after one with a body",
           req(b"POST /v1/locks/edge/body:acquire HTTP/1.1", AUTH_A,
               b"Content-Length: 11", body=b'{"ttl": 30}') + WHOAMI, 200,
           n=2)
    body = served("query values are still decoded",
                  req(b"POST /v1/locks/edge/dec:acquire?ttl=30&holder=a%20b+c"
                      b" HTTP/1.1", AUTH_A, b"Content-Length: 0"), 200)
    if body is not None and json.loads(body)["holder"] != "a b c":
        print("FAIL query values are still decoded: %r" % body)
        FAILED.append("decoded")
    served("the absolute form (RFC 9112, 3.2.2)",
           req(b"GET http://lock.example/healthz HTTP/1.1"), 200)
    served("the absolute form, its scheme in capitals, with a query",
           req(b"POST HTTPS://lock.example:443/v1/locks/edge/abs:acquire"
               b"?ttl=30 HTTP/1.1", AUTH_A, b"Content-Length: 0"), 200)
    served("the absolute form of a path that is no route",
           req(b"GET http://lock.example/%6detrics HTTP/1.1", AUTH_A), 404)
    for t in (b"http://h#/metrics", b"http://h\\/v1/whoami",
              b"http://u@h/v1/whoami", b"http:///v1/whoami",
              b"/v1/whoami#x", b"/v1\\whoami", b"http://[a/metrics?]/x",
              b"http://h]/metrics", b"http://:80/metrics",
              b"http://[::1]x/metrics", b"http://h:[/metrics"):
        refused("a target a parser in front may read otherwise: %r" % t,
                req(b"GET " + t + b" HTTP/1.1", AUTH_A), "bad_request")
    served("the absolute form: an IPv6 host and a port",
           req(b"GET http://[::1]:8080/healthz HTTP/1.1"), 200)
    served("the absolute form with no path is /",
           req(b"GET http://lock.example HTTP/1.1"), 200)
    served("a chunked body",
           req(b"POST /v1/locks/edge/chunk:acquire HTTP/1.1", AUTH_A,
               b"Transfer-Encoding: chunked", body=b"2\r\n{}\r\n0\r\n\r\n"),
           200)


ITEMS = {"1": item1, "2": item2, "3": item3, "4": item4, "5": item5,
         "ok": still_served}
for item in sys.argv[4:] or ["ok", "1", "2", "3", "4", "5"]:
    ITEMS[item]()
if FAILED:
    print("%d cases failed" % len(FAILED))
    sys.exit(1)
