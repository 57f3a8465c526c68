#!/usr/bin/env python3
# One attack from many addresses (issue 39, item 0): every attacking client
# sits about at its fair share, so sharing by client must not hand what is
# shared round and round among them, and a newcomer still gets its part.
#
# Memory: under an 8 MiB budget of 1 MiB slots, three clients (127.0.1.1-3)
# stall four downloads each. Their share is 8/3 MiB: two hold three slots,
# one holds two, and each has responses waiting past its share. A waiter
# past its share makes nobody give way, so nothing is given back while
# only they wait (before, each give went to another attacker, whose slot
# was then given back in turn, without end). A fourth client (127.0.0.4),
# holding nothing, asks: slots are given back to it, its download runs to
# its end byte-exact while the twelve read nothing, and once it is done
# the attackers are still at rest. Counters and bytes, not timings.
#
# Connections: at max_connections = 12, four clients (127.0.2.1-4) hold
# 5, 3, 3 and 1: the two at their share (3) keep opening more, and each
# newcomer is refused (reason share) rather than given a connection of the
# top client, which would then take one back in turn. A fifth client
# (127.0.0.5), holding none, gets in: one of the top's closes. The admin
# door's connections (the test's /stats) count for nobody.
import socket
import time

from harness import MiB, Conn, Server, is_, ok, poll, random_bytes, run

SIZE = 8 * MiB


def memory(srv):
    return srv.stats()["memory"]


def at_rest(srv, what):
    """Nothing given back over a second in which nothing can progress: the
    attackers' waiters are all past their share."""
    before = memory(srv)
    time.sleep(1)
    after = memory(srv)
    keys = ("given_back", "fills_withdrawn", "reread_bytes")
    is_([after[k] for k in keys], [before[k] for k in keys], what)


def memory_not_handed_round():
    data = random_bytes(SIZE, 66)
    # One bulk thread and a slow disk: a fill waits in the pool's queue, where
    # a response over its share takes it back and gives its slot way.
    args = ["--sendfile", "off", "--max-buffer-memory", "8m", "--file-cache", "off", "--loop-reads", "off",
            "--send-buffer", "4k", "--partition", "1m", "--threads", "2",
            "--emulate-disk", "50ms"]
    with Server(files={"big.bin": data}, args=args) as srv:
        stalled = []
        for a in (1, 2, 3):
            for _ in range(4):
                c = Conn(srv.port, source="127.0.1.%d" % a, rcvbuf=4096)
                c.request("GET", "/big.bin")
                stalled.append(c)

        def settled():
            st = srv.stats()
            m, reads = st["memory"], st["jobs"]["read"]
            return (m["held"] == 8 * MiB and m["waiting"] >= 4 and reads["in_flight"] == 0
                    and st["scheduler"]["waiting_bulk"] == 0)
        ok(poll(settled, timeout=20),
           "three clients' stalled downloads hold the whole budget, more of them wait, and "
           "no read is queued or running", srv.stats()["memory"], srv.stats()["jobs"]["read"], srv.stats()["scheduler"])
        at_rest(srv, "the three clients, each at its share, hand nothing round")

        victim = Conn(srv.port, source="127.0.0.4")
        victim.request("GET", "/big.bin")
        head = victim.read_head()
        body = victim.read_exact(int(head.header("content-length")))
        ok(head.status == 200 and body == data,
           "127.0.0.4, holding nothing, downloads its 8 MiB byte-exact while the twelve read "
           "nothing")
        ok(memory(srv)["given_back"] > 0, "slots were given back to it", memory(srv))
        victim.close()
        at_rest(srv, "127.0.0.4 done: the three are at rest again")

        bodies = [c.read_response().body for c in stalled]
        is_(sum(b != data for b in bodies), 0, "the twelve downloads, read at last, are byte-exact")
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "all memory is given back", memory(srv))


def hold(port, source):
    """A connection from SOURCE that sends nothing; None when refused at once."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def answered_503(s):
    """Whether S got the short 503 and was closed."""
    try:
        data = s.recv(4096)
    except (ConnectionResetError, socket.timeout):
        return False
    return data.startswith(b"HTTP/1.1 503")


def connections_not_handed_round():
    args = ["--max-connections", "12", "--header-timeout", "60s"]
    with Server(args=args) as srv:
        holds = {1: 5, 2: 3, 3: 3, 4: 1}  # 12 over 4 clients: a share of 3
        held = [hold(srv.port, "127.0.2.%d" % a) for a, n in holds.items() for _ in range(n)]

        def conns():
            return srv.stats()["connections"]
        ok(poll(lambda: conns()["active"] >= 12),
           "four clients hold 5, 3, 3 and 1 connections", conns())
        refused = 0
        for rnd in range(3):
            for a in (2, 3):
                s = hold(srv.port, "127.0.2.%d" % a)
                refused += answered_503(s)
                s.close()
        st = conns()
        is_(refused, 6, "the newcomers of the two at their share are answered 503, though "
            "127.0.2.1 holds two more")
        is_(st["evicted"], 0, "and none closed another client's connection")
        is_(st["refused_by_reason"]["share"], 6, "refused as at their share")
        victim = hold(srv.port, "127.0.0.5")
        victim.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = victim.recv(4096)
        ok(data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.1 404"),
           "127.0.0.5, holding none, is served", data[:40])
        is_(conns()["evicted"], 1, "one attacker's connection closed for it")
        victim.close()
        for s in held:
            s.close()


def main():
    memory_not_handed_round()
    connections_not_handed_round()


run(main)
