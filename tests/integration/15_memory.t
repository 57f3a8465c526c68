#!/usr/bin/env python3
# The buffer budget (max_buffer_memory): what responses hold at once stays
# within it; a response that does not fit waits its turn rather than fail,
# a small one does not wait behind big ones, and every byte arrives.
# Counters from /stats, not timings.
from harness import KiB, MiB, Conn, Server, in_parallel, is_, ok, poll, random_bytes, run

BIG = random_bytes(MiB, 15)
SMALL = b"s" * KiB


def memory(srv):
    return srv.stats()["memory"]


def stalled_whole():
    """Four clients stall 1 MiB `whole` downloads under a 2 MiB budget."""
    args = ["--partition", "whole", "--max-buffer-memory", "2m", "--file-cache", "off",
            "--send-buffer", "4k"]
    with Server(files={"big.bin": BIG, "small.txt": SMALL}, args=args) as srv:
        stalled = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(4)]
        for c in stalled:
            c.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["waiting"] == 2), "two of four stalled downloads wait",
           memory(srv))
        is_(memory(srv)["held"], 2 * MiB, "the other two hold the budget, no more")
        is_(srv.get("/small.txt").body, SMALL, "a small file is served meanwhile (its own lane)")
        bodies = [c.read_response().body for c in stalled]
        is_(sum(b != BIG for b in bodies), 0, "once read, all four are byte-exact")
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "every byte of the budget is given back")
        m = memory(srv)
        ok(m["peak"] <= 2 * MiB + 2 * MiB // 8, "peak within the budget and the small reserve", m)
        ok(m["waits"] >= 2 and m["waiting"] == 0, "the waits are counted, none is left", m)


def many_whole():
    """40 clients download a 2 MiB file in one piece under an 8 MiB budget."""
    data = random_bytes(2 * MiB, 16)
    args = ["--partition", "whole", "--max-buffer-memory", "8m", "--file-cache", "off"]
    with Server(files={"big.bin": data}, args=args) as srv:
        bodies = in_parallel(lambda i: srv.get("/big.bin").body, 40)
        is_(sum(b != data for b in bodies), 0, "40 whole downloads are byte-exact")
        m = memory(srv)
        ok(m["peak"] <= 8 * MiB, "their pieces never held more than the budget", m)
        ok(poll(lambda: memory(srv)["held"] == 0), "and all of it is given back")


def main():
    stalled_whole()
    many_whole()


run(main)
