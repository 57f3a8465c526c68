#!/usr/bin/env python3
# A relayed connection is its client's, no more and no less. A PROXY header
# that names no client (v2 LOCAL of any family, v2 UNSPEC, UNIX or DGRAM,
# v1 UNKNOWN) is served files but has none of the balancer's rights:
# /stats, /metrics and /settings answer 403 (loopback rule) and it matches
# no stats_from prefix, while a header naming a loopback client keeps them.
# A relayed connection's bad first request gets the answer a direct one
# gets (414, 431, 505, 400), and refused.unlisted counts only PROXY headers
# from those not entitled to send one: a direct peer not listed, or a
# client behind the balancer sending its own. Raw sockets from 127.0.0.x,
# then Debian's haproxy running docs/haproxy.cfg with a unix-socket
# frontend added (HAProxy 2.6 relays its clients with LOCAL) and its TCP
# one. Statuses and counters, never timings.
#
# The haproxy part is skipped when haproxy is not installed, unless
# UNCLOG_REQUIRE_HAPROXY=1.
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess

from harness import (IO_TIMEOUT, KiB, REPO, Conn, Server, is_, ok, poll, run, skip_test,
                     terminate)

FILES = {"index.html": b"home", "x.txt": b"hello"}
BALANCER = "127.0.0.1"
CLIENT, OTHER, STRANGER = "127.0.0.5", "127.0.0.6", "127.0.0.2"
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def v1(client, port=40000):
    return b"PROXY TCP4 %s 127.0.0.1 %d 80\r\n" % (client.encode(), port)


def v2(client, fam=0x11):
    addr = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 40000, 80)
    return V2_SIG + bytes([0x21, fam]) + struct.pack("!H", len(addr)) + addr


# Headers that name no client: the balancer's own connection.
UNNAMED = [
    ("v2 LOCAL", V2_SIG + b"\x20\x00\x00\x00"),
    ("v2 LOCAL of TCP4 with a short address block",
     V2_SIG + b"\x20\x11\x00\x08" + socket.inet_aton(CLIENT) * 2),
    ("v2 PROXY UNSPEC", V2_SIG + b"\x21\x00\x00\x00"),
    ("v2 PROXY UNIX", V2_SIG + b"\x21\x31\x00\xd8" + b"\0" * 216),
    ("v2 PROXY UDP4", v2(CLIENT, fam=0x12)),
    ("v1 UNKNOWN", b"PROXY UNKNOWN\r\n"),
    ("v1 UNKNOWN with addresses", b"PROXY UNKNOWN 127.0.0.5 127.0.0.1 40000 80\r\n"),
]

