#!/usr/bin/env python3
# The loop's writes are shared by client, not by connection. Client A
# (127.0.0.2) downloads on eight connections, client B (127.0.0.3) on one;
# send_turn = 1 lets one write go per turn of the loop once writes wait, and
# equal slow reads (emulate_disk) make pieces complete together, so writes
# do wait. Counters, not timings: A's eight connections wait in one queue
# (at most two clients ever wait at once), and while both clients waited
# neither was handed more than a quantum and one write beyond the other
# (/stats "send": waiting_clients_max, lag_max). Every body stays
# byte-exact, although a response's writes wait between fills.
from harness import SLOW, KiB, MiB, Server, is_, ok, random_bytes, run

A_CONNS = 8
SIZE = 2 * MiB
PIECE = 64 * KiB
QUANTUM = 64 * KiB  # SHARE_QUANTUM, server/pool/share.h
HEAD = 1 * KiB  # a response head is shorter
ROUNDS = 6  # until both clients' writes waited at once


def round_trip(srv, files):
    """Every connection of A and B asks for its file; all bodies are read."""
    conns = [(srv.conn(source="127.0.0.2"), "a%d.bin" % i) for i in range(A_CONNS)]
    conns.append((srv.conn(source="127.0.0.3"), "b.bin"))
    for c, name in conns:
        c.request("GET", "/" + name)
    bad = 0
    for c, name in conns:
        resp = c.read_response()
        if resp.status != 200 or resp.body != files[name]:
            bad += 1
        c.close()
    return bad


def main():
    files = {"a%d.bin" % i: random_bytes(SIZE, i) for i in range(A_CONNS)}
    files["b.bin"] = random_bytes(SIZE, 99)
    args = ["--send-turn", "1", "--partition", str(PIECE), "--threads", "4",
            "--emulate-disk", "%dms" % (5 * SLOW), "--file-cache", "off"]
    with Server(files=files, args=args) as srv:
        bad = 0
        for _ in range(ROUNDS):
            bad += round_trip(srv, files)
            send = srv.stats()["send"]
            if send["contended"] >= 5:
                break
        is_(bad, 0, "every body is byte-exact")
        ok(send["deferred"] > 0, "writes waited for their turn (%d)" % send["deferred"])
        ok(send["contended"] > 0, "while both clients had writes waiting (%d)" % send["contended"])
        ok(send["waiting_clients_max"] <= 2,
           "A's eight connections waited as one client: at most 2 at once (%d)"
           % send["waiting_clients_max"])
        bound = QUANTUM + PIECE + HEAD
        ok(send["lag_max"] <= bound, "no client got more than a quantum and a write beyond the "
           "other: %d <= %d bytes" % (send["lag_max"], bound))
        metrics = srv.request("GET", "/metrics").body.decode().splitlines()
        ok("unclog_send_waiting_clients_max %d" % send["waiting_clients_max"] in metrics,
           "/metrics has the same counters")


run(main)
