#!/usr/bin/env python3
# No byte held hostage by an idle connection (issue #39): an answer from
# memory (here a cached file) is copied into its connection for the write,
# outside the buffer budget; once it is written, a keep-alive connection
# waiting for its next request keeps no copy larger than CONN_BODY_KEEP
# (4 KiB). 200 clients on distinct addresses each fetch a 512 KiB cached
# file, read it byte-exact and stay connected: the server's resident memory
# grows by their connections (about 40 KiB each), not by 512 KiB each
# (100 MiB in all when the copies stayed). Bytes, no timing. Under ASan the
# freed copies would sit in its quarantine, resident: it is turned off here.
import os

from harness import ASAN, KiB, Server, ok, proc_rss_kib, random_bytes, run

if ASAN:
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0").lstrip(":")

CLIENTS = 200
DATA = random_bytes(512 * KiB, 72)


def main():
    args = ["--file-cache-max-file", "1m", "--max-connections", "1000"]
    with Server(files={"big.bin": DATA}, args=args) as srv:
        with srv.conn() as c:  # the cache takes the file
            r = c.roundtrip("GET", "/big.bin")
            ok(r.status == 200 and r.body == DATA, "warm-up answer byte-exact")
        before = proc_rss_kib(srv.pid)
        conns, exact = [], 0
        for i in range(CLIENTS):
            c = srv.conn(source="127.0.%d.%d" % (2 + i // 250, 1 + i % 250))
            r = c.roundtrip("GET", "/big.bin")
            exact += r.status == 200 and r.body == DATA and r.header("Connection") != "close"
            conns.append(c)
        ok(exact == CLIENTS, "%d of %d answers byte-exact, kept alive" % (exact, CLIENTS))
        grown = proc_rss_kib(srv.pid) - before
        per = grown / CLIENTS
        ok(per < 256, "idle keep-alive connections hold no answer's copy: resident memory grew "
           "%d KiB, %.0f KiB a connection (a kept copy: 512)" % (grown, per))
        for c in conns:
            c.close()


run(main)