# Bad first requests and what a direct client is answered.
BAD = [
    ("a 9 KB URL", b"GET /" + b"a" * (9 * KiB) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("a 17 KB header",
     b"GET /x.txt HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (17 * KiB) + b"\r\n\r\n", 431),
    ("HTTP/2.0", b"GET /x.txt HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("no method", b"\x01\x02 / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("a bare LF", b"GET /x.txt HTTP/1.1\nHost: x\n\n", 400),
    ("two Content-Lengths",
     b"POST /x.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
]


def status_of(srv, data, source=STRANGER, host="127.0.0.1", conn=None):
    """Sends DATA on a new connection from SOURCE: the status of the first
    answer, or None when the server closed without a byte."""
    c = conn or Conn(srv.port, source=source, host=host)
    try:
        c.send(data)
        out, _ = c.read_to_end()
    except (BrokenPipeError, ConnectionResetError):
        out = bytes(c.buf)
    finally:
        c.close()
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", out)
    return int(m.group(1)) if m else None


def request(method, target, body=b"", headers=None):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: 127.0.0.1", "Connection: close"]
    lines += ["%s: %s" % kv for kv in (headers or {}).items()]
    if method == "POST":
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def rights(srv, header, source=BALANCER, host="127.0.0.1", post=b"scheduler=fifo"):
    """What a connection beginning with HEADER is answered, one connection
    per request: a file, the figures, the settings, a change to them."""
    asks = [("file", request("GET", "/x.txt")), ("stats", request("GET", "/stats")),
            ("metrics", request("GET", "/metrics")), ("settings", request("GET", "/settings")),
            ("change", request("POST", "/settings", post, FORM))]
    return {what: status_of(srv, header + req, source, host) for what, req in asks}


def figures(srv):
    """/stats asked on the admin door."""
    with Conn(srv.admin_port, source=STRANGER) as c:
        resp = c.roundtrip("GET", "/stats")
        return json.loads(resp.body)


def unlisted(srv):
    return figures(srv)["connections"]["proxy_protocol"]["refused"]["unlisted"]


# The public listener has no /settings (404), and figures only for stats_from.
REFUSED = {"file": 200, "stats": 403, "metrics": 403, "settings": 404, "change": 404}


def test_unnamed_rights():
    conf = {"proxy_protocol_from": BALANCER, "stats_from": CLIENT, "header_timeout": "60s"}
    with Server(files=FILES, conf=conf, args=["--admin", "on"]) as srv:
        local = figures(srv)["connections"]["proxy_protocol"]["local"]
        for what, header in UNNAMED:
            is_(rights(srv, header), REFUSED,
                "%s: served files, refused /stats, /metrics and /settings" % what)
        st = figures(srv)
        is_(st["scheduler"]["mode"], "fair", "no POST /settings changed the scheduler")
        is_(st["connections"]["proxy_protocol"]["local"] - local, len(UNNAMED) * len(REFUSED),
            "each counted as the balancer's own connection (local)")
        is_(rights(srv, v1(CLIENT), post=b"scheduler=fair"),
            {"file": 200, "stats": 200, "metrics": 200, "settings": 404, "change": 404},
            "a header naming a client under stats_from: its rights are the client's")
        is_(rights(srv, v1(STRANGER)), REFUSED,
            "a header naming another loopback client: none (loopback has no rights there)")
        is_(rights(srv, v2("192.0.2.7")), REFUSED,
            "a header naming a remote client: none")


def local_address():
    """A non-loopback IPv4 address of this machine, or None."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout
    except OSError:
        return None
    return next((a for a in out.split() if "." in a and not a.startswith("127.")), None)


def test_unnamed_stats_from():
    addr = local_address()
    if addr is None:
        skip_test("an unnamed connection from a balancer under stats_from",
                  "this machine has no non-loopback IPv4 address")
        return
    conf = {"proxy_protocol_from": addr, "stats_from": addr, "header_timeout": "60s"}
    with Server(files=FILES, conf=conf, args=["--listen", "0.0.0.0:0"]) as srv:
        c = Conn(srv.port, source=addr, host=addr)
        is_(status_of(srv, v1(addr) + request("GET", "/stats"), conn=c), 200,
            "a header naming the balancer's address, under stats_from: /stats answers")
        for what, header in UNNAMED[:1] + UNNAMED[-2:-1]:
            c = Conn(srv.port, source=addr, host=addr)
            is_(status_of(srv, header + request("GET", "/stats"), conn=c), 403,
                "%s from a balancer under stats_from: /stats refused" % what)


def test_bad_first_request():
    conf = {"proxy_protocol_from": BALANCER, "header_timeout": "60s"}
    with Server(files=FILES, conf=conf) as srv:
        before = unlisted(srv)
        for what, data, want in BAD:
            is_(status_of(srv, data), want, "%s, direct: %d" % (what, want))
            for how, header in (("v1", v1(CLIENT)), ("v2", v2(CLIENT)),
                                ("LOCAL", V2_SIG + b"\x20\x00\x00\x00")):
                is_(status_of(srv, header + data, BALANCER), want,
                    "%s, relayed (%s): %d, as direct" % (what, how, want))
        is_(unlisted(srv), before, "refused.unlisted: no bad request counted")
        req = request("GET", "/x.txt")
        is_(status_of(srv, v1(OTHER) + req), None,
            "a direct peer not listed sending a PROXY header: closed unanswered")
        is_(status_of(srv, v1(CLIENT) + v1(OTHER) + req, BALANCER), None,
            "a relayed client sending a v1 PROXY header of its own: closed unanswered")
        is_(status_of(srv, v2(CLIENT) + v2(OTHER) + req, BALANCER), None,
            "a relayed client sending a v2 PROXY header of its own: closed unanswered")
        is_(unlisted(srv), before + 3, "each counted under refused.unlisted")
        is_(status_of(srv, v1(CLIENT) + req, BALANCER), 200, "and relayed clients are served")


# ---- behind Debian's haproxy: docs/haproxy.cfg plus a unix-socket frontend ----

class UnixConn(Conn):
    """A Conn over a unix socket (the harness's reads and parsing)."""

    def __init__(self, path):
        self.timeout = IO_TIMEOUT
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(path)
        self.buf = bytearray()
        self.eof = False
        self.end = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Balancer:
    """haproxy running docs/haproxy.cfg in front of BACKEND, its frontend
    bound to a TCP port and to a unix socket beside it."""

    def __init__(self, haproxy, tmp, backend):
        self.port = free_port()
        self.unix = os.path.join(tmp, "lb.sock")
        text = open(os.path.join(REPO, "docs", "haproxy.cfg")).read()
        text, n = re.subn(r"(?m)^    bind :80$", "    bind 127.0.0.1:%d\n    bind unix@%s"
                          % (self.port, self.unix), text)
        assert n == 1, "docs/haproxy.cfg has one 'bind :80' line"
        servers = re.findall(r"(?m)^    server \S+ \S+$", text)
        for i, line in enumerate(servers):
            text = text.replace(line, "    server web1 127.0.0.1:%d" % backend if i == 0 else "",
                                1)
        self.path = os.path.join(tmp, "haproxy.cfg")
        with open(self.path, "w") as f:
            f.write(text)
        self.log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = subprocess.Popen([haproxy, "-db", "-f", self.path], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def up(self):
        try:
            with Conn(self.port, source=CLIENT) as c:
                return c.roundtrip("GET", "/x.txt").status == 200
        except Exception:
            return False

    def stop(self):
        status = terminate(self.proc)
        self.log.close()
        return status in (0, -signal.SIGTERM)


def test_haproxy(haproxy):
    conf = {"proxy_protocol_from": BALANCER, "stats_from": CLIENT}
    with Server(files=FILES, conf=conf, args=["--admin", "on"]) as srv:
        lb = Balancer(haproxy, srv.tmp, srv.port)
        try:
            ok(poll(lb.up, 20), "haproxy serves through docs/haproxy.cfg")
            before = unlisted(srv)
            local = figures(srv)["connections"]["proxy_protocol"]["local"]
            got = {}
            for what, req in (("file", request("GET", "/x.txt")),
                              ("stats", request("GET", "/stats")),
                              ("metrics", request("GET", "/metrics")),
                              ("settings", request("GET", "/settings")),
                              ("change", request("POST", "/settings", b"scheduler=fifo", FORM))):
                got[what] = status_of(srv, req, conn=UnixConn(lb.unix))
            is_(got, REFUSED, "a client on haproxy's unix socket: served files, refused /stats, "
                "/metrics and /settings")
            st = figures(srv)
            is_(st["scheduler"]["mode"], "fair", "its POST /settings changed nothing")
            ok(st["connections"]["proxy_protocol"]["local"] - local >= len(got),
               "it came as a header naming no client (local)")
            for what, data, want in BAD[:2]:
                c = Conn(lb.port, source=CLIENT)
                is_(status_of(srv, data, conn=c), want, "%s through haproxy: %d" % (what, want))
            is_(unlisted(srv), before, "refused.unlisted not bumped by them")
            with Conn(lb.port, source=CLIENT) as c:
                is_(c.roundtrip("GET", "/stats").status, 200,
                    "a client under stats_from through haproxy's TCP frontend keeps its rights")
        finally:
            ok(lb.stop(), "haproxy stops cleanly")


def main():
    test_unnamed_rights()
    test_unnamed_stats_from()
    test_bad_first_request()
    haproxy = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and
                                          "/usr/sbin/haproxy")
    if haproxy:
        test_haproxy(haproxy)
    elif os.environ.get("UNCLOG_REQUIRE_HAPROXY") == "1":
        ok(False, "haproxy is installed (UNCLOG_REQUIRE_HAPROXY=1)",
           "haproxy is not on PATH: apt-get install haproxy")
    else:
        skip_test("behind Debian's haproxy with a unix-socket frontend",
                  "haproxy is not installed")


run(main, timeout=180)
