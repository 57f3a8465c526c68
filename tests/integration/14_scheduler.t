#!/usr/bin/env python3
# The fair scheduler's invariants, through /stats counters under a flood of
# large downloads: with `scheduler = fair` no bulk piece starts while short
# work (an open, a small file's read, a small /gzip body) waits; with fifo
# they do. Every body stays byte-exact. Counters, not timings.
import threading

from harness import KiB, MiB, Conn, Server, gunzip, is_, ok, poll, random_bytes, run

BIG = random_bytes(8 * MiB, 3)
SMALL = b"x" * KiB
FLOODERS = 4


def flood(srv, stop, errors):
    def loop():
        with Conn(srv.port) as c:
            while not stop.is_set():
                if c.roundtrip("GET", "/big.bin").body != BIG:
                    errors.append("a flood body differs")
    threads = [threading.Thread(target=loop) for _ in range(FLOODERS)]
    for t in threads:
        t.start()
    return threads


def storm(srv, scheduler, until):
    """Small requests under the flood until UNTIL(stats) holds (at most 400)."""
    bad = 0
    for i in range(400):
        if srv.get("/small.txt").body != SMALL:
            bad += 1
        r = srv.request("POST", "/gzip", body=SMALL)
        if gunzip(r.body) != SMALL:
            bad += 1
        if i >= 20 and until(srv.stats()["scheduler"]):
            break
    return bad


def one(scheduler):
    srv = Server(files={"big.bin": BIG, "small.txt": SMALL},
                 # every read meets the pool: the small GETs are short work too
                 args=["--scheduler", scheduler, "--threads", "2", "--partition", "64k",
                       "--file-cache", "off", "--loop-reads", "off"],
                 name="%s server" % scheduler)
    srv.start()
    stop, errors = threading.Event(), []
    threads = flood(srv, stop, errors)
    ok(poll(lambda: srv.stats()["scheduler"]["bulk_started"] > 0), "%s: the flood runs" % scheduler)
    if scheduler == "fifo":
        bad = storm(srv, scheduler, lambda s: s["bulk_over_short"] > 0)
    else:
        bad = storm(srv, scheduler, lambda s: False)
    before = srv.stats()["scheduler"]["bulk_started"]
    ok(poll(lambda: srv.stats()["scheduler"]["bulk_started"] > before),
       "%s: the flood still progresses after the storm" % scheduler)
    stop.set()
    for t in threads:
        t.join()
    s = srv.stats()["scheduler"]
    is_(s["mode"], scheduler, "/stats names the scheduler")
    is_(bad, 0, "%s: every small body is byte-exact" % scheduler)
    is_(errors, [], "%s: every flood body is byte-exact" % scheduler)
    ok(s["short_started"] >= 40, "%s: short work ran" % scheduler, s)
    srv.stop()
    return s


def main():
    fair = one("fair")
    is_(fair["bulk_over_short"], 0, "fair: no bulk piece started while short work waited")
    fifo = one("fifo")
    ok(fifo["bulk_over_short"] > 0, "fifo: bulk pieces started while short work waited", fifo)


run(main)
