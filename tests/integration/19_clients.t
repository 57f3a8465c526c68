#!/usr/bin/env python3
# Fairness between clients in the pool. Client A (127.0.0.2) queues small-file
# opens (each reads its file's body) on many connections, then client B (127.0.0.3) asks for one 96 KiB
# file. One pool thread and slow reads (emulate_disk) keep A's reads waiting;
# /stats counts how many of them completed before B's response was in. Under
# fair, round robin by bytes between clients bounds that to B's share (BOUND
# below), although every one of A's reads has fewer bytes left than B's;
# under fifo B waits for everything A queued before it. Counters, not
# timings. (127.0.0.2 and 127.0.0.3 hash to different buckets of the
# scheduler under the tests' key, harness.py: 15 and 45 of 64.)
import os

from harness import SLOW, KiB, Server, gunzip, is_, ok, poll, random_bytes, run, text_bytes

A_CONNS = 48
SMALL = 8 * KiB
BIG = 96 * KiB  # two pieces at 64k: 64 KiB, then 32 KiB
# A's opens that may complete before B's response is in: the one running
# when B asks; one more that may start while B's request travels; three that
# B's open and first piece pay for before its last piece may start (each
# charged 64 KiB, as each of A's opens is: the first piece they may read, a
# tie included); one that may complete while the test asks /stats; and one
# of slack, for a machine so busy that a read (emulate_disk, 100 ms times
# SLOW) ends while B's request or the test's /stats is still on its way.
BOUND = 1 + 1 + 3 + 1 + 1


def a_queued(srv):
    st = srv.stats()
    return st["jobs"]["open"]["submitted"] == A_CONNS and st["scheduler"]["waiting_short"] >= 24


def one(scheduler):
    """A's opens completed while B was served, and how many waited when B asked."""
    files = {"a%d.bin" % i: random_bytes(SMALL, i) for i in range(A_CONNS)}
    files["b.bin"] = random_bytes(BIG, 99)
    args = ["--loop-reads", "off", "--scheduler", scheduler, "--threads", "1", "--partition", "64k",
            "--emulate-disk", "%dms" % (100 * SLOW), "--file-cache", "off"]
    with Server(files=files, args=args, name="%s server" % scheduler) as srv:
        a = [srv.conn(source="127.0.0.2") for _ in range(A_CONNS)]
        for i, c in enumerate(a):
            c.request("GET", "/a%d.bin" % i)
        ok(poll(lambda: a_queued(srv)), "%s: A's reads wait for the one thread" % scheduler)
        before = srv.stats()
        with srv.conn(source="127.0.0.3") as b:
            resp = b.roundtrip("GET", "/b.bin")
        after = srv.stats()
        is_((resp.status, resp.body == files["b.bin"]), (200, True),
            "%s: B's body is byte-exact" % scheduler)
        reads = after["jobs"]["read"]["submitted"] - before["jobs"]["read"]["submitted"]
        opens = after["jobs"]["open"]["completed"] - before["jobs"]["open"]["completed"]
        is_(reads, 2, "%s: B's file took two reads after its open" % scheduler)
        bad = 0
        for i, c in enumerate(a):
            if c.read_response().body != files["a%d.bin" % i]:
                bad += 1
            c.close()
        is_(bad, 0, "%s: every one of A's bodies is byte-exact" % scheduler)
    return opens - 1, before["scheduler"]["waiting_short"]


# Deflates hold no more threads than CPUs. The server may run on CPUS CPUs
# (it inherits this affinity) and has two threads more; client A (127.0.0.2)
# asks for text files gzipped on the fly on more connections than threads,
# each deflate a slow read (emulate_disk) that holds its thread. Under fair,
# CPUS deflates run and B's (127.0.0.3) open, which reads its body, starts
# on the threads left, counted as passing held deflates; under fifo every thread deflates.
CPUS = len(os.sched_getaffinity(0))
THREADS = CPUS + 2
A_GZIP = THREADS + 6 * CPUS  # under fair, six rounds of deflates queued behind the first


def held(st, running, waiting):
    """RUNNING deflates run and WAITING short jobs wait, none of them A's
    opens: every short start while B is served is then B's."""
    sched = st["scheduler"]
    return (st["jobs"]["open"]["completed"] == A_GZIP and sched["running_cpu"] == running
            and sched["waiting_short"] >= waiting)


def deflates(scheduler):
    text = text_bytes(16 * KiB)
    files = {"t%d.txt" % i: text for i in range(A_GZIP)}
    files["b.bin"] = random_bytes(8 * KiB, 7)
    args = ["--loop-reads", "off", "--scheduler", scheduler, "--threads", str(THREADS), "--partition", "64k",
            "--emulate-disk", "%dms" % (300 * SLOW), "--file-cache", "off"]
    fair = scheduler == "fair"
    running = CPUS if fair else THREADS
    with Server(files=files, args=args, name="%s server" % scheduler) as srv:
        a = [srv.conn(source="127.0.0.2") for _ in range(A_GZIP)]
        for i, c in enumerate(a):
            c.request("GET", "/t%d.txt" % i, headers={"Accept-Encoding": "gzip"})
        ok(poll(lambda: held(srv.stats(), running, 3 * CPUS if fair else 1)),
           "%s: %d of A's deflates run, the rest wait" % (scheduler, running))
        before = srv.stats()["scheduler"]
        with srv.conn(source="127.0.0.3") as b:
            resp = b.roundtrip("GET", "/b.bin")
        after = srv.stats()["scheduler"]
        is_((resp.status, resp.body == files["b.bin"]), (200, True),
            "%s: B's body is byte-exact" % scheduler)
        is_(before["cpu_max"], CPUS, "%s: the CPU bound is the CPUs (%d)" % (scheduler, CPUS))
        passed = after["cpu_passed"] - before["cpu_passed"]
        if fair:
            is_((passed, after["waiting_short"] > 0), (1, True),
                "fair: B's open (which read its body) started while A's deflates were held back")
        else:
            is_(passed, 0, "fifo: no CPU bound, nothing passes")
        bad = 0
        for c in a:
            r = c.read_response()
            if r.status != 200 or gunzip(r.body) != text:
                bad += 1
            c.close()
        is_(bad, 0, "%s: every one of A's gzipped bodies is whole" % scheduler)


def main():
    deflates("fair")
    deflates("fifo")
    done, waited = one("fair")
    ok(waited > BOUND, "fair: more of A's opens waited than the bound (%d)" % waited)
    ok(done <= BOUND, "fair: %d of A's opens completed before B's response, at most %d"
       % (done, BOUND))
    done, waited = one("fifo")
    ok(done >= waited, "fifo: all %d of A's waiting opens completed before B's response (%d)"
       % (waited, done))


run(main)
