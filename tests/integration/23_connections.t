#!/usr/bin/env python3
# Connection and fd limits. Over max_connections a new connection gets a 503
# and is closed at once (here one client holds them all: 27_client_conns.t
# has several), a flood of them harms none of the connections being served,
# and a freed slot is taken again. Out of fds (the server run with
# `prlimit --nofile=40`), accept() fails with EMFILE: the server must not
# spin nor wedge; it pauses accepting, keeps serving what it has, and once
# fds are free it accepts the connections that waited.
import json
import select
import shutil
import time

from harness import (SLOW, Conn, Server, build_request, cpu_seconds, diag, exchange, is_, like, ok,
                     poll, run, skip_test, statuses)

FILES = {"x.txt": b"hello"}
PATIENT = {"keepalive_timeout": "60s", "header_timeout": "60s"}


def test_max_connections():
    with Server(files=FILES, conf=dict(PATIENT, max_connections=4)) as srv:
        served = [Conn(srv.port) for _ in range(4)]
        for i, c in enumerate(served):
            is_(c.roundtrip("GET", "/x.txt").status, 200, "connection %d of 4 is served" % (i + 1))
        data, end = exchange(srv.port, build_request("GET", "/x.txt"))
        is_(statuses(data), [503], "a fifth connection gets 503")
        ok(end in ("closed", "reset"), "... and is closed at once", "ended %s" % end)
        for _ in range(50):
            exchange(srv.port, build_request("GET", "/x.txt"))
        for i, c in enumerate(served):
            resp = c.roundtrip("GET", "/x.txt")
            is_((resp.status, resp.body), (200, b"hello"),
                "after 50 refused connections, connection %d is still served" % (i + 1))
        served.pop().close()
        got = poll(lambda: statuses(exchange(srv.admin_port, build_request(
            "GET", "/stats", headers={"Connection": "close"}))[0]) == [200], 10)
        ok(got, "once one closes, a new connection is served")
        # The server closes a Connection: close exchange only once the client
        # has closed too (it lingers for the client's FIN): wait for that slot.
        resp = poll(lambda: (lambda r: r if r.status == 200 else None)(srv.get("/stats")), 10)
        st = json.loads(resp.body) if resp else srv.stats()
        ok(st["connections"]["refused"] >= 51, "/stats counts the refused connections",
           repr(st["connections"]))
        for c in served:
            c.close()


def answered(conns, timeout):
    """The connections among conns with bytes to read within timeout."""
    ready = set()
    deadline = time.monotonic() + timeout
    while len(ready) < len(conns):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([c.sock for c in conns if c.sock not in ready], [], [], left)
        ready.update(r)
    return [c for c in conns if c.sock in ready]


def test_emfile():
    if shutil.which("prlimit") is None:
        skip_test("EMFILE", "prlimit is not installed")
        return
    srv = Server(files=FILES, conf=dict(PATIENT, max_connections=1000, threads=1),
                 wrapper=["prlimit", "--nofile=40:40", "--"], name="40-fd server")
    with srv:
        conns = [Conn(srv.port) for _ in range(60)]
        # Connection: close, so that an answered connection is not idle: with
        # no idle connection to give up for fds (27_client_conns.t), accepting
        # has to pause.
        for c in conns:
            c.request("GET", "/x.txt", headers={"Connection": "close"})
        # Those the server could accept answer at once; wait until no more come.
        first, deadline = [], time.monotonic() + 10 * SLOW
        while time.monotonic() < deadline:
            now = answered([c for c in conns if c not in first], 0.5)
            if not now and first:
                break
            first += now
        waiting = [c for c in conns if c not in first]
        diag("with 40 fds: %d of 60 connections answered, %d waiting" % (len(first), len(waiting)))
        ok(first and waiting, "some connections are served, the others wait for fds")
        like(srv.stderr(), r"accept: too many open files; pausing new connections",
             "the pause is logged")

        cpu = cpu_seconds(srv.pid)
        time.sleep(2)
        spent = cpu_seconds(srv.pid) - cpu
        diag("CPU used in 2 s while out of fds: %.2f s" % spent)
        ok(spent < 1.0, "the server does not spin while out of fds (a spin uses all 2 s)",
           "used %.2f s" % spent)

        got = []
        for c in first:
            got.append(c.read_response().status)
            c.close()
        ok(all(s in (200, 503) for s in got), "the served connections got answers", repr(got))
        # Each answered connection is closed at once, which frees fds for the next.
        deadline = time.monotonic() + 20 * SLOW
        bodies = []
        while waiting and time.monotonic() < deadline:
            for c in answered(waiting, 1):
                resp = c.read_response()
                bodies.append((resp.status, resp.body))
                c.close()
                waiting.remove(c)
        is_(waiting, [], "once fds are free, every waiting connection is served")
        # Accepted into the last fds, they may find none left to open the file: 503.
        ok(bodies and all(b in ((200, b"hello"), (503, b"503 Service Unavailable\n"))
                          for b in bodies),
           "the connections that waited got the file or a 503", repr(bodies[:5]))
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "a new connection is served")
        like(srv.stderr(), r"accepting connections again", "the end of the pause is logged")


def main():
    test_max_connections()
    test_emfile()


run(main)
