#!/usr/bin/env python3
# Connections are shared by client (an address: 127.0.0.2 and 127.0.0.3 are
# two), work-conserving. A lone client may hold every connection; at
# max_connections the client holding the most gives way: its longest idle
# connection (kept alive between requests, or its request head late: silent
# or slow for a tenth of header_timeout), else a busy one, closes for a
# newcomer from another client; its own new connection gets 503 (reason
# top_client). Out of fds the same client gives up an idle connection for
# whoever waits. The watcher asks /stats on the admin door, whose
# connections count for nobody. Counters and which connection closed, not
# timings.
import json
import select
import shutil

from harness import (Conn, Server, diag, is_, ok, poll, run, skip_test)

FILES = {"x.txt": b"hello"}
PATIENT = {"keepalive_timeout": "60s", "header_timeout": "60s"}
HOG, NEWCOMER, WATCH, OTHER = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"


def stats(conn):
    resp = conn.roundtrip("GET", "/stats")
    assert resp.status == 200, resp
    return json.loads(resp.body)["connections"]


def top(st, client):
    """client's row of /stats' top_clients (its rank added), or None."""
    for rank, row in st["top_clients"].items():
        if row["client"] == client:
            return dict(row, rank=rank)
    return None


def closed_by_server(conn, wait=0.0):
    """Whether the server closed conn (EOF readable within wait seconds)."""
    r, _, _ = select.select([conn.sock], [], [], wait)
    return bool(r) and not conn.fill()


def newcomer_takes_oldest(srv, hog, kind):
    """A newcomer from another address is served, and of the hog's
    connections only the oldest (hog[0], KIND) closes for it."""
    newcomer = srv.conn(source=NEWCOMER)
    resp = newcomer.roundtrip("GET", "/x.txt")
    is_((resp.status, resp.body), (200, b"hello"),
        "a newcomer from another address is served, not refused")
    ok(poll(lambda: closed_by_server(hog[0], 0.2)),
       "the hog's longest %s connection was closed for it" % kind)
    is_([i for i, c in enumerate(hog[1:], 1) if closed_by_server(c)], [],
        "and none other of the hog's")
    return newcomer


def test_hog_gives_way():
    limit = 21
    with Server(files=FILES, conf=dict(PATIENT, max_connections=limit)) as srv:
        watch = srv.admin_conn(source=WATCH)  # asks /stats on one connection (the admin door's) throughout
        stats(watch)
        hog = [srv.conn(source=HOG) for _ in range(limit)]
        got = [c.roundtrip("GET", "/x.txt").status for c in hog]
        is_(got, [200] * limit, "the hog's %d connections are served" % limit)
        ok(poll(lambda: (top(stats(watch), HOG) or {}).get("idle") == limit),
           "the hog holds %d idle keep-alive connections" % limit)
        st = stats(watch)
        is_((st["active"], top(st, HOG)["rank"]), (limit + 1, "1"),
            "the server is at max_connections, the hog at the top of top_clients")

        newcomer = newcomer_takes_oldest(srv, hog, "idle")
        st = stats(watch)
        is_((st["evicted"], st["evicted_by_reason"]["max_connections"], st["refused"]),
            (1, 1, 0), "/stats: one idle connection evicted for the limit, nothing refused")
        row = top(st, HOG)
        is_((row["connections"], row["idle"], row["evicted"]), (limit - 1, limit - 1, 1),
            "the hog holds one connection fewer, its eviction counted")

        extra = Conn(srv.port, source=HOG)
        resp = extra.roundtrip("GET", "/x.txt")
        is_(resp.status, 503, "the hog's own new connection is refused with 503")
        ok(not extra.fill(), "and closed")
        extra.close()
        st = stats(watch)
        is_((st["refused_by_reason"]["top_client"], st["refused_by_reason"]["full"],
             st["evicted"], top(st, HOG)["refused"]), (1, 0, 1, 1),
            "/stats: refused for top_client (the hog's), no idle connection evicted for it")
        ok(not any(closed_by_server(c) for c in hog[1:]), "every other hog connection stays open")

        # The hog's connections all busy (a request head begun on each, not
        # late yet): the hog still gives way, its connection busy longest.
        for c in hog[1:]:
            c.send(b"GET /x.txt HTTP/1.1\r\n")
        ok(poll(lambda: top(stats(watch), HOG)["idle"] == 0), "the hog's connections are busy")
        other = Conn(srv.port, source=OTHER)
        is_(other.roundtrip("GET", "/x.txt").status, 200,
            "with no idle connection to give, a newcomer is served all the same")
        st = stats(watch)
        is_((st["evicted_by_reason"]["max_connections"], st["evicted_by_class"]["busy"],
             st["evicted_by_class"]["idle"], st["refused_by_reason"]["full"]), (2, 1, 1, 0),
            "/stats: a busy connection evicted, nothing refused as full")
        gone = [c for c in hog[1:] if closed_by_server(c, 0.2)]
        is_(len(gone), 1, "one of the hog's busy connections closed for it")
        for c in hog[1:]:
            if c not in gone:
                c.send(b"Host: x\r\n\r\n")
                assert c.read_response().status == 200
        is_(newcomer.roundtrip("GET", "/x.txt").status, 200, "the newcomer is served on")
        for c in hog + [newcomer, watch, other]:
            c.close()


