#!/usr/bin/env python3
# Honest job classes: each pool job is counted under what it does, with its
# cost in bytes. An open is only an open; a directory listing is a `list`
# job; a small file read whole into the cache is a `cache` job; the pieces
# of a file are `read` jobs of at most `partition` bytes each.

from harness import KiB, Server, is_, run

SMALL = b"s" * 3000
BIG = b"b" * (40 * KiB + 1)


def jobs(srv):
    return srv.stats()["jobs"]


def delta(before, after, cls, key="submitted"):
    return after[cls][key] - before[cls][key]


def main():
    srv = Server(files={"small.txt": SMALL, "big.bin": BIG, "dir/a.txt": b"a"},
                 args=["--listing", "on", "--partition", "16k", "--file-cache-max-file", "4k",
                       "--gzip-files", "off", "--gzip-partition", "16k"],
                 name="classes server")
    srv.start()

    b = jobs(srv)
    is_(srv.get("/dir/").status, 200, "a directory without index.html is listed")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "list"), delta(b, a, "read"), delta(b, a, "cache")),
        (1, 1, 0, 0), "a listing: one open, one list job, no read or cache job")

    b = jobs(srv)
    is_(srv.get("/small.txt").body, SMALL, "a small file, first time")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "cache"), delta(b, a, "read")), (1, 1, 0),
        "a cache miss: one open, one cache job, no read")
    is_(delta(b, a, "cache", "cost_bytes"), len(SMALL), "the cache job's cost is the file's size")

    b = jobs(srv)
    is_(srv.get("/small.txt").body, SMALL, "the same file again")
    a = jobs(srv)
    is_(sum(delta(b, a, cls) for cls in a), 0, "a cache hit submits no job at all")

    b = jobs(srv)
    is_(srv.get("/big.bin").body, BIG, "a file over the cache's limit")
    a = jobs(srv)
    is_((delta(b, a, "open"), delta(b, a, "cache"), delta(b, a, "read")), (1, 0, 3),
        "40 KiB + 1 at partition 16k: one open and three read jobs")
    is_(delta(b, a, "read", "cost_bytes"), len(BIG), "the reads cost the file's bytes")
    is_(delta(b, a, "open", "cost_bytes"), 0, "an open reads nothing")

    body = b"z" * (40 * KiB + 1)
    b = jobs(srv)
    is_(srv.request("POST", "/gzip", body=body).status, 200, "a /gzip body of 40 KiB + 1")
    a = jobs(srv)
    is_((delta(b, a, "gzip"), delta(b, a, "gzip", "cost_bytes")), (3, len(body)),
        "at gzip_partition 16k: three deflate jobs, which cost the body's bytes")
    srv.stop()


run(main)
