#!/usr/bin/env python3
# Admission at max_connections behind a load balancer: once the PROXY header
# names the client, the connection is admitted exactly as a direct one from
# that client would be. Each case runs three ways, straight from the
# client's own address and through hand-written v1 and v2 headers sent
# from the balancer's (127.0.0.1, under proxy_protocol_from), and each must
# end the same: a newcomer whose client holds the most gets 503 and is
# closed, nobody's download is reset for it (no eviction for a tie), and
# /stats counts one refusal as top_client. Then the first case through a
# real HAProxy (send-proxy-v2), when it is installed. Downloads stall on a
# small receive buffer; counters, statuses and bytes, never timings.
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess

from harness import (Conn, ProtocolError, Server, is_, ok, poll, run, skip_test, statuses,
                     terminate)

BALANCER = "127.0.0.1"  # the peer listed in proxy_protocol_from (and HAProxy's)
A, B, NEWCOMER = "127.0.0.2", "127.0.0.3", "127.0.0.4"
BIG = 8 * 1024 * 1024
FILES = {"x.txt": b"hello"}
# stats_from: /stats is read on the connections under test, on the public
# listener (a new one, on the admin door too, would take a slot at the limit).
CONF = {"proxy_protocol_from": BALANCER, "header_timeout": "60s", "keepalive_timeout": "60s",
        "send_timeout": "60s", "send_buffer": "8k", "send_lowat": "8k",
        "stats_from": "127.0.0.0/8", "stats_detail": "full"}
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(client, port):
    return b"PROXY TCP4 %s 127.0.0.1 %d 80\r\n" % (client.encode(), port)


def v2(client, port):
    addr = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", port, 80)
    return V2_SIG + b"\x21\x11" + struct.pack("!H", len(addr)) + addr


HEADERS = {"v1": v1, "v2": v2}
_ports = iter(range(40000, 60000))


def open_as(srv, via, client, rcvbuf=None):
    """A connection of CLIENT: its own (direct), or from the balancer with a
    PROXY header of version VIA naming it."""
    if via == "direct":
        return Conn(srv.port, source=client, rcvbuf=rcvbuf)
    c = Conn(srv.port, source=BALANCER, rcvbuf=rcvbuf)
    c.send(HEADERS[via](client, next(_ports)))
    return c


def stalled_download(srv, via, client):
    """A download of CLIENT whose head is in and whose body stalls: the
    client reads nothing more."""
    c = open_as(srv, via, client, rcvbuf=4096)
    c.request("GET", "/big.bin")
    resp = c.read_head()
    assert resp.status == 200, resp
    return c


def newcomer_answer(c, via):
    """What a newcomer is answered: the statuses it reads until the close,
    and how it ended. Direct, the server answers before reading (and closes
    at once): it sends nothing; relayed, the balancer sends the request."""
    if via != "direct":
        c.request("GET", "/x.txt")
    data, end = c.read_to_end()
    c.close()
    return statuses(data), end


def whole(c):
    """Whether the rest of C's download comes whole (not reset)."""
    try:
        return len(c.read_exact(BIG)) == BIG
    except (ProtocolError, OSError):
        return False


def closed(c):
    """Whether the server closed C (an EOF to read within a moment)."""
    r, _, _ = select.select([c.sock], [], [], 0.1)
    return c.eof or (bool(r) and not c.fill())


def stats(c):
    if c is None:
        raise AssertionError("no connection left to ask /stats on")
    resp = c.roundtrip("GET", "/stats")
    assert resp.status == 200, resp
    return json.loads(resp.body)["connections"]


def kept(downloads):
    """Whether each download came whole; and one to ask /stats on, whole
    (None when none is)."""
    got = [whole(c) for c in downloads]
    return got, next((c for c, w in zip(downloads, got) if w), None)


def counters(st):
    return (st["refused_by_reason"]["top_client"], st["refused_by_reason"]["full"], st["evicted"])