def test_late_heads():
    """Connections whose request head is late (a tenth of header_timeout: 1 s
    here) give way as kept-alive ones do, whether silent or sending the head
    slowly: else a client that only connects, or a slowloris, would hold
    every slot for header_timeout."""
    limit = 21
    conf = dict(PATIENT, max_connections=limit, header_timeout="10s")
    with Server(files=FILES, conf=conf) as srv:
        watch = srv.admin_conn(source=WATCH)
        stats(watch)
        hog = []
        for i in range(limit):  # one at a time: the server accepts them in this order
            hog.append(srv.conn(source=HOG))
            n = len(hog)
            poll(lambda: (top(stats(watch), HOG) or {}).get("connections") == n)
            if i % 2:
                hog[-1].send(b"GET /x.txt HTTP/1.1\r\n")  # a head begun, never ended
        row = poll(lambda: top(stats(watch), HOG)["idle"] == limit and top(stats(watch), HOG))
        is_((row and row["connections"], row and row["idle"]), (limit, limit),
            "the hog's %d connections, silent or with a head begun, are idle once late"
            % limit)

        newcomer = newcomer_takes_oldest(srv, hog, "late")
        st = stats(watch)
        is_((st["evicted_by_reason"]["max_connections"], st["refused"]), (1, 0),
            "/stats: one connection evicted for the limit, nothing refused")

        hog[1].send(b"Host: x\r\n\r\n")
        is_(hog[1].read_response().status, 200, "a late head that ends is answered")
        hog[2].request("GET", "/x.txt")
        is_(hog[2].read_response().status, 200, "a silent connection that asks is answered")
        for c in hog + [newcomer, watch]:
            c.close()


SLOW_CONF = dict(PATIENT, header_timeout="3600s", body_timeout="60s", send_timeout="60s",
                 send_buffer="8k", send_lowat="8k")
BIG = 8 * 1024 * 1024


