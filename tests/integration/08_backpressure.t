#!/usr/bin/env python3
# Backpressure: clients that request a 1 GiB file and read nothing must not
# make the server buffer the file (RSS stays small at --partition 64k) nor
# hold the threadpool: small GETs, which with the file cache off open and
# read on that same pool (/stats shows their jobs), are still answered.
# Closing the stalled clients releases their connections, jobs and fds.
import time

from harness import SANITIZED, SLOW, KiB, MiB, Conn, Server, diag, is_, ok, poll, run

HUGE = 1024 * MiB
RSS_LIMIT_KIB = 64 * 1024


def jobs(srv):
    """(open, read) jobs submitted so far, by /stats."""
    st = srv.stats()["jobs"]
    return st["open"]["submitted"], st["read"]["submitted"]


def stalled(srv, opens):
    """A predicate for poll(): true once `opens` files were opened, no job
    is in flight and none was submitted since its previous call. Stalled
    responses get there: each holds both its slots, unsent, and asks the
    pool for nothing more."""
    last = [None]

    def quiet():
        st = srv.stats()["jobs"]
        now = (st["open"]["submitted"], st["read"]["submitted"])
        still = now == last[0] and st["open"]["in_flight"] == st["read"]["in_flight"] == 0
        last[0] = now
        return still and now[0] == opens
    return quiet


def test_stalled(srv):
    is_(srv.get("/small.txt").body, b"small", "warm-up GET")
    base_rss = srv.rss_kib()
    base_fds = srv.fd_count()

    opens = jobs(srv)[0]
    clients = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(3)]
    for c in clients:
        c.request("GET", "/huge.bin")
    ok(poll(stalled(srv, opens + 3), 10, interval=0.2),
       "3 clients stalled on 1 GiB: the pool goes quiet", repr(srv.stats()["jobs"]))

    before = jobs(srv)
    latencies = []
    for i in range(5):
        t0 = time.monotonic()
        resp = srv.get("/small.txt")
        latencies.append(time.monotonic() - t0)
        ok(resp.status == 200 and resp.body == b"small",
           "GET /small.txt %d while 3 clients stall on 1 GiB" % (i + 1), repr(resp))
    is_(tuple(b - a for a, b in zip(before, jobs(srv))), (5, 0),
        "the 5 small GETs went through the pool: 5 open jobs, which read the bodies")
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
    if SANITIZED:
        grew = max(samples) - base_rss
        ok(grew < RSS_LIMIT_KIB, "RSS grows by less than 64 MiB while stalled (sanitizer build)",
           "grew by %d KiB" % grew)
    else:
        ok(max(samples) < RSS_LIMIT_KIB, "RSS stays under 64 MiB while stalled",
           "max %d KiB" % max(samples))

    first = clients[0]
    head = first.read_head()
    is_(head.status, 200, "a stalled client gets 200 once it reads")
    is_(head.header_all("Content-Length"), [str(HUGE)], "Content-Length of the 1 GiB file")
    chunk = first.read_exact(256 * KiB)
    ok(chunk == bytes(len(chunk)), "its first 256 KiB are the sparse file's zeros")

    for c in clients:
        c.close()
    ok(poll(srv.settled), "after the stalled clients close, no connection or job is left",
       repr(srv.stats()))
    ok(poll(lambda: srv.fd_count() <= base_fds), "file descriptors back to the baseline (%d)"
       % base_fds, "now %d" % srv.fd_count())
    is_(srv.get("/small.txt").body, b"small", "server still answers")


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
    ok(poll(lambda: srv.fd_count() <= base_fds), "30 aborted downloads leave no fd behind",
       "fds %d, baseline %d" % (srv.fd_count(), base_fds))
    ok(poll(srv.settled), "and no connection or job", repr(srv.stats()))
    is_(srv.get("/small.txt").body, b"small", "server still answers after aborts")


def main():
    srv = Server(files={"small.txt": b"small"},
                 args=["--loop-reads", "off", "--partition", "64k", "--threads", "2", "--file-cache", "off"])
    srv.sparse_file("huge.bin", HUGE)
    with srv:
        test_stalled(srv)
        test_aborted(srv)


run(main)
