#!/usr/bin/env python3
# Memory that gives way (issue 39, item 1). Under an 8 MiB budget, one
# client (127.0.0.2) stalls ten downloads of an 8 MiB file: their sockets
# take nothing more, and their filled slots hold the whole budget. While
# nobody else waits, nothing is taken back (the budget is work-conserving).
# When another client (127.0.0.3) asks for the same file, the stalled
# responses give their unsent slots back (their client is over its fair
# share) and 127.0.0.3's download runs to its end while the ten still read
# nothing; when they read, their files are byte-exact: what was given back
# was read again. Counters and bytes, not timings.
import time

from harness import MiB, Conn, Server, is_, ok, poll, random_bytes, run

SIZE = 8 * MiB
STALLED = 10


def memory(srv):
    return srv.stats()["memory"]


def ledger(srv):
    """The memory the top-clients table shows by client, and what the
    budget holds: one ledger, so the rows add up to it."""
    stats = srv.stats()
    rows = stats["connections"]["top_clients"].values()
    return {r["client"]: r["memory_held"] for r in rows}, stats["memory"]["held"]


def main():
    data = random_bytes(SIZE, 63)
    args = ["--max-buffer-memory", "8m", "--file-cache", "off", "--loop-reads", "off",
            "--send-buffer", "4k"]
    with Server(files={"big.bin": data}, args=args) as srv:
        stalled = [Conn(srv.port, source="127.0.0.2", rcvbuf=4096) for _ in range(STALLED)]
        for c in stalled:
            c.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["held"] == 8 * MiB and memory(srv)["waiting"] > 0),
           "127.0.0.2's stalled downloads hold the whole budget, and more of them wait",
           memory(srv))
        rows, held = ledger(srv)
        is_(rows.get("127.0.0.2"), held, "top_clients: 127.0.0.2 holds what the budget holds")
        is_(memory(srv)["given_back"], 0,
            "work-conserving: with no other client waiting, nothing is given back")

        victim = Conn(srv.port, source="127.0.0.3")
        start = time.monotonic()
        victim.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["given_back"] > 0),
           "127.0.0.3 asks: stalled slots of 127.0.0.2 are given back", memory(srv))
        head = victim.read_head()
        first = time.monotonic() - start
        body = victim.read_exact(int(head.header("content-length")))
        print("# 127.0.0.3's head came after %.3f s, its whole body after %.3f s"
              % (first, time.monotonic() - start))
        is_(head.status, 200, "127.0.0.3's download is answered")
        ok(body == data, "and its 8 MiB are byte-exact, all while 127.0.0.2 read nothing")
        victim.close()

        bodies = [c.read_response().body for c in stalled]
        is_(sum(b != data for b in bodies), 0,
            "127.0.0.2's ten downloads, read at last, are byte-exact (read again where given back)")
        m = memory(srv)
        ok(m["reread_bytes"] > 0, "bytes were read again: %d" % m["reread_bytes"], m)
        ok(m["given_back_bytes"] >= m["given_back"] * MiB // 2,
           "given_back_bytes counts the slots' bytes", m)
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "all memory is given back", memory(srv))
        metrics = srv.request("GET", "/metrics").body.decode()
        ok("unclog_buffer_memory_given_back_total %d" % m["given_back"] in metrics.splitlines(),
           "/metrics has the same counter")


run(main)
