#!/usr/bin/env python3
# Resource bounds: 1,000 idle connections; 200 clients leaving in the middle
# of a 16 MiB response; 100 clients that never read their 16 MiB response
# (send_timeout 1s drops them); 500 requests of seeded random garbage.
# Throughout, a normal client on its own thread is served; afterwards the
# server's fd count and RSS (from /proc/PID) return near their baseline.
import os
import random
import resource
import socket
import threading
import time

from harness import (ASAN, SANITIZED, SLOW, KiB, MiB, Conn, Server, build_request, diag, is_, ok,
                     poll, run, statuses)

BIG = 16 * MiB
IDLE = 1000
LEAVERS = 200
STALLERS = 100
GARBAGE = 500
SEED = 4
CONF = {"max_connections": 2000, "send_timeout": "1s", "header_timeout": "20s",
        "partition": "64k", "threads": 2}
# Near the baseline: the few fds libuv opens on demand; RSS within what the
# allocator may keep cached (ASan keeps freed memory in quarantine a while).
FD_SLACK = 4
RSS_SLACK_KIB = (64 if SANITIZED else 4) * 1024


class Prober(threading.Thread):
    """The normal client: GET /x.txt on a fresh connection every 50 ms."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.served = 0
        self.failures = []
        self.slowest = 0.0

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                with Conn(self.port, timeout=10 * SLOW) as c:
                    resp = c.roundtrip("GET", "/x.txt", headers={"Connection": "close"})
                if (resp.status, resp.body) == (200, b"hello"):
                    self.served += 1
                else:
                    self.failures.append(repr(resp))
            except Exception as e:  # noqa: B902 - every failure counts
                self.failures.append("%s: %s" % (type(e).__name__, e))
            self.slowest = max(self.slowest, time.monotonic() - t0)
            self.stop.wait(0.05)

    def check(self, phase):
        served = self.served
        poll(lambda: self.served > served, 10)
        ok(self.served > served and not self.failures,
           "%s: the normal client is served (%d so far, slowest %.0f ms)"
           % (phase, self.served, self.slowest * 1000), "failures: %r" % self.failures[:5])


def figures(srv):
    return srv.fd_count(), srv.rss_kib()


def settle(srv, base_fds, phase):
    """Wait until only the prober's connections are left and the fds are back."""
    fds = poll(lambda: srv.fd_count() <= base_fds + FD_SLACK, 20)
    ok(fds, "%s: fds back near the baseline %d" % (phase, base_fds),
       "now %d" % srv.fd_count())


def idle_connections(srv, prober, base_fds):
    conns = []
    for _ in range(IDLE):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
        conns.append(s)
    held = poll(lambda: srv.fd_count() >= base_fds + IDLE, 20)
    ok(held, "1,000 idle connections are held", "fds %d" % srv.fd_count())
    diag("with %d idle connections: fds %d, RSS %d KiB" % ((IDLE,) + figures(srv)))
    prober.check("1,000 idle connections")
    for s in conns:
        s.close()
    settle(srv, base_fds, "1,000 idle connections closed")
    diag("1,000 idle connections closed: fds %d, RSS %d KiB" % figures(srv))


def leavers(srv, prober, base_fds):
    raw = build_request("GET", "/big.bin")
    for batch in range(LEAVERS // 50):
        conns = [Conn(srv.port) for _ in range(50)]
        for c in conns:
            c.send(raw)
        for i, c in enumerate(conns):
            c.read_exact((i % 4) * 32 * KiB + 1)  # a part of the head or body
            c.close()
    prober.check("200 clients leaving mid-response")
    settle(srv, base_fds, "200 clients left")
    diag("200 clients left: fds %d, RSS %d KiB" % figures(srv))


def stallers(srv, prober, base_fds):
    conns = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(STALLERS)]
    for c in conns:
        c.request("GET", "/big.bin")
    time.sleep(0.3)
    diag("with %d stalled 16 MiB responses: fds %d, RSS %d KiB" % ((STALLERS,) + figures(srv)))
    prober.check("100 clients not reading 16 MiB")
    settle(srv, base_fds, "100 non-readers dropped by send_timeout")
    got = []
    for c in conns:
        got.append(len(c.read_to_end()[0]))
        c.close()
    ok(max(got) < BIG, "no non-reader got the whole file", "largest %d" % max(got))


