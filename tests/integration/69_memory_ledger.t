#!/usr/bin/env python3
# One ledger of buffer memory (issue #40): /stats' top clients show, as
# memory_held, what the budget holds for each client, whichever call took
# it. The file handler reserves the first piece of a small file with its
# open (the body is read in the same pool job, server_memory_try): while
# those jobs run (a slow emulated disk keeps them on the pool) the client
# that asked (127.0.0.2, two connections) shows them in its row, and its
# row is all the budget holds; the observer reads /stats on the admin door
# from 127.0.0.3 and is no client of the table. When the answers are in,
# byte-exact, both are 0 again. Counters and bytes, no timing threshold
# (the emulated disk only keeps the jobs long enough to be seen).
import json

from harness import KiB, Server, is_, ok, poll, random_bytes, run

ASKER, OBSERVER = "127.0.0.2", "127.0.0.3"
DATA = random_bytes(10 * KiB, 68)


def look(srv):
    """What the budget holds and the top clients' rows, from one /stats."""
    with srv.admin_conn(source=OBSERVER) as c:
        resp = c.roundtrip("GET", "/stats")
    assert resp.status == 200, resp
    st = json.loads(resp.body)
    rows = {r["client"]: r["memory_held"] for r in st["connections"]["top_clients"].values()}
    return st["memory"]["held"], rows


def main():
    args = ["--file-cache", "off", "--loop-reads", "off", "--emulate-disk", "4s"]
    with Server(files={"small.bin": DATA}, args=args) as srv:
        conns = [srv.conn(source=ASKER) for _ in range(2)]
        for c in conns:
            c.request("GET", "/small.bin")
        seen = []

        def held_now():
            seen[:] = look(srv)
            return seen[0] >= 2 * len(DATA)

        ok(poll(held_now), "the two opens hold their first pieces (%s)" % (seen,))
        held, rows = seen
        is_(rows.get(ASKER), held,
            "top_clients: %s's memory_held is what the budget holds (%d)" % (ASKER, held))
        for c in conns:
            r = c.read_response()
            ok(r.status == 200 and r.body == DATA, "the answer is byte-exact")
        ok(poll(lambda: look(srv)[0] == 0), "answered: the budget holds nothing", look(srv))
        is_(look(srv)[1].get(ASKER), 0, "nor does %s's row" % ASKER)
        for c in conns:
            c.close()


run(main)
