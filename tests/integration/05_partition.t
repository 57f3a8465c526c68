#!/usr/bin/env python3
# The chunked file reader: files around the partition size and one of
# 16 MiB + 7 come back byte-identical at --partition 4k, 64k and whole, also
# two at once, in exactly one read job per partition (one per file for
# whole). With one pool thread and 4k partitions, two downloads interleave:
# neither gets far before the other has bytes, whatever the scheduling. A
# file that shrinks while sent is cut, not padded.
import hashlib
import math
import os
import select
import shutil
import tempfile

from harness import (IO_TIMEOUT, KiB, MiB, ProtocolError, Server, is_, ok, random_bytes, run,
                     split_response)

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
    with Server(root=root, args=["--partition", partition], name="server at " + partition) as srv:
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
    srv = Server(args=["--threads", "1", "--partition", "4k"], name="server with one thread")
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
    with Server(root=root, args=["--partition", "4k"], name="server for a shrinking file") as srv:
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


def main():
    root, digests = make_root()
    try:
        for partition in ("4k", "64k", "whole"):
            check_partition(root, digests, partition)
        test_interleaving()
        test_truncated_while_sent(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


run(main, timeout=180)
