#!/usr/bin/env python3
# The loop's time is shared by client (turn_share). Client A (127.0.0.2)
# has a request ready on each of 32 connections and client B (127.0.0.3)
# one, all in the same poll: the server is stopped (SIGSTOP) while they are
# sent, B's last, so the kernel hands the loop B's input after all of A's.
# The file is cached, so each request is answered as it is parsed. With a
# share of 1 us each client gets one request per turn: B's response is the
# second written (access log order), and A's others waited for later
# turns (/stats "turns" counters). Without a share (0) B is answered after
# every one of A's, which is what the share prevents. Orders and counters,
# not timings.
import os
import signal

from harness import Server, is_, ok, poll, run

A_CONNS = 32
BODY = b"x" * 1024


def b_position(srv):
    """Where B's line is among the requests of the measured round (1-based)."""
    conns = [srv.conn(source="127.0.0.2") for _ in range(A_CONNS)]
    b = srv.conn(source="127.0.0.3")
    # each connection accepted and idle, and the file cached
    warm = [c.roundtrip("GET", "/f.bin").status for c in conns + [b]]
    is_(warm.count(200), A_CONNS + 1, "the warm-up round is answered")
    poll(lambda: log_lines(srv) >= A_CONNS + 1)
    before = log_lines(srv)
    os.kill(srv.pid, signal.SIGSTOP)
    try:
        for c in conns:
            c.request("GET", "/f.bin")
        b.request("GET", "/f.bin")
    finally:
        os.kill(srv.pid, signal.SIGCONT)
    bodies = [c.read_response().body for c in conns + [b]]
    ok(all(body == BODY for body in bodies), "every body of the round is whole")
    for c in conns + [b]:
        c.close()
    poll(lambda: log_lines(srv) >= before + A_CONNS + 1)
    with open(srv.access_log) as f:
        round_lines = f.read().splitlines()[before:before + A_CONNS + 1]
    clients = [line.split()[0] for line in round_lines]
    is_(clients.count("127.0.0.3"), 1, "B's request is in the round's log")
    return clients.index("127.0.0.3") + 1


def log_lines(srv):
    with open(srv.access_log) as f:
        return sum(1 for _ in f)


def main():
    with Server(files={"f.bin": BODY}, args=["--turn-share", "1"]) as srv:
        pos = b_position(srv)
        ok(pos <= 3, "with a share B's request is answered 2nd, not after A's %d (it came %d)"
           % (A_CONNS, pos))
        turns = srv.stats()["turns"]
        is_(turns["share_us"], 1, "/stats turns.share_us")
        ok(turns["deferred"] >= A_CONNS - 2,
           "A's other requests waited for later turns (%d deferred)" % turns["deferred"])
        ok(turns["turns"] >= A_CONNS - 2, "one turn each (%d turns)" % turns["turns"])
        is_(turns["waiting"], 0, "nothing waits afterwards")
        metrics = srv.get("/metrics").body.decode().splitlines()
        ok("unclog_turn_requests_deferred_total %d" % turns["deferred"] in metrics,
           "/metrics has the same counter")

    with Server(files={"f.bin": BODY}, args=["--turn-share", "0"]) as srv:
        pos = b_position(srv)
        is_(pos, A_CONNS + 1, "without a share B waits for all of A's requests")
        is_(srv.stats()["turns"]["deferred"], 0, "and nothing is deferred")


run(main)
