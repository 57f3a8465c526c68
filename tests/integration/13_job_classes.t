#!/usr/bin/env python3
# Honest job classes: each pool job is counted under what it does, with its
# cost in bytes. An open reads the body of a file that fits the first piece
# (for the response, or whole into the cache), its cost what it read: a
# small file costs one job; a directory listing is a `list` job; the pieces
# of a larger file are `read` jobs of at most `partition` bytes each.

from harness import KiB, Server, is_, run

SMALL = b"s" * 3000
BIG = b"b" * (40 * KiB + 1)


def jobs(srv):
    return srv.stats()["jobs"]


def delta(before, after, cls, key="submitted"):
    return after[cls][key] - before[cls][key]


def main():
    srv = Server(files={"small.txt": SMALL, "big.bin": BIG, "dir/a.txt": b"a"},
                 args=["--loop-reads", "off", "--listing", "on", "--partition", "16k", "--file-cache-max-file", "4k",
                       "--gzip-files", "off", "--gzip-partition", "16k"],
                 name="classes server")
    srv.start()

    b = jobs(srv)
    is_(srv.get("/dir/").status, 200, "a directory without index.html is listed")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "list"), delta(b, a, "read")),
        (1, 1, 0), "a listing: one open, one list job, no read job")

    b = jobs(srv)
    is_(srv.get("/small.txt").body, SMALL, "a small file, first time")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "read")), (1, 0),
        "a cache miss: one open job, which read the body for the cache, no read")
    is_(delta(b, a, "open", "cost_bytes"), len(SMALL), "the open's cost is the file's size")

    b = jobs(srv)
    is_(srv.get("/small.txt").body, SMALL, "the same file again")
    a = jobs(srv)
    is_(sum(delta(b, a, cls) for cls in a), 0, "a cache hit submits no job at all")

    b = jobs(srv)
    is_(srv.get("/big.bin").body, BIG, "a file over the cache's limit")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "read")), (1, 3),
        "40 KiB + 1 at partition 16k: one open and three read jobs")
    is_(delta(b, a, "read", "cost_bytes"), len(BIG), "the reads cost the file's bytes")
    is_(delta(b, a, "open", "cost_bytes"), 0, "the open of a file over the first piece reads nothing")

    body = b"z" * (40 * KiB + 1)
    b = jobs(srv)
    is_(srv.request("POST", "/gzip", body=body).status, 200, "a /gzip body of 40 KiB + 1")
    a = jobs(srv)
    is_((delta(b, a, "gzip"), delta(b, a, "gzip", "cost_bytes")), (3, len(body)),
        "at gzip_partition 16k: three deflate jobs, which cost the body's bytes")
    srv.stop()

    # The file cache off: a small file's open reads its body for the response.
    srv = Server(files={"small.txt": SMALL, "big.bin": BIG},
                 args=["--loop-reads", "off", "--partition", "16k", "--file-cache", "off"], name="no-cache server")
    srv.start()
    b = jobs(srv)
    is_(srv.get("/small.txt").body, SMALL, "a small file, the file cache off")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "read"), delta(b, a, "open", "cost_bytes")),
        (1, 0, len(SMALL)), "one job, the open, which read the body: one crossing, not two")
    b = jobs(srv)
    is_(srv.get("/big.bin").body, BIG, "a file over the first piece, the file cache off")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "read"), delta(b, a, "open", "cost_bytes")), (1, 3, 0),
        "one open that read nothing, then three reads of 16k at most")
    b = jobs(srv)
    is_(srv.head("/small.txt").status, 200, "HEAD of the small file")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "read"), delta(b, a, "open", "cost_bytes")), (1, 0, 0),
        "a HEAD: one open, no body read")
    srv.stop()


run(main)