def test_lone_client(via):
    srv = Server(files=FILES, conf=dict(CONF, max_connections=3))
    srv.sparse_file("big.bin", BIG)
    with srv:
        downloads = [stalled_download(srv, via, A) for _ in range(3)]
        got = newcomer_answer(open_as(srv, via, A), via)
        is_(got, ([503], "closed"), "%s: A's fourth connection at max_connections 3 gets 503, "
            "then the close" % via)
        got, asker = kept(downloads)
        is_(got, [True] * 3, "%s: none of A's own downloads was reset for it" % via)
        st = stats(asker)
        is_(counters(st), (1, 0, 0), "%s: /stats: refused once as top_client, nothing evicted"
            % via)
        # The rule still makes room: a newcomer of another client, holding
        # none, gets one of A's (now idle) connections closed for it.
        with open_as(srv, via, NEWCOMER) as c:
            resp = c.roundtrip("GET", "/x.txt")
            is_((resp.status, resp.body), (200, b"hello"),
                "%s: a newcomer of another client is served" % via)
            st = stats(c)
        is_(counters(st), (1, 0, 1), "%s: /stats: one of A's evicted for it" % via)
        ok(poll(lambda: sum(map(closed, downloads)) == 1),
           "%s: and one of A's connections closed" % via)
        for c in downloads:
            c.close()


def test_two_clients(via):
    srv = Server(files=FILES, conf=dict(CONF, max_connections=4))
    srv.sparse_file("big.bin", BIG)
    with srv:
        downloads = {client: [stalled_download(srv, via, client) for _ in range(2)]
                     for client in (A, B)}
        got = newcomer_answer(open_as(srv, via, A), via)
        is_(got, ([503], "closed"), "%s: A (2) and B (2) at max_connections 4: A's fifth "
            "connection gets 503, then the close" % via)
        got, asker = kept(downloads[A] + downloads[B])
        is_(got, [True] * 4,
            "%s: no download of B (nor A) was reset for it: no eviction for a tie" % via)
        st = stats(asker)
        is_(counters(st), (1, 0, 0), "%s: /stats: refused once as top_client, nothing evicted"
            % via)
        rows = {row["client"]: row for row in st["top_clients"].values()}
        is_((rows[A]["refused"], rows[B]["refused"], BALANCER in rows), (1, 0, False),
            "%s: /stats' top clients: the refusal is A's, and the balancer holds nothing" % via)
        for conns in downloads.values():
            for c in conns:
                c.close()


# ---- through Debian's haproxy -----------------------------------------------

HAPROXY_CFG = """global
    tune.sndbuf.client 16384
    tune.rcvbuf.server 16384
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend www
    bind 127.0.0.1:%d
    default_backend unclog
backend unclog
    server web1 127.0.0.1:%d send-proxy-v2
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_haproxy(haproxy):
    srv = Server(files=FILES, conf=dict(CONF, max_connections=3))
    srv.sparse_file("big.bin", BIG)
    with srv:
        port = free_port()
        path = os.path.join(srv.tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(HAPROXY_CFG % (port, srv.port))
        log = open(os.path.join(srv.tmp, "haproxy.log"), "wb")
        proc = subprocess.Popen([haproxy, "-db", "-f", path], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)

        def up():
            try:
                with Conn(port, source=NEWCOMER) as c:
                    return c.roundtrip("GET", "/x.txt", headers={"Connection": "close"}).status
            except (OSError, ProtocolError):
                return None

        try:
            ok(poll(lambda: up() == 200, 20), "haproxy relays with send-proxy-v2")
            # Its connection closes after the answer: wait until the slot is free.
            ok(poll(lambda: stats(Conn(srv.port, source=NEWCOMER))["active"] == 1, 20),
               "and lets go")
            downloads = []
            for _ in range(3):
                c = Conn(port, source=A, rcvbuf=4096)
                c.request("GET", "/big.bin")
                assert c.read_head().status == 200
                downloads.append(c)
            c = Conn(port, source=A)
            c.request("GET", "/x.txt")
            data, end = c.read_to_end()
            c.close()
            is_(statuses(data), [503], "haproxy: A's fourth connection at max_connections 3 is "
                "answered 503 through the balancer")
            got, asker = kept(downloads)
            is_(got, [True] * 3, "haproxy: none of A's own downloads was reset for it")
            is_(counters(stats(asker)), (1, 0, 0),
                "haproxy: /stats: refused once as top_client, nothing evicted")
            for c in downloads:
                c.close()
        finally:
            status = terminate(proc)
            log.close()
            ok(status in (0, -signal.SIGTERM), "haproxy stops cleanly")


def main():
    for via in ("direct", "v1", "v2"):
        test_lone_client(via)
        test_two_clients(via)
    haproxy = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and
                                          "/usr/sbin/haproxy")
    if not haproxy:
        if os.environ.get("UNCLOG_REQUIRE_HAPROXY") == "1":
            ok(False, "haproxy is installed (UNCLOG_REQUIRE_HAPROXY=1)",
               "haproxy is not on PATH: apt-get install haproxy")
        else:
            skip_test("admission through Debian's haproxy", "haproxy is not installed")
        return
    test_haproxy(haproxy)


run(main, timeout=300)
