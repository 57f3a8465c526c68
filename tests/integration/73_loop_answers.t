#!/usr/bin/env python3
# A file of up to 256 KiB whose pages are in the page cache is read on the
# loop and answered from memory, without a pool read and the pass back it
# costs (a victim's 96 KiB answers under a small-file flood waited for
# them); the copy its connection keeps until the client has it is lent
# by the budget: it shows in memory.held and in its client's row of the
# top clients (the one ledger) while the client does not read, and is given
# back when the answer is in. With no room in the budget the file goes
# through the pump as before. Counters and bytes, no timing.
from harness import KiB, Server, gunzip, is_, ok, poll, random_bytes, run, text_bytes

STALLER = "127.0.0.2"
FILES = {"a.bin": random_bytes(96 * KiB, 731), "b.bin": random_bytes(200 * KiB, 732),
         "c.bin": random_bytes(256 * KiB, 733)}


def held(srv):
    st = srv.stats()
    rows = {r["client"]: r["memory_held"] for r in st["connections"]["top_clients"].values()}
    return st["memory"]["held"], rows.get(STALLER)


def main():
    with Server(files=FILES, args=["--send-buffer", "16k"]) as srv:
        for name in FILES:  # the page cache has them: the test wrote them
            srv.get("/" + name)
        before = srv.stats()
        exact = 0
        for _ in range(3):
            for name, data in FILES.items():
                r = srv.get("/" + name)
                exact += r.status == 200 and r.body == data
        after = srv.stats()
        is_(exact, 9, "96, 200 and 256 KiB files, three times each: byte-exact")
        is_(after["jobs"]["read"]["submitted"] - before["jobs"]["read"]["submitted"], 0,
            "no pool read for them")
        ok(after["loop_reads"]["served"] - before["loop_reads"]["served"] >= 9,
           "read on the loop (loop_reads.served +%d)"
           % (after["loop_reads"]["served"] - before["loop_reads"]["served"]))
        is_(after["memory"]["held"], 0, "answered: the budget holds nothing")

        # A client that does not read: its answer waits, lent by the budget.
        c = srv.conn(source=STALLER, rcvbuf=4096)
        c.request("GET", "/c.bin")
        seen = []

        def lent():
            seen[:] = held(srv)
            return seen[0] >= 256 * KiB

        ok(poll(lent), "a 256 KiB answer its client does not read is lent by the budget: "
           "memory.held %s" % (seen,))
        is_(seen[1], seen[0], "  and counted in %s's row of the top clients" % STALLER)
        r = c.read_response()
        ok(r.status == 200 and r.body == FILES["c.bin"], "  read at last: byte-exact")
        ok(poll(lambda: held(srv)[0] == 0), "  and given back", held(srv))
        c.close()

    # A file gzipped on the fly reads its file: it is never answered from
    # a body read on the loop (which would go uncompressed).
    text = text_bytes(200 * KiB)
    with Server(files={"t.txt": text}, args=["--gzip-static", "off"]) as srv:
        srv.get("/t.txt")
        r = srv.get("/t.txt", headers={"Accept-Encoding": "gzip"})
        ok(r.header("Content-Encoding") == "gzip" and gunzip(r.body) == text,
           "a 200 KiB text file asked with gzip: gzipped on the fly", r.header("Content-Encoding"))

    with Server(files=FILES, args=["--max-buffer-memory", "128k"]) as srv:
        srv.get("/c.bin")
        before = srv.stats()["jobs"]["read"]["submitted"]
        r = srv.get("/c.bin")
        ok(r.status == 200 and r.body == FILES["c.bin"],
           "no room in the budget for 256 KiB: still byte-exact")
        ok(srv.stats()["jobs"]["read"]["submitted"] > before, "  through the pump's pool reads")


run(main)