def slow_pair(srv):
    """A body that stops after its first bytes and a reader that reads
    nothing, both of the hog: (body, reader)."""
    body = srv.conn(source=HOG)
    body.send(b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n0123456789")
    reader = Conn(srv.port, source=HOG, rcvbuf=4096)
    reader.request("GET", "/big.bin")
    return body, reader


def test_slow_give_way():
    """A body and a response that move below min_rate give way before the
    hog's busy connections (heads begun, not late), for newcomers of
    another address."""
    limit = 10
    srv = Server(files=FILES, conf=dict(SLOW_CONF, max_connections=limit))
    srv.sparse_file("big.bin", BIG)
    with srv:
        watch = srv.admin_conn(source=WATCH)
        stats(watch)
        heads = []
        for _ in range(limit - 2):
            heads.append(srv.conn(source=HOG))
            heads[-1].send(b"GET /x.txt HTTP/1.1\r\n")
        body, reader = slow_pair(srv)
        st = poll(lambda: (lambda st: st["by_class"]["slow"] == 2 and st)(stats(watch)), 30)
        # Busy: the heads (the watcher's connection is no client's); active:
        # the watcher's too.
        ok(st and st["active"] == limit + 1 and st["by_class"]["busy"] == limit - 2,
           "the hog's body and reader are slow, its heads busy, the server full", repr(st))
        newcomers = []
        for _ in range(2):
            newcomers.append(Conn(srv.port, source=NEWCOMER))
            resp = newcomers[-1].roundtrip("GET", "/x.txt")
            is_(resp.status, 200, "a newcomer from another address is served")
        st = stats(watch)
        is_((st["evicted_by_class"]["slow"], st["evicted_by_class"]["busy"], st["refused"]),
            (2, 0, 0), "/stats: the two slow connections evicted, no busy one, nothing refused")
        is_((body.read_to_end()[1], reader.read_to_end()[1]), ("reset", "reset"),
            "the slow body and reader were reset")
        is_([i for i, c in enumerate(heads) if closed_by_server(c)], [],
            "every busy head stays open")
        heads[0].send(b"Host: x\r\n\r\n")
        is_(heads[0].read_response().status, 200, "and is answered")
        for c in heads + newcomers + [body, reader, watch]:
            c.close()


def test_lone_slow_client():
    """While the server has room nothing gives way: a lone slow client keeps
    its connections."""
    srv = Server(files=FILES, conf=dict(SLOW_CONF, max_connections=100))
    srv.sparse_file("big.bin", BIG)
    with srv:
        body, reader = slow_pair(srv)
        watch = srv.admin_conn(source=WATCH)
        st = poll(lambda: (lambda st: st["by_class"]["slow"] == 2 and st)(stats(watch)), 30)
        ok(st, "the lone client's body and reader are slow")
        others = [srv.conn(source=HOG) for _ in range(20)]
        got = [c.roundtrip("GET", "/x.txt").status for c in others]
        is_(got, [200] * 20, "its 20 more connections are served")
        st = stats(watch)
        is_((st["evicted"], st["refused"], st["by_class"]["slow"]), (0, 0, 2),
            "/stats: nothing evicted nor refused, both slow ones kept")
        is_((body.wait_closed(0.1), reader.eof), ("open", False), "both still open")
        for c in others + [body, reader, watch]:
            c.close()


def test_lone_client():
    limit = 20
    with Server(files=FILES, conf=dict(PATIENT, max_connections=limit)) as srv:
        # And one more on the admin door, to ask /stats on: it counts for nobody.
        conns = [Conn(srv.port, source=HOG) for _ in range(limit)]
        conns.append(srv.admin_conn(source=HOG))
        got = [c.roundtrip("GET", "/x.txt").status for c in conns[:-1]] + [stats(conns[-1])]
        is_(got[:-1], [200] * limit, "a lone client opening max_connections (%d) is "
            "served on each" % limit)
        got = [c.roundtrip("GET", "/x.txt").status for c in conns[:-1]] + [stats(conns[-1])]
        is_(got[:-1], [200] * limit, "and again on each, kept alive, and /stats on the admin door")
        st = stats(conns[-1])
        is_((st["active"], st["refused"], st["evicted"], top(st, HOG)["connections"]),
            (limit + 1, 0, 0, limit),
            "/stats: all %d its own (and the admin door's), none refused nor evicted" % limit)
        for c in conns:
            c.close()


def test_out_of_fds():
    if shutil.which("prlimit") is None:
        skip_test("out of fds", "prlimit is not installed")
        return
    srv = Server(files=FILES, conf=dict(PATIENT, max_connections=1000),
                 wrapper=["prlimit", "--nofile=40:40", "--"], name="40-fd server")
    with srv:
        is_(srv.get("/x.txt").status, 200, "x.txt is in the file cache (no fd to send it)")
        hog = [Conn(srv.port, source=HOG) for _ in range(40)]
        for c in hog:
            c.request("GET", "/x.txt")
        got = [c.read_response().status for c in hog]
        is_(got, [200] * 40, "40 connections of one client on 40 fds are all served: its "
            "answered ones, idle, close for its waiting ones")
        select.select([c.sock for c in hog], [], [], 0.2)  # one short wait for all
        lost = sum(closed_by_server(c) for c in hog)
        diag("the hog's connections closed to make room: %d of 40" % lost)
        with Conn(srv.port, source=NEWCOMER) as c:
            resp = c.roundtrip("GET", "/x.txt")
            is_((resp.status, resp.body), (200, b"hello"), "a newcomer is served too")
        with Conn(srv.admin_port, source=NEWCOMER) as c:
            st = stats(c)
        fds = st["evicted_by_reason"]["fds"]
        ok(fds >= lost + 1 and st["evicted_by_reason"]["max_connections"] == 0 and
           st["refused"] == 0, "/stats counts the evictions for fds (%d)" % fds, repr(st))
        row = top(st, HOG)
        ok(row is not None and row["evicted"] == fds and row["idle"] > 0,
           "all of them the hog's, which keeps idle ones", repr(row))
        for c in hog:
            c.close()


def main():
    test_lone_client()
    test_hog_gives_way()
    test_late_heads()
    test_slow_give_way()
    test_lone_slow_client()
    test_out_of_fds()


run(main)