def garbage_request(rng):
    kind = rng.randrange(4)
    if kind == 0:  # random bytes
        return rng.randbytes(rng.randrange(1, 2048))
    if kind == 1:  # random printable lines
        return "\r\n".join("".join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(80)))
                           for _ in range(rng.randrange(1, 20))).encode() + b"\r\n\r\n"
    raw = bytearray(build_request(rng.choice(["GET", "POST", "HEAD"]), "/x.txt",
                                  body=b"b" * rng.randrange(50) if kind == 3 else None,
                                  headers={"X-Fill": "f" * rng.randrange(100)}))
    for _ in range(rng.randrange(1, 6)):  # a valid request, mutated
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def garbage(srv, prober, base_fds):
    rng = random.Random(SEED)
    answers, ends = {}, set()
    for _ in range(GARBAGE):
        raw = garbage_request(rng)
        with Conn(srv.port) as c:
            try:
                c.send(raw)
                c.sock.shutdown(socket.SHUT_WR)  # EOF: an incomplete request ends here
            except OSError:
                pass
            data, end = c.read_to_end()
        ends.add(end)
        for status in statuses(data)[:1] or ["none"]:
            answers[status] = answers.get(status, 0) + 1
    diag("answers to %d garbage requests (seed %d): %r" % (GARBAGE, SEED, answers))
    ok(all(s == "none" or 200 <= s < 600 for s in answers) and ends <= {"closed", "reset"},
       "garbage gets answers or a close", "connections ended %r" % ends)
    prober.check("500 garbage requests")
    settle(srv, base_fds, "garbage requests done")


def main():
    if ASAN:
        # A small quarantine, released often: freed memory must be able to
        # leave the process for "RSS returns near the baseline" to mean much.
        opts = os.environ.get("ASAN_OPTIONS", "")
        os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "quarantine_size_mb=8:allocator_release_to_os_interval_ms=100"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    srv = Server(files={"x.txt": b"hello"}, conf=CONF)
    srv.sparse_file("big.bin", BIG)
    with srv:
        # Warm up every path once, so that lazily made buffers count in the baseline.
        for _ in range(3):
            with Conn(srv.port) as c:
                c.request("GET", "/big.bin")
                c.read_response()
            srv.get("/x.txt")
        prober = Prober(srv.port)
        prober.start()
        prober.check("baseline")
        time.sleep(0.3)
        base_fds, base_rss = figures(srv)
        diag("baseline: fds %d, RSS %d KiB" % (base_fds, base_rss))

        idle_connections(srv, prober, base_fds)
        leavers(srv, prober, base_fds)
        stallers(srv, prober, base_fds)
        garbage(srv, prober, base_fds)

        prober.stop.set()
        prober.join(10 * SLOW)
        ok(not prober.failures, "the normal client was never refused (%d requests)"
           % prober.served, repr(prober.failures[:5]))
        # The server gives freed memory back on its next 1-second tick.
        poll(lambda: srv.rss_kib() <= base_rss + RSS_SLACK_KIB, 10)
        fds, rss = figures(srv)
        diag("after: fds %d (baseline %d), RSS %d KiB (baseline %d KiB)"
             % (fds, base_fds, rss, base_rss))
        ok(fds <= base_fds + FD_SLACK, "fds return near the baseline",
           "%d, baseline %d" % (fds, base_fds))
        ok(rss <= base_rss + RSS_SLACK_KIB, "RSS returns near the baseline",
           "%d KiB, baseline %d KiB" % (rss, base_rss))
        st = srv.stats()
        is_(st["connections"]["active"], 1, "only the /stats connection is left")
        is_(st["jobs"]["read"]["in_flight"], 0, "no read job is left in flight")


run(main, timeout=180)
