#!/usr/bin/env python3
# The loop's writes are shared by client, not by connection, and neither
# client is held back until the other is done: checked from the clients'
# side, by the order in which their bytes arrive.
#
# Client A (127.0.0.2) on eight connections and client B (127.0.0.3) on four
# each pipeline many requests for a small cached file, at once. The answers
# come from memory, so nothing but the sender decides whose write goes
# next, and send_turn = 1 lets one write go per pass of the loop: the two
# clients' writes wait together. (Large files would not do: the pool and
# the sockets pace them, their writes seldom wait long, and a sender that
# favoured one client would hardly show. B has four connections because
# one connection has one answer waiting at a time: its client's bucket
# empties after each write, and deficit round robin then gives it one write
# a round against A's quantum.) One thread reads every socket as bytes come
# (at most READ_CAP a read, so that a reader which falls behind reads the
# connections alike and cannot make one client look held back), and notes
# after each read how many bytes A and B have. Shared by client, B (half of
# A's bytes to fetch) is done first and A has about as much as B then; a
# sender that served one client to the end would leave the other with next
# to nothing when the first finished. Counts of bytes and their order,
# never a time.
#
# Then large files: A on eight connections and B on one download 2 MiB each
# through the pump while their writes wait between fills; every body stays
# byte-exact. Last, /stats "send" as the server sees it, a secondary check:
# A's connections waited as one client (waiting_clients_max), and lag_max,
# the share's own figure of how far one waiting client got ahead of another.
import select

from harness import KiB, MiB, Server, build_request, is_, note, ok, parse_head, random_bytes, run

A_CONNS = 8
B_CONNS = 4
REQS = 500  # pipelined requests on each connection
SMALL = 10  # bytes of each small file: a write is about its head
READ_CAP = 16 * KiB
QUANTUM = 64 * KiB  # SHARE_QUANTUM, server/http/share.h
HEAD = 1 * KiB  # a response head is shorter
LARGE = 2 * MiB
PIECE = 64 * KiB


def answer_length(srv, name):
    """The bytes of one answer to GET /NAME, as they come: the same for
    each (the head's fields have fixed lengths)."""
    with srv.conn() as c:
        c.request("GET", "/" + name)
        while b"\r\n\r\n" not in c.buf:
            if not c.fill():
                raise RuntimeError("closed before the head of /" + name)
        return c.buf.index(b"\r\n\r\n") + 4 + len(c.read_response().body)


def race(srv, files, length):
    """A's and B's connections pipeline REQS requests each, all at once.
    Returns the list of (A's bytes, B's bytes) after each read, each
    client's total, and the connections whose bytes were not REQS exact
    answers."""
    conns = [(srv.conn(source="127.0.0.2"), "a.bin") for _ in range(A_CONNS)]
    conns += [(srv.conn(source="127.0.0.3"), "b.bin") for _ in range(B_CONNS)]
    for c, name in conns:
        c.send(build_request("GET", "/" + name) * REQS)
    want = [length[name] * REQS for _, name in conns]
    got = [bytearray() for _ in conns]
    index = {c.sock: i for i, (c, _) in enumerate(conns)}
    reading = set(index)
    have = {"a.bin": 0, "b.bin": 0}
    order = []
    while reading:
        ready, _, _ = select.select(list(reading), [], [], conns[0][0].timeout)
        if not ready:
            raise RuntimeError("no byte came for %ds" % conns[0][0].timeout)
        for sock in ready:
            i = index[sock]
            data = sock.recv(min(READ_CAP, want[i] - len(got[i])))
            if not data:
                raise RuntimeError("connection %d closed after %d bytes" % (i, len(got[i])))
            got[i] += data
            have[conns[i][1]] += len(data)
            order.append((have["a.bin"], have["b.bin"]))
            if len(got[i]) == want[i]:
                reading.discard(sock)
    bad = []
    for i, (c, name) in enumerate(conns):
        c.close()
        if not exact_answers(bytes(got[i]), files[name]):
            bad.append(i)
    totals = (sum(w for w, (_, n) in zip(want, conns) if n == "a.bin"),
              sum(w for w, (_, n) in zip(want, conns) if n == "b.bin"))
    return order, totals, bad


def exact_answers(data, body):
    """Whether DATA is REQS answers 200 of BODY and nothing else."""
    at = 0
    for _ in range(REQS):
        end = data.find(b"\r\n\r\n", at)
        if end < 0:
            return False
        resp = parse_head(data[at:end])
        at = end + 4 + len(body)
        if resp.status != 200 or data[end + 4:at] != body:
            return False
    return at == len(data)


def large_round(srv, files):
    """Every connection of A and B asks for its large file; all bodies are read."""
    conns = [(srv.conn(source="127.0.0.2"), "la%d.bin" % i) for i in range(A_CONNS)]
    conns.append((srv.conn(source="127.0.0.3"), "lb.bin"))
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
    files = {"a.bin": random_bytes(SMALL, 1), "b.bin": random_bytes(SMALL, 2)}
    files.update({"la%d.bin" % i: random_bytes(LARGE, 10 + i) for i in range(A_CONNS)})
    files["lb.bin"] = random_bytes(LARGE, 99)
    args = ["--send-turn", "1", "--partition", str(PIECE), "--threads", "4"]
    with Server(files=files, args=args) as srv:
        # The first answer puts each small file in the cache.
        length = {name: answer_length(srv, name) for name in ("a.bin", "b.bin")}
        order, (a_total, b_total), bad = race(srv, files, length)
        is_(bad, [], "every pipelined answer is byte-exact")
        b_at_a_done = next(b for a, b in order if a == a_total)
        a_at_b_done = next(a for a, b in order if b == b_total)
        note("when A's last byte came B had %d of %d; when B's came A had %d of %d (%d reads)"
             % (b_at_a_done, b_total, a_at_b_done, a_total, len(order)))
        ok(b_at_a_done >= b_total // 2,
           "B was not held back until A was done: B had %d of its %d bytes when A's last came"
           % (b_at_a_done, b_total))
        ok(a_at_b_done >= b_total // 2,
           "A was not held back until B was done: A had %d bytes, at least half of B's %d, when "
           "B's last came" % (a_at_b_done, b_total))

        is_(large_round(srv, files), 0, "every large body is byte-exact")

        send = srv.stats()["send"]
        ok(send["deferred"] > 0, "writes waited for their turn (%d)" % send["deferred"])
        ok(send["contended"] > 0, "while both clients had writes waiting (%d)" % send["contended"])
        ok(send["waiting_clients_max"] <= 2,
           "A's eight connections waited as one client: at most 2 at once (%d)"
           % send["waiting_clients_max"])
        bound = QUANTUM + PIECE + HEAD
        ok(send["lag_max"] <= bound, "the share's own figure: no client got more than a quantum "
           "and a write beyond the other: %d <= %d bytes" % (send["lag_max"], bound))
        metrics = srv.request("GET", "/metrics").body.decode().splitlines()
        ok("unclog_send_waiting_clients_max %d" % send["waiting_clients_max"] in metrics,
           "/metrics has the same counters")


run(main)
