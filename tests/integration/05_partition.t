#!/usr/bin/env python3
# The chunked file reader: files around the partition size and one of
# 16 MiB + 7 come back byte-identical at --partition 4k, 64k and whole, also
# two at once; /stats shows at least one read job per partition.
import hashlib
import math
import os
import shutil
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MiB, ProtocolError, Server, is_, ok, random_bytes, run  # noqa: E402

BIG = 16 * MiB + 7
SIZES = sorted({0, 1, 4095, 4096, 4097, 65535, 65536, 65537, BIG})


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
        digests[size] = hashlib.sha256(data).hexdigest()
    return root, digests


def sha(data):
    return hashlib.sha256(data).hexdigest()


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
        # Two concurrent downloads of the big file interleave their reads.
        results = [None, None]

        def download(i):
            try:
                results[i] = srv.get("/" + name(BIG))
            except Exception as e:  # reported below
                results[i] = e

        threads = [threading.Thread(target=download, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, resp in enumerate(results):
            ok(not isinstance(resp, Exception) and resp.status == 200
               and sha(resp.body) == digests[BIG],
               "--partition %s: concurrent download %d byte-identical" % (partition, i + 1),
               repr(resp))
        after = srv.stats()["jobs"]["read"]
        if p:
            want = 2 * math.ceil(BIG / p)
            ok(after["completed"] - before["completed"] >= want,
               "--partition %s: at least %d read jobs for two downloads" % (partition, want),
               "read jobs before %r after %r" % (before, after))


def test_truncated_while_sent(root):
    # The file shrinks while it is being sent: the answer cannot keep its
    # Content-Length, so the server must cut the connection, not hang or
    # pad, and go on serving.
    path = os.path.join(root, "shrinks.bin")
    with open(path, "wb") as f:
        f.write(random_bytes(8 * MiB, 6))
    with Server(root=root, args=["--partition", "4k"], name="server for a shrinking file") as srv:
        with srv.conn(rcvbuf=16 * 1024) as conn:
            conn.request("GET", "/shrinks.bin")
            head = conn.read_head()
            is_(head[1], 200, "shrinking file: 200")
            conn.read_exact(64 * 1024)
            os.truncate(path, 100 * 1024)
            try:
                conn.read_exact(8 * MiB - 64 * 1024)
                got = "the full length"
            except ProtocolError:
                got = "closed early"
            except OSError as e:
                got = "%s: %s" % (type(e).__name__, e)
            is_(got, "closed early", "shrinking file: connection closed before Content-Length")
        resp = srv.get("/shrinks.bin")
        is_((resp.status, len(resp.body)), (200, 100 * 1024), "the shrunk file is served whole")
    os.unlink(path)


def main():
    root, digests = make_root()
    try:
        for partition in ("4k", "64k", "whole"):
            check_partition(root, digests, partition)
        test_truncated_while_sent(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


run(main, timeout=180)
