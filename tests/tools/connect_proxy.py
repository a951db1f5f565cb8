#!/usr/bin/env python3
"""connect_proxy.py: an HTTP CONNECT proxy on loopback, for tests only.

Listens on 127.0.0.1 (a port the kernel picks, printed on the first line
of stdout).  Each connection must start with "CONNECT host:port HTTP/1.1"
and its header block; the proxy appends "CONNECT host:port" to LOG,
connects there (loopback targets only: anything else is answered 403),
answers "200 Connection established" and pipes bytes both ways until
either side closes or IDLE seconds pass with nothing to pipe.  Any other
method is answered 405.  A thread per connection.  Python's standard
library only.

usage: connect_proxy.py --log LOG
"""
import argparse
import select
import socket
import sys
import threading

IDLE = 30        # seconds a tunnel may sit with nothing to pipe
HEAD_MAX = 8192  # bytes of a request head


def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > HEAD_MAX:
            return None
        d = c.recv(1024)
        if not d:
            return None
        buf += d
    return buf


def serve(c, log, lock):
    up = None
    try:
        c.settimeout(10)
        head = read_head(c)
        if head is None:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) != 3 or line[0] != "CONNECT":
            c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n"
                      b"Content-Length: 0\r\n\r\n")
            return
        host, _, port = line[1].rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit():
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with lock:
            with open(log, "a") as f:
                f.write("CONNECT %s\n" % line[1])
        try:
            up = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\n"
                      b"Content-Length: 0\r\n\r\n")
            return
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            up.sendall(rest)
        c.settimeout(None)
        up.settimeout(None)
        while True:
            ready, _, _ = select.select([c, up], [], [], IDLE)
            if not ready:
                return
            for s in ready:
                d = s.recv(65536)
                if not d:
                    return
                (up if s is c else c).sendall(d)
    except OSError:
        return
    finally:
        if up is not None:
            up.close()
        c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    a = p.parse_args()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    print(ls.getsockname()[1], flush=True)
    lock = threading.Lock()
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, a.log, lock),
                         daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
