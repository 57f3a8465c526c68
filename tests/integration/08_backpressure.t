#!/usr/bin/env python3
# Backpressure: clients that request a 1 GiB file and read nothing must not
# make the server buffer the file (RSS stays small at --partition 64k) nor
# block other clients; closing them releases their connections, jobs and fds.
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (ASAN, SLOW, KiB, MiB, Conn, Server, diag, is_, ok,  # noqa: E402
                     run)

HUGE = 1024 * MiB
RSS_LIMIT_KIB = 64 * 1024


def poll(pred, timeout):
    """Call pred until it returns true or timeout*SLOW seconds pass (a hang guard)."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def small_get(srv):
    t0 = time.monotonic()
    resp = srv.get("/small.txt")
    return resp, time.monotonic() - t0


def test_stalled(srv):
    resp, _ = small_get(srv)
    is_(resp.status, 200, "warm-up GET")
    base_rss = srv.rss_kib()
    base_fds = srv.fd_count()

    stalled = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(3)]
    for c in stalled:
        c.request("GET", "/huge.bin")
    time.sleep(0.5)

    latencies = []
    for i in range(5):
        resp, secs = small_get(srv)
        latencies.append(secs)
        ok(resp.status == 200 and resp.body == b"small",
           "GET /small.txt %d while 3 clients stall on 1 GiB" % (i + 1), repr(resp))
    diag("small-file latency while stalled: %s ms"
         % ", ".join("%.1f" % (s * 1000) for s in latencies))
    ok(max(latencies) < 5 * SLOW, "small GETs answered within the %d s sanity bound" % (5 * SLOW),
       "latencies %r" % latencies)

    samples = []
    for _ in range(6):
        samples.append(srv.rss_kib())
        time.sleep(0.35)
    diag("RSS baseline %d KiB, while stalled %s KiB; fds %d -> %d"
         % (base_rss, samples, base_fds, srv.fd_count()))
    if ASAN:
        grew = max(samples) - base_rss
        ok(grew < RSS_LIMIT_KIB, "RSS grows by less than 64 MiB while stalled (sanitizer build)",
           "grew by %d KiB" % grew)
    else:
        ok(max(samples) < RSS_LIMIT_KIB, "RSS stays under 64 MiB while stalled",
           "max %d KiB" % max(samples))

    first = stalled[0]
    head = first.read_head()
    is_(head[1], 200, "a stalled client gets 200 once it reads")
    lengths = [v for k, v in head[3] if k.lower() == "content-length"]
    is_(lengths, [str(HUGE)], "Content-Length of the 1 GiB file")
    chunk = first.read_exact(256 * KiB)
    ok(chunk == bytes(len(chunk)), "its first 256 KiB are the sparse file's zeros")

    for c in stalled:
        c.close()
    active = poll(lambda: srv.stats()["connections"]["active"] == 1, 10)
    ok(active, "after the stalled clients close, only the stats connection is active",
       repr(srv.stats()["connections"]))
    idle = poll(lambda: srv.stats()["jobs"]["read"]["in_flight"] == 0, 10)
    ok(idle, "no read job stays in flight", repr(srv.stats()["jobs"]["read"]))
    fds = poll(lambda: srv.fd_count() <= base_fds, 10)
    ok(fds, "file descriptors back to the baseline (%d)" % base_fds, "now %d" % srv.fd_count())
    resp, _ = small_get(srv)
    is_((resp.status, resp.body), (200, b"small"), "server still answers")


def test_aborted(srv):
    base_fds = srv.fd_count()
    for i in range(20):
        with Conn(srv.port) as c:
            c.request("GET", "/huge.bin")
            if i % 2:
                c.read_exact(64 * KiB + i)  # part of the body, then go
    for i in range(10):
        # Pipelined requests behind a huge one, then gone.
        with Conn(srv.port) as c:
            c.send(b"GET /huge.bin HTTP/1.1\r\nHost: a\r\n\r\n" * 3 +
                   b"GET /small.txt HTTP/1.1\r\nHost: a\r\n\r\n")
    fds = poll(lambda: srv.fd_count() <= base_fds, 10)
    ok(fds, "30 aborted downloads leave no file descriptor behind",
       "fds %d, baseline %d" % (srv.fd_count(), base_fds))
    active = poll(lambda: srv.stats()["connections"]["active"] == 1, 10)
    ok(active, "and no connection", repr(srv.stats()["connections"]))
    resp, _ = small_get(srv)
    is_((resp.status, resp.body), (200, b"small"), "server still answers after aborts")


def main():
    srv = Server(files={"small.txt": b"small"},
                 args=["--partition", "64k", "--threads", "2"])
    srv.sparse_file("huge.bin", HUGE)
    with srv:
        test_stalled(srv)
        test_aborted(srv)


run(main)
