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
#
# Then a stalled response whose next fill still waits in the pool's queue
# (one bulk thread, a slow emulated disk): it takes that fill back (it
# never ran, it is counted withdrawn, neither completed nor cancelled) and
# gives its slots way; read at last, its file is byte-exact. A response
# whose first fill waits so (nothing sent yet, its socket idle) gives way
# too, and asks for its slot again at once.
import time

from harness import MiB, Conn, Server, in_parallel, is_, ok, poll, random_bytes, run

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


def read_all(conns):
    """Each connection's response body, read on all of them at once, as a
    client that reads at last does: read one at a time, the next ones'
    responses could wait for memory their own client's others hold (a
    client's responses never give way to each other)."""
    return in_parallel(lambda i: conns[i].read_response().body, len(conns))


def gives_way():
    data = random_bytes(SIZE, 63)
    args = ["--sendfile", "off", "--max-buffer-memory", "8m", "--file-cache", "off", "--loop-reads", "off",
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

        bodies = read_all(stalled)
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


def withdrawn_fills():
    """Eight stalled downloads of 127.0.0.2 under a 16 MiB budget each
    fill their first slot and then their second, one read at a time on
    the pool's one bulk thread, each read 200 ms: while the second reads
    wait in the gateway's queue, 127.0.0.3 asks."""
    data = random_bytes(SIZE, 64)
    args = ["--sendfile", "off", "--max-buffer-memory", "16m", "--file-cache", "off", "--loop-reads", "off",
            "--send-buffer", "4k", "--threads", "2", "--emulate-disk", "200ms"]
    with Server(files={"big.bin": data}, args=args) as srv:
        stalled = [Conn(srv.port, source="127.0.0.2", rcvbuf=4096) for _ in range(8)]
        for c in stalled:
            c.request("GET", "/big.bin")

        def full_and_queued():
            st = srv.stats()
            return st["memory"]["held"] == 16 * MiB and st["scheduler"]["waiting_bulk"] >= 2
        ok(poll(full_and_queued),
           "127.0.0.2's second slots are reserved and their fills wait in the pool's queue",
           srv.stats()["scheduler"])
        is_(memory(srv)["fills_withdrawn"], 0, "nobody waits: no fill is withdrawn")

        victim = Conn(srv.port, source="127.0.0.3")
        victim.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["fills_withdrawn"] > 0),
           "127.0.0.3 asks: queued fills of 127.0.0.2 are taken back: %d" % memory(srv)["fills_withdrawn"], memory(srv))
        m = memory(srv)
        ok(m["given_back"] >= m["fills_withdrawn"],
           "and their responses gave their slots back", m)
        head = victim.read_head()
        body = victim.read_exact(int(head.header("content-length")))
        ok(head.status == 200 and body == data, "127.0.0.3's download is whole and byte-exact")
        victim.close()

        bodies = read_all(stalled)
        is_(sum(b != data for b in bodies), 0,
            "127.0.0.2's downloads, read at last, are byte-exact (their withdrawn fills ran again)")
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "all memory is given back", memory(srv))
        jobs = srv.stats()["jobs"]["read"]
        is_(jobs["withdrawn"], memory(srv)["fills_withdrawn"],
            "jobs.read.withdrawn counts the same fills")
        is_(jobs["submitted"], jobs["completed"] + jobs["cancelled"] + jobs["withdrawn"],
            "every read submitted completed, was cancelled or withdrawn: none in flight")


def withdrawn_first_fills():
    """Sixteen downloads of 127.0.0.2 (2 MiB: two pieces each, so that
    reading them all at last stays well inside send_timeout) hold the whole
    16 MiB budget, one slot each, their first reads waiting one after another for the pool's
    one bulk thread (300 ms each): 127.0.0.3 asks while most of them have
    sent nothing yet."""
    data = random_bytes(2 * MiB, 65)
    args = ["--sendfile", "off", "--max-buffer-memory", "16m", "--file-cache", "off", "--loop-reads", "off",
            "--send-buffer", "4k", "--threads", "2", "--emulate-disk", "300ms"]
    with Server(files={"big.bin": data}, args=args) as srv:
        stalled = [Conn(srv.port, source="127.0.0.2", rcvbuf=4096) for _ in range(16)]
        for c in stalled:
            c.request("GET", "/big.bin")

        def queued():
            st = srv.stats()
            return st["memory"]["held"] == 16 * MiB and st["scheduler"]["waiting_bulk"] >= 8
        ok(poll(queued), "127.0.0.2 holds the budget, its first reads wait in the pool's queue",
           srv.stats()["scheduler"])
        victim = Conn(srv.port, source="127.0.0.3")
        victim.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["fills_withdrawn"] > 0),
           "127.0.0.3 asks: first fills of 127.0.0.2 are taken back: %d"
           % memory(srv)["fills_withdrawn"], memory(srv))
        head = victim.read_head()
        body = victim.read_exact(int(head.header("content-length")))
        ok(head.status == 200 and body == data, "127.0.0.3's download is whole and byte-exact")
        victim.close()
        bodies = read_all(stalled)
        is_(sum(b != data for b in bodies), 0,
            "127.0.0.2's downloads, read at last, are byte-exact")
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "all memory is given back", memory(srv))


def main():
    gives_way()
    withdrawn_fills()
    withdrawn_first_fills()


run(main)
