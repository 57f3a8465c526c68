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
import re
import resource
import signal
import socket
import time

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
    big = random_bytes(320 * KiB, 58)  # beyond what the loop answers from memory: the pump reads it
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


def read_response(s, buf):
    """One response with a Content-Length from socket S: (body, what follows)."""
    while b"\r\n\r\n" not in buf:
        data = s.recv(65536)
        if not data:
            raise EOFError("closed")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(rest) < length:
        rest += s.recv(65536)
    return rest[:length], rest[length:]


def test_poll_again(cache):
    """libuv polls again at once, with no prepare phase between, when a poll
    fills its batch of 1,024 events. What a pass keeps (a file opened on the
    loop; with the cache on, the read of its change queue) must not outlive
    the first of those polls: 1,400 connections each send three GETs while
    the server is stopped (SIGSTOP), so its next poll is a full batch; then
    the file is replaced (rename, complete) and a GET for it is sent, which
    the second poll brings. It must see the new file. Without the cache the
    burst asks for the file itself (it is opened in the first batch);
    with it, for another file (the entry is what was kept)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096
    if hard != resource.RLIM_INFINITY and hard < want:
        ok(True, "# SKIP RLIMIT_NOFILE's hard limit %d is below %d" % (hard, want))
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))  # the server inherits it
    files = {"t.txt": b"version 0\n", "d.txt": b"d" * 100}
    args = ["--partition", "64k", "--max-connections", "3000", "--access-log", "off",
            "--file-cache", "on" if cache else "off"]
    name = "a second poll in one pass, cache %s" % ("on" if cache else "off")
    with Server(files=files, args=args, name=name) as srv:
        burst_path = "/d.txt" if cache else "/t.txt"
        burst_req = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % burst_path.encode()
        get_t = b"GET /t.txt HTTP/1.1\r\nHost: x\r\n\r\n"

        def connect(ip):
            s = socket.socket()
            s.bind((ip, 0))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.connect(("127.0.0.1", srv.port))
            return s

        burst = [connect("127.0.%d.%d" % (10 + i // 200, 2 + i % 200)) for i in range(1400)]
        writer = connect("127.0.9.9")
        stale = []
        try:
            for trial in range(1, 11):
                for _ in range(2):  # with the cache on, the second is a hit
                    writer.sendall(get_t)
                    body, _ = read_response(writer, b"")
                if body != b"version %d\n" % (trial - 1):
                    stale.append((trial, "before", body))
                os.kill(srv.pid, signal.SIGSTOP)
                try:
                    for s in burst:
                        s.sendall(burst_req * 3)
                    time.sleep(0.05)
                finally:
                    os.kill(srv.pid, signal.SIGCONT)
                t0 = time.monotonic()
                while time.monotonic() - t0 < (trial % 5) * 0.002:
                    pass  # a little later into the first batch each trial
                srv.write_file("t.txt.new", b"version %d\n" % trial)
                os.rename(srv.path("t.txt.new"), srv.path("t.txt"))
                writer.sendall(get_t)  # sent after the rename completed
                body, _ = read_response(writer, b"")
                if body != b"version %d\n" % trial:
                    stale.append((trial, "after", body))
                for s in burst:
                    buf = b""
                    for _ in range(3):
                        _, buf = read_response(s, buf)
        finally:
            for s in burst + [writer]:
                s.close()
        is_(stale, [], "a GET sent after the file was replaced gets the new one, 10 times, "
            "each after a full batch of events (cache %s)" % ("on" if cache else "off"))


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
    test_poll_again(cache=False)
    test_poll_again(cache=True)

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
