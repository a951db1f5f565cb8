#!/usr/bin/env python3
"""bench/conns.py PID PORT OUT: the most TCP connections PID holds at once,
established to 127.0.0.1:PORT, sampled every 0.1 s until SIGTERM; the
first count and then the highest is written to OUT each time it grows (so
OUT, once there, is always current).  The bench's storage is on 127.0.0.1,
so only IPv4 is read.

A sample costs: reading /proc/net/tcp walks every bucket of the kernel's
TCP table (262,144 on this VM, 4 ms), on one of the two CPUs the measured
programs share.  So bench/run.sh samples in a run of its own, whose p50 it
does not keep (docs/bench.md: beside lockgate alone it had cost 0.4 ms of
gs20h2's 64-client p50 at one sample a second, 1.4 ms at ten with ss -p).
"""
import os
import signal
import sys
import time

ESTABLISHED = "01"
INTERVAL_S = 0.1


def socket_inodes(pid):
    inodes = set()
    try:
        for e in os.scandir("/proc/%d/fd" % pid):
            try:
                link = os.readlink(e.path)
            except OSError:
                continue  # closed since the listing
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        pass  # PID is gone: it holds nothing
    return inodes


def count(pid, port):
    mine = socket_inodes(pid)
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)  # the header
        for line in f:
            w = line.split()
            # w[2]: the remote ADDR:PORT in hex, w[3]: the state, w[9]: inode
            if (w[3] == ESTABLISHED and w[9] in mine and
                    int(w[2].rsplit(":", 1)[1], 16) == port):
                n += 1
    return n


def write(out, n):
    """Replace OUT whole, so a SIGTERM never leaves it half written."""
    with open(out + ".new", "w") as f:
        f.write("%d\n" % n)
    os.replace(out + ".new", out)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: conns.py PID PORT OUT")
    pid, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    peak = -1  # so the first sample is written, whatever it counts
    while True:
        n = count(pid, port)
        if n > peak:
            peak = n
            write(out, peak)
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    main()
