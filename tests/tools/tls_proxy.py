#!/usr/bin/env python3
"""tls_proxy.py: a TLS front for a plain-HTTP test server, for tests only.

Listens on 127.0.0.1 (PORT, else a port the kernel picks; printed on the
first line of stdout either way), terminates TLS with the given
certificate and key, and pipes the bytes of each connection to and from
TARGET (host:port) unchanged, so that a client speaks HTTPS to the fake
GCS.  Each connection is served
by a thread; a connection ends when either side closes it or is idle for
IDLE seconds.  Python's standard library only.

usage: tls_proxy.py --cert CERT --key KEY --target HOST:PORT [--port PORT]
"""
import argparse
import select
import socket
import ssl
import sys
import threading

IDLE = 30  # seconds a connection may sit with nothing to pipe


def pipe(client, target_addr):
    try:
        upstream = socket.create_connection(target_addr, timeout=5)
    except OSError:
        client.close()
        return
    try:
        while True:
            # TLS may hold decrypted bytes that select cannot see.
            if client.pending() == 0:
                ready, _, _ = select.select([client, upstream], [], [], IDLE)
                if not ready:
                    return
            else:
                ready = [client]
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (upstream if s is client else client).sendall(data)
    except (OSError, ssl.SSLError):
        return
    finally:
        upstream.close()
        client.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    target = (host, int(port))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.set_alpn_protocols(["http/1.1"])
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(128)
    print(ls.getsockname()[1], flush=True)
    while True:
        raw, _ = ls.accept()
        try:
            raw.settimeout(5)
            conn = ctx.wrap_socket(raw, server_side=True)
            conn.settimeout(None)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        threading.Thread(target=pipe, args=(conn, target), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
