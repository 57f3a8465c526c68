#!/usr/bin/env python3
# Reads on the loop (loop_reads): a small file already in the page cache is
# opened (openat2 RESOLVE_CACHED) and read (preadv2 RWF_NOWAIT) on the loop,
# with no pool job; one evicted from the page cache (POSIX_FADV_DONTNEED)
# goes to the pool, its reason counted; loop_reads = off sends every read
# through the pool; with the small-file cache on, a file it has room for
# fills it through the pool, and once it is full a miss is read on the
# loop. Counters, not timings. The root is on a disk-backed
# directory where /tmp is tmpfs: eviction does nothing there.
import os

from harness import KiB, Server, diag, is_, ok, poll, random_bytes, run

BODY = random_bytes(8 * KiB, 57)
FILES = {"a.bin": BODY, "b.bin": BODY}
ARGS = ["--file-cache", "off", "--partition", "64k"]


def total_jobs(st):
    return sum(c["submitted"] for c in st["jobs"].values())


def fallbacks(st):
    return {k: v["count"] for k, v in st["loop_reads"]["fallbacks"].items()}


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages are not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def delta(before, after, *keys):
    def get(st):
        for k in keys:
            st = st[k]
        return st
    return get(after) - get(before)


def test_turn_opens():
    """A file opened on the loop serves every request for it in the same
    turn of the loop (pipelined, with no turn_share bound: answered in one
    turn) with one open, and is closed when the turn ends: a file replaced
    between two requests is seen by the second, and no fd is left open."""
    big = random_bytes(200 * KiB, 58)  # beyond the first piece: the pump reads it
    files = dict(FILES, **{"big.bin": big})
    args = ARGS + ["--turn-share", "0"]
    with Server(files=files, args=args, name="a turn's opens") as srv:
        if not srv.stats()["loop_reads"]["on"]:
            ok(True, "# SKIP the kernel lacks openat2 RESOLVE_CACHED")
            return
        for name in files:
            srv.get("/" + name)  # the page cache and the dcache warm
        fds = srv.fd_count()
        before = srv.stats()
        with srv.conn() as c:
            c.send(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
            bodies = [c.read_response().body for _ in range(3)]
        after = srv.stats()
        is_(bodies, [BODY] * 3, "three pipelined GETs of one file: each body whole")
        is_(delta(before, after, "loop_reads", "served"), 3, "all three read on the loop")
        is_(delta(before, after, "loop_reads", "opens_shared"), 2,
            "the file opened once: the two after the first found it open in the turn")
        is_(delta(before, after, "loop_reads", "bodies_shared"), 2,
            "and read once: the two after the first found its body read")
        is_(delta(before, after, "loop_reads", "bytes"), len(BODY), "one read's bytes")
        is_(total_jobs(after) - total_jobs(before), 0, "no pool job")

        # Kept by the response that reads it on the pool: the turn forgets
        # it, and the next request opens the file again.
        before = srv.stats()
        with srv.conn() as c:
            c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            bodies = [c.read_response().body for _ in range(2)]
        after = srv.stats()
        ok(bodies == [big] * 2, "two pipelined GETs of a file the pump reads: each body whole")
        is_(delta(before, after, "loop_reads", "opens_shared"), 0,
            "the first response took its fd: the second opened the file again")

        # A new file under the old name: the next turn opens it anew.
        new = random_bytes(8 * KiB, 59)
        tmp = srv.path("a.bin.new")
        with open(tmp, "wb") as f:
            f.write(new)
        os.rename(tmp, srv.path("a.bin"))
        got = srv.get("/a.bin").body
        ok(got == new, "the file replaced on disk: the next request gets the new one")
        ok(poll(lambda: srv.fd_count() <= fds), "no fd left open after the turns ended",
           "fds before %d, now %d" % (fds, srv.fd_count()))

    # Requests that waited for their client's turn (a long pipeline spends
    # its turn_share) run before the poll, not after it: what they opened
    # is closed before the loop waits for the next request.
    with Server(files=files, args=ARGS, name="waited turns") as srv:
        srv.get("/a.bin")
        stale = 0
        for n in range(0, 120, 20):
            with srv.conn() as c:
                c.send(b"GET /b.bin HTTP/1.1\r\nHost: x\r\n\r\n" * n +
                       b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
                bodies = [c.read_response().body for _ in range(n + 1)]
                old = bodies[-1]
                new = random_bytes(8 * KiB, 60 + n)
                tmp = srv.path("a.bin.new")
                with open(tmp, "wb") as f:
                    f.write(new)
                os.rename(tmp, srv.path("a.bin"))
                stale += c.roundtrip("GET", "/a.bin").body != new
        is_(stale, 0, "six pipelines, the file replaced after each: asked again on the same "
            "connection, always the new file")
        ok(srv.stats()["turns"]["deferred"] > 0, "requests did wait for their turn")


def test_whole_at_once():
    """An answer from memory that the kernel takes whole as the request is
    dispatched ends there (send.whole_at_once); one that has to wait for
    the pool does not."""
    with Server(files=FILES, args=ARGS, name="whole at once") as srv:
        if not srv.stats()["loop_reads"]["on"]:
            ok(True, "# SKIP the kernel lacks openat2 RESOLVE_CACHED")
            return
        srv.get("/a.bin")
        before = srv.stats()
        with srv.conn() as c:
            for _ in range(3):
                is_(c.roundtrip("GET", "/a.bin").body, BODY, "a GET on a kept-alive connection")
        after = srv.stats()
        # The /stats answer that took `before` counts too, after it.
        is_(delta(before, after, "send", "whole_at_once"), 3 + 1,
            "each answer written whole as it was dispatched")
    with Server(files=FILES, args=ARGS + ["--loop-reads", "off"], name="whole, pool") as srv:
        before = srv.stats()
        is_(srv.get("/a.bin").body, BODY, "a GET whose file the pool opens and reads")
        after = srv.stats()
        is_(delta(before, after, "send", "whole_at_once"), 0 + 1,
            "written from the open's callback (only the /stats answer was whole at once)")


def main():
    with Server(files=FILES, args=ARGS, name="loop reads on") as srv:
        on = srv.stats()["loop_reads"]["on"]
        if not on:
            ok(True, "# SKIP the kernel lacks openat2 RESOLVE_CACHED")
            return
        is_(srv.get("/a.bin").body, BODY, "a first GET (warms the page cache, whatever the path)")
        before = srv.stats()
        is_(srv.get("/a.bin").body, BODY, "a GET of the file now in the page cache")
        after = srv.stats()
        is_(total_jobs(after) - total_jobs(before), 0, "served with no pool job at all")
        is_(after["loop_reads"]["served"] - before["loop_reads"]["served"], 1,
            "one read on the loop")

        # An evicted page comes back through the read's own readahead, and on
        # a fast (virtual) disk that often ends before the read looks again:
        # then the read did not block and the loop served it (about half the
        # GETs on the VM of 2026-12-03). So up to 50 evictions; a GET that
        # found a page missing must fall back, one job and its reason.
        for attempt in range(50):
            evict(srv.path("b.bin"))
            before = srv.stats()
            body = srv.get("/b.bin").body
            after = srv.stats()
            jobs = total_jobs(after) - total_jobs(before)
            fb0, fb1 = fallbacks(before), fallbacks(after)
            would_block = sum(fb1[k] - fb0[k] for k in ("open_would_block", "read_would_block"))
            served = after["loop_reads"]["served"] - before["loop_reads"]["served"]
            if (jobs, would_block, served) != (0, 0, 1):
                break
        diag("evictions until a read would block: %d" % (attempt + 1))
        is_(body, BODY, "a GET of a file evicted from the page cache")
        is_(jobs, 1, "it went to the pool: one open job")
        is_(would_block, 1, "the fallback is counted: its open or its read would block")

    # The cache on, with room for two of the three files: the first two
    # fill it through the pool; once it is full, a miss is read on the loop
    # rather than crossing the pool to evict an entry.
    files = dict(FILES, **{"c.bin": BODY})
    cache = ["--partition", "64k", "--file-cache-size", "16k", "--file-cache-max-file", "8k"]
    with Server(files=files, args=cache, name="loop reads, a full cache") as srv:
        for name in files:
            srv.get("/" + name)  # the page cache warm, whatever path each took
        st = srv.stats()
        is_((st["file_cache"]["entries"], st["file_cache"]["bytes"]), (2, 16 * KiB),
            "the first two files fill the cache through the pool")
        before = srv.stats()
        for name in ("a.bin", "b.bin", "c.bin"):
            is_(srv.get("/" + name).body, BODY, "GET /%s, the cache full" % name)
        after = srv.stats()
        is_(total_jobs(after) - total_jobs(before), 0, "no pool job: two hits, one miss on the loop")
        is_(after["loop_reads"]["served"] - before["loop_reads"]["served"], 1,
            "the miss is read on the loop")
        is_(after["file_cache"]["entries"], 2, "and evicts nothing")

    test_turn_opens()
    test_whole_at_once()

    with Server(files=FILES, args=ARGS + ["--loop-reads", "off"], name="loop reads off") as srv:
        is_(srv.stats()["loop_reads"]["on"], 0, "loop_reads = off: off")
        for _ in range(3):
            before = srv.stats()
            is_(srv.get("/a.bin").body, BODY, "a GET, loop_reads off")
            after = srv.stats()
            is_(after["jobs"]["open"]["submitted"] - before["jobs"]["open"]["submitted"], 1,
                "every read goes through the pool: one open job, which reads the body")
        is_(after["loop_reads"]["served"], 0, "nothing read on the loop")


run(main)
