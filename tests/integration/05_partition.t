#!/usr/bin/env python3
# The chunked file reader: files around the partition size and one of
# 16 MiB + 7 come back byte-identical at --partition 4k, 64k and whole, also
# two at once, in exactly one read job per partition (one per file for
# whole). With one pool thread and 4k partitions, two downloads interleave:
# neither gets far before the other has bytes, whatever the scheduling. A
# file that shrinks while sent is cut, not padded; one that shrank before
# its first byte went out is answered 500 instead. Under partition = auto the
# pump cuts every file-reading response (a file, multipart ranges, gzip of a
# file) at partition_max, and at partition_min while short work waits; a live
# partition change reaches all three at their next piece. Counted by /stats
# job counts and costs, never timed.
import hashlib
import math
import os
import select
import shutil
import tempfile
import threading

from harness import (IO_TIMEOUT, KiB, MiB, Conn, ProtocolError, Server, gunzip, is_, like, ok,
                     poll, random_bytes, run, split_response, text_bytes)

BIG = 16 * MiB + 7
SIZES = sorted({0, 1, 4095, 4096, 4097, 65535, 65536, 65537, BIG})
RCVBUF = 64 * KiB


def name(size):
    return "f%d.bin" % size


def make_root():
    root = tempfile.mkdtemp(prefix="unclog-test-root-")
    digests = {}
    big = random_bytes(BIG, 5)
    for size in SIZES:
        data = big[:size]
        with open(os.path.join(root, name(size)), "wb") as f:
            f.write(data)
        digests[size] = sha(data)
    return root, digests


def sha(data):
    return hashlib.sha256(data).hexdigest()


def download_two(srv, target, lead=None):
    """GET target on two connections at once, both read in one select loop.
    Returns (the two answers as (head, body), had), had[i] being the bytes
    the other connection had received when connection i first held more
    than `lead` bytes (None if it never did)."""
    conns = [srv.conn(rcvbuf=RCVBUF) for _ in range(2)]
    for c in conns:
        c.request("GET", target, headers={"Connection": "close"})
    had = [None, None]
    while not all(c.eof for c in conns):
        ready, _, _ = select.select([c.sock for c in conns if not c.eof], [], [], IO_TIMEOUT)
        if not ready:
            raise ProtocolError("no byte in %d s; received %r" % (IO_TIMEOUT,
                                                                  [len(c.buf) for c in conns]))
        for i, c in enumerate(conns):
            if c.sock in ready:
                c.fill()
            other = conns[1 - i]
            if lead is not None and had[i] is None and len(c.buf) > lead:
                while select.select([other.sock], [], [], 0)[0] and other.fill():
                    pass  # what has arrived for the other one counts
                had[i] = len(other.buf)
    answers = [split_response(bytes(c.buf)) for c in conns]
    for c in conns:
        c.close()
    return answers, had


def check_partition(root, digests, partition):
    p = {"4k": 4096, "64k": 65536}.get(partition)
    sizes = [0, 1, p - 1, p, p + 1, BIG] if p else SIZES
    with Server(root=root, args=["--sendfile", "off", "--partition", partition], name="server at " + partition) as srv:
        with srv.conn() as conn:
            for size in sizes:
                resp = conn.roundtrip("GET", "/" + name(size))
                is_((resp.status, len(resp.body), sha(resp.body)), (200, size, digests[size]),
                    "--partition %s: %d bytes byte-identical" % (partition, size))
            resp = conn.roundtrip("HEAD", "/" + name(BIG))
            is_(resp.header("Content-Length"), str(BIG),
                "--partition %s: HEAD of the big file" % partition)

        before = srv.stats()["jobs"]["read"]
        answers, _ = download_two(srv, "/" + name(BIG))
        for i, (head, body) in enumerate(answers):
            is_((head.status, sha(body)), (200, digests[BIG]),
                "--partition %s: concurrent download %d byte-identical" % (partition, i + 1))
        after = srv.stats()["jobs"]["read"]
        want = 2 * (math.ceil(BIG / p) if p else 1)
        is_((after["submitted"] - before["submitted"], after["completed"] - before["completed"]),
            (want, want), "--partition %s: exactly %d read jobs for the two downloads"
            % (partition, want))
        if partition == "whole":
            # 16 MiB in one job is read 256 KiB at a time (PUMP_READ_STEP), the
            # CPU given way between steps once the job has run 50 us of CPU.
            ok(after["gave_way"] > 0, "--partition whole: the 16 MiB reads gave the CPU way "
               "between steps (%d times)" % after["gave_way"])
        elif partition == "4k":
            is_(after["gave_way"], 0, "--partition 4k: one step per read, never gives way")


def wmem_max():
    """The most a socket's send buffer can grow to (net.ipv4.tcp_wmem)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 16 * MiB


def test_interleaving():
    # One pool thread, 4k partitions: each response has at most one read
    # queued, so the thread alternates between the two. Before the second
    # request arrives, the first can only run ahead by what the sockets
    # hold (server send buffer, our receive buffer); past that plus a
    # margin, the second connection must have received bytes. No timing.
    lead = wmem_max() + 4 * RCVBUF + MiB
    size = max(4 * lead, 32 * MiB)
    srv = Server(args=["--sendfile", "off", "--threads", "1", "--partition", "4k"], name="server with one thread")
    srv.sparse_file("both.bin", size)
    with srv:
        answers, had = download_two(srv, "/both.bin", lead)
        ok(all(len(body) == size and body.count(0) == size for _, body in answers),
           "one thread, 4k: both downloads complete (%d MiB each)" % (size // MiB))
        first = 0 if had[0] is not None else 1
        ok(had[first] is not None and had[first] > 0,
           "one thread, 4k: when one download passed %.1f MiB, the other had bytes too"
           % (lead / MiB), "received by the other at that moment: %r" % had)


def test_truncated_while_sent(root):
    # The file shrinks while it is being sent: the answer cannot keep its
    # Content-Length, so the server must cut the connection, not hang or
    # pad, and go on serving.
    path = os.path.join(root, "shrinks.bin")
    with open(path, "wb") as f:
        f.write(random_bytes(8 * MiB, 6))
    with Server(root=root, args=["--sendfile", "off", "--partition", "4k"], name="server for a shrinking file") as srv:
        with srv.conn(rcvbuf=16 * KiB) as conn:
            conn.request("GET", "/shrinks.bin")
            is_(conn.read_head().status, 200, "shrinking file: 200")
            conn.read_exact(64 * KiB)
            os.truncate(path, 100 * KiB)
            try:
                conn.read_exact(8 * MiB - 64 * KiB)
                got = "the full length"
            except ProtocolError:
                got = "closed early"
            except OSError as e:
                got = "%s: %s" % (type(e).__name__, e)
            is_(got, "closed early", "shrinking file: connection closed before Content-Length")
        resp = srv.get("/shrinks.bin")
        is_((resp.status, len(resp.body)), (200, 100 * KiB), "the shrunk file is served whole")
    os.unlink(path)


def test_truncated_before_sent(root):
    # The file shrinks after its open and before its first read: nothing of
    # the 200 is out yet, so the client can still be told. Two stalled
    # downloads hold the whole buffer budget, so the victim's response waits
    # for memory after its open, which /stats shows; then the file shrinks
    # and the stalled clients leave.
    data = random_bytes(MiB, 7)
    for name_ in ("held.bin", "victim.bin"):
        with open(os.path.join(root, name_), "wb") as f:
            f.write(data)
    args = ["--sendfile", "off", "--partition", "whole", "--max-buffer-memory", "2m", "--file-cache", "off",
            "--send-buffer", "4k"]
    with Server(root=root, args=args, name="server for a file that shrank before") as srv:
        stalled = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(2)]
        for c in stalled:
            c.request("GET", "/held.bin")
        memory = lambda: srv.stats()["memory"]
        ok(poll(lambda: memory()["held"] == 2 * MiB), "two stalled downloads hold the budget",
           memory())
        with srv.conn() as victim:
            victim.request("GET", "/victim.bin")
            ok(poll(lambda: memory()["waiting"] == 1), "the victim waits for memory, opened",
               memory())
            os.truncate(os.path.join(root, "victim.bin"), 100 * KiB)
            for c in stalled:
                c.close()
            resp = victim.read_response()
            is_(resp.status, 500, "shrank before its first byte: 500, not a silent close")
            ok("close" in resp.tokens("Connection"), "and Connection: close")
        like(srv.stderr(), r"victim\.bin: .* before its first byte, answered 500",
             "the failure is logged with its request")
        resp = srv.get("/victim.bin")
        is_((resp.status, len(resp.body)), (200, 100 * KiB), "the shrunk file is then served whole")
    for name_ in ("held.bin", "victim.bin"):
        os.unlink(os.path.join(root, name_))


# partition = auto, with one pool thread and every file read made to take
# 10 ms (emulate_disk), so that a request arriving meanwhile waits for the
# thread: short work.
AUTO_MIN, AUTO_MAX = 16 * KiB, 128 * KiB
AUTO_SIZE = 2 * MiB
AUTO_ARGS = ["--sendfile", "off", "--partition", "auto", "--partition-min", "16k", "--partition-max", "128k",
             "--threads", "1", "--emulate-disk", "10ms", "--file-cache", "off"]
RANGES = "bytes=0-%d,%d-%d" % (AUTO_SIZE // 2 - 1, AUTO_SIZE // 2, AUTO_SIZE - 1)

# What reads a file, the class of its jobs, what to ask, what comes back.
AUTO_KINDS = [
    ("a file", "read", "/auto.bin", {}),
    ("multipart ranges", "read", "/auto.bin", {"Range": RANGES}),
    ("gzip of a file", "gzip", "/auto.txt", {"Accept-Encoding": "gzip"}),
]


def checked_body(kind, resp, binary, text):
    """The bytes the response's jobs took in (its read or deflate input), or
    None when the answer is wrong."""
    if kind == "a file":
        return AUTO_SIZE if (resp.status, resp.body) == (200, binary) else None
    if kind == "gzip of a file":
        good = resp.header("Content-Encoding") == "gzip" and gunzip(resp.body) == text
        return AUTO_SIZE if resp.status == 200 and good else None
    half = AUTO_SIZE // 2
    good = binary[:half] in resp.body and binary[half:] in resp.body
    return len(resp.body) if resp.status == 206 and good else None


def short_work(srv, stop, count):
    """Until STOP is set, GET a missing file over and over: each one is an
    open job, short work, that waits while the one thread reads."""
    with srv.conn() as c:
        while not stop.is_set():
            c.roundtrip("GET", "/missing")
            count[0] += 1


def auto_download(srv, kind, cls, target, headers, binary, text, busy):
    """Downloads TARGET, with short work kept waiting if BUSY: returns (input
    bytes, jobs of CLS, their cost)."""
    stop, count = threading.Event(), [0]
    helper = threading.Thread(target=short_work, args=(srv, stop, count), daemon=True)
    if busy:
        helper.start()
        poll(lambda: count[0] > 0)
    before = srv.stats()["jobs"][cls]
    resp = srv.get(target, headers=headers)
    after = srv.stats()["jobs"][cls]
    stop.set()
    if busy:
        helper.join()
    return (checked_body(kind, resp, binary, text), after["completed"] - before["completed"],
            after["cost_bytes"] - before["cost_bytes"])


def test_auto():
    binary, text = random_bytes(AUTO_SIZE, 8), text_bytes(AUTO_SIZE)
    srv = Server(files={"auto.bin": binary, "auto.txt": text}, args=AUTO_ARGS,
                 name="server at auto")
    with srv:
        for kind, cls, target, headers in AUTO_KINDS:
            size, jobs, cost = auto_download(srv, kind, cls, target, headers, binary, text, False)
            ok(size is not None, "auto, %s: the answer is right" % kind)
            size = size or AUTO_SIZE
            want = math.ceil(size / AUTO_MAX)
            is_((jobs, cost), (want, size),
                "auto, %s, no short work waiting: %d %s jobs, all of partition_max"
                % (kind, want, cls))

            size, jobs, cost = auto_download(srv, kind, cls, target, headers, binary, text, True)
            ok(size is not None, "auto, %s with short work: the answer is right" % kind)
            size = size or AUTO_SIZE
            fewest, most = math.ceil(size / AUTO_MAX), math.ceil(size / AUTO_MIN)
            ok(fewest < jobs <= most and cost == size,
               "auto, %s while short work waits: pieces cut to partition_min (%d %s jobs for "
               "%d bytes; %d at partition_max, %d at partition_min)"
               % (kind, jobs, cls, cost, fewest, most))


def settings(srv, form):
    """POST FORM to /settings: the status."""
    with srv.admin_conn() as c:
        r = c.roundtrip("POST", "/settings", body=form.encode(),
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    return r.status


def test_live_change():
    # A 16 MiB download stalls after 1 MiB at auto's 1m pieces; partition=4k
    # then reaches it at its next piece. The server holds at most its two
    # slots and the sockets' few KiB ahead of the client, so more than 12 MiB
    # are left to read in 4k pieces.
    data = random_bytes(16 * MiB, 9)
    args = ["--sendfile", "off", "--admin", "on", "--file-cache", "off", "--send-buffer", "4k"]
    kinds = [("gzip of a file", "gzip", "/live.txt", {"Accept-Encoding": "gzip"}),
             ("multipart ranges", "read", "/live.bin",
              {"Range": "bytes=0-%d,%d-%d" % (8 * MiB - 1, 8 * MiB, 16 * MiB - 1)})]
    srv = Server(files={"live.txt": data, "live.bin": data}, args=args,
                 name="server for a live change")
    with srv:
        for kind, cls, target, headers in kinds:
            with Conn(srv.port, rcvbuf=16 * KiB) as c:
                c.request("GET", target, headers=headers)
                while len(c.buf) < MiB and c.fill():
                    pass
                before = srv.stats()["jobs"][cls]["completed"]
                is_(settings(srv, "partition=4k"), 200, "%s: partition=4k mid-response" % kind)
                resp = c.read_response()
            body = gunzip(resp.body) if cls == "gzip" else resp.body
            ok(body == data or (data[:8 * MiB] in body and data[8 * MiB:] in body),
               "%s: the answer is right" % kind)
            jobs = srv.stats()["jobs"][cls]["completed"] - before
            want = 12 * MiB // (4 * KiB)
            ok(jobs >= want, "%s: the rest took 4k pieces: %d %s jobs after the change (>= %d)"
               % (kind, jobs, cls, want))
            is_(settings(srv, "partition=auto"), 200, "partition=auto again")
        is_(settings(srv, "partition=4k"), 200, "partition=4k")
        gzip_body_slices(srv)


def gzip_body_slices(srv):
    # A /gzip body is no file: gzip_partition (64k) cuts it, not partition,
    # and a live change of gzip_partition reaches it at its next slice.
    body = text_bytes(MiB)
    before = srv.stats()["jobs"]["gzip"]["completed"]
    resp = srv.request("POST", "/gzip", body=body)
    is_((resp.status, gunzip(resp.body) == body), (200, True), "/gzip of 1 MiB at partition=4k")
    jobs = srv.stats()["jobs"]["gzip"]["completed"] - before
    ok(16 <= jobs <= 17, "it took 64k slices of gzip_partition: %d gzip jobs" % jobs)
    with Conn(srv.port) as c:
        c.send(b"POST /gzip HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
        c.send(body[:len(body) // 2])
        is_(settings(srv, "gzip_partition=16k"), 200, "gzip_partition=16k mid-body")
        before = srv.stats()["jobs"]["gzip"]["completed"]
        c.send(body[len(body) // 2:])
        resp = c.read_response()
    is_((resp.status, gunzip(resp.body) == body), (200, True), "that /gzip answer is right")
    jobs = srv.stats()["jobs"]["gzip"]["completed"] - before
    want = len(body) // 2 // (16 * KiB)
    ok(jobs >= want, "the half sent after the change took 16k slices: %d gzip jobs (>= %d)"
       % (jobs, want))


def main():
    root, digests = make_root()
    try:
        for partition in ("4k", "64k", "whole"):
            check_partition(root, digests, partition)
        test_interleaving()
        test_truncated_while_sent(root)
        test_truncated_before_sent(root)
        test_auto()
        test_live_change()
    finally:
        shutil.rmtree(root, ignore_errors=True)


run(main, timeout=180)
