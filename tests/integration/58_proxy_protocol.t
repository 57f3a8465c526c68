#!/usr/bin/env python3
# Behind a load balancer: the PROXY protocol (proxy_protocol_from). Debian's
# haproxy runs docs/haproxy.cfg itself (its bind and server lines pointed
# at our ports, every other line as the docs show it) in front of the real
# binary with send-proxy-v2: a request from 127.0.0.5 through it is
# 127.0.0.5's in /stats' top clients and the access log, and a connection
# hog behind the balancer gives way to another address's requests as it
# would without one. Then the header's rules, straight at the server: a
# header from a peer not listed is refused, a listed peer without one is
# refused, and malformed or cut-short headers of both versions, sent in
# one piece or a byte at a time, are refused and counted while the server
# keeps serving. Counters and addresses, never timings.
#
# Then the same through nginx's stream proxy, which speaks version 1.
#
# The haproxy part is skipped when haproxy is not installed, unless
# UNCLOG_REQUIRE_HAPROXY=1, and the nginx part without nginx's stream
# module (libnginx-mod-stream), unless UNCLOG_REQUIRE_NGINX_STREAM=1 (CI
# installs both).
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time

from harness import (REPO, Conn, Server, diag, is_, ok, poll, run, skip_test, terminate)

FILES = {"index.html": b"home", "x.txt": b"hello"}
BALANCER = "127.0.0.1"  # haproxy connects from here
CLIENT, OTHER, STRANGER = "127.0.0.5", "127.0.0.6", "127.0.0.2"
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(client, port=40000):
    return b"PROXY TCP4 %s 127.0.0.1 %d 80\r\n" % (client.encode(), port)


def v2(client, command=0x21, fam=0x11, port=40000):
    addr = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", port, 80)
    return V2_SIG + bytes([command, fam]) + struct.pack("!H", len(addr)) + addr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_stats(srv):
    """/stats' connection figures, asked on the admin door (a LOCAL header
    names no client: it has no right to them on the public listener,
    60_proxy_relayed.t)."""
    with Conn(srv.admin_port, source=STRANGER) as c:
        resp = c.roundtrip("GET", "/stats")
        return json.loads(resp.body)["connections"]


def refused(srv, data, source, bytewise=False, close_after=False):
    """Sends DATA from SOURCE (a byte at a time with BYTEWISE; then
    half-closes with CLOSE_AFTER): whether the server closed the connection
    without a byte of answer."""
    c = Conn(srv.port, source=source)
    try:
        for i in range(len(data)) if bytewise else [None]:
            c.send(data if i is None else data[i:i + 1])
        if close_after:
            c.sock.shutdown(socket.SHUT_WR)
        while c.fill():
            pass
        return c.buf == b""
    except (BrokenPipeError, ConnectionResetError):
        return True  # closed while we were still sending
    finally:
        c.close()


def still_serves(srv, desc):
    with Conn(srv.port, source=BALANCER) as c:
        c.send(v1(CLIENT))
        resp = c.roundtrip("GET", "/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), desc)


def test_header_rules():
    conf = {"proxy_protocol_from": BALANCER, "header_timeout": "60s"}
    with Server(files=FILES, conf=conf) as srv:
        still_serves(srv, "a v1 header, then the request: served")
        with Conn(srv.port, source=BALANCER) as c:
            for b in v2(CLIENT) + b"GET /x.txt HTTP/1.1\r\nHost: x\r\n\r\n":
                c.send(bytes([b]))
            resp = c.read_response()
            is_((resp.status, resp.body), (200, b"hello"),
                "a v2 header and request sent a byte at a time: served")
        with Conn(srv.port, source=BALANCER) as c:
            c.send(b"PROXY UNKNOWN\r\n")
            is_(c.roundtrip("GET", "/x.txt").status, 200, "v1 UNKNOWN: served as the peer")

        req = b"GET /x.txt HTTP/1.1\r\nHost: x\r\n\r\n"
        cases = [  # (what, bytes, source, counter)
            ("a listed peer's plain request", req, BALANCER, "malformed"),
            ("v1 with a heading zero", v1(CLIENT).replace(b".5 ", b".05 ") + req, BALANCER,
             "malformed"),
            ("v1 with a lone LF", v1(CLIENT).replace(b"\r\n", b"\n") + req, BALANCER,
             "malformed"),
            ("v1 without a CRLF in 107 bytes", b"PROXY UNKNOWN " + b"x" * 120, BALANCER,
             "malformed"),
            ("v2 of version 3", V2_SIG + b"\x31" + v2(CLIENT)[13:] + req, BALANCER,
             "malformed"),
            ("v2 longer than a segment", V2_SIG + b"\x21\x11\x04\x00" + b"\0" * 1024, BALANCER,
             "malformed"),
            ("v2 of TCP4 with a short address block",
             V2_SIG + b"\x21\x11\x00\x08" + b"\0" * 8 + req, BALANCER, "malformed"),
            ("a v1 header from a peer not listed", v1(CLIENT) + req, STRANGER, "unlisted"),
            ("a v2 header from a peer not listed", v2(CLIENT) + req, STRANGER, "unlisted"),
        ]
        want = dict(proxy_stats(srv)["proxy_protocol"]["refused"])
        for bytewise in (False, True):
            for what, data, source, counter in cases:
                ok(refused(srv, data, source, bytewise),
                   "%s%s: closed, nothing answered" % (what, ", byte by byte" if bytewise else ""))
                want[counter] += 1
        for what, data in (("v1", v1(CLIENT)[:20]), ("v2", v2(CLIENT)[:20])):
            ok(refused(srv, data, BALANCER, True, close_after=True),
               "a %s header cut short, byte by byte: closed, nothing answered" % what)
            want["truncated"] += 1
        is_(proxy_stats(srv)["proxy_protocol"]["refused"], want,
            "each refusal counted under its reason")
        with Conn(srv.port, source=STRANGER) as c:
            is_(c.roundtrip("GET", "/x.txt").status, 200,
                "a peer not listed is served as before without a header")
        still_serves(srv, "and the server still serves the balancer's clients")


# ---- behind Debian's haproxy, running the docs' own configuration ----------

class Balancer:
    """haproxy running docs/haproxy.cfg in front of BACKENDS (ports)."""

    def __init__(self, haproxy, tmp, backends):
        self.port = free_port()
        text = open(os.path.join(REPO, "docs", "haproxy.cfg")).read()
        text, n = re.subn(r"(?m)^    bind :80$", "    bind 127.0.0.1:%d" % self.port, text)
        assert n == 1, "docs/haproxy.cfg has one 'bind :80' line"
        servers = re.findall(r"(?m)^    server \S+ \S+$", text)
        assert len(servers) >= len(backends), "docs/haproxy.cfg lists enough servers"
        for i, line in enumerate(servers):
            new = "    server web%d 127.0.0.1:%d" % (i + 1, backends[i]) if i < len(backends) else ""
            text = text.replace(line, new, 1)
        self.path = os.path.join(tmp, "haproxy.cfg")
        with open(self.path, "w") as f:
            f.write(text)
        self.log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = subprocess.Popen([haproxy, "-db", "-f", self.path], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def conn(self, source):
        return Conn(self.port, source=source)

    def up(self):
        """Whether a request through the balancer is served."""
        try:
            with self.conn(CLIENT) as c:
                return c.roundtrip("GET", "/x.txt").status == 200
        except (OSError, Exception):
            return False

    def stop(self):
        """Whether haproxy ended as it does on SIGTERM (-db: by the signal)."""
        status = terminate(self.proc)
        self.log.close()
        return status in (0, -signal.SIGTERM)


def access_clients(srv, target):
    lines = open(srv.access_log).read().splitlines()
    return sorted({line.split()[0] for line in lines if '"GET %s ' % target in line})


def test_real_client(haproxy):
    # The client the header names is who stats_from judges.
    conf = {"proxy_protocol_from": BALANCER, "stats_from": CLIENT, "stats_detail": "full"}
    with Server(files=FILES, conf=conf, name="web1") as web1, \
            Server(files=FILES, conf=conf, name="web2") as web2:
        lb = Balancer(haproxy, web1.tmp, [web1.port, web2.port])
        try:
            ok(poll(lb.up, 20), "haproxy serves through docs/haproxy.cfg")
            with lb.conn(CLIENT) as c:
                for _ in range(3):
                    is_(c.roundtrip("GET", "/x.txt").status, 200, "a request from %s" % CLIENT)
                resp = c.roundtrip("GET", "/stats")
                is_(resp.status, 200, "/stats answers %s through the balancer: under stats_from"
                    % CLIENT)
                st = json.loads(resp.body)["connections"]
                clients = [row["client"] for row in st["top_clients"].values()]
                ok(CLIENT in clients and BALANCER not in clients,
                   "/stats' top clients show %s, not the balancer" % CLIENT, clients)
                ok(st["proxy_protocol"]["clients"] >= 1, "its header counted")
            ok(poll(lambda: st["proxy_protocol"]["local"] > 0 or
                    proxy_stats(web1)["proxy_protocol"]["local"] > 0, 10),
               "haproxy's health checks come as LOCAL headers, served")
        finally:
            ok(lb.stop(), "haproxy stops cleanly")
    is_(sorted(set(access_clients(web1, "/x.txt") + access_clients(web2, "/x.txt"))), [CLIENT],
        "the access logs show %s for its requests, not the balancer" % CLIENT)


def test_hog_behind_balancer(haproxy):
    limit = 8
    conf = {"proxy_protocol_from": BALANCER, "max_connections": limit,
            "keepalive_timeout": "60s", "header_timeout": "60s"}
    with Server(files=FILES, conf=conf) as srv:
        lb = Balancer(haproxy, srv.tmp, [srv.port])
        try:
            ok(poll(lb.up, 20), "haproxy serves through docs/haproxy.cfg")
            hog = []
            for _ in range(2 * limit):
                c = lb.conn(CLIENT)
                try:
                    c.roundtrip("GET", "/x.txt")  # served, or closed for a newcomer later
                except Exception:
                    pass
                hog.append(c)
            statuses = []
            for _ in range(limit):
                with lb.conn(OTHER) as c:
                    try:
                        statuses.append(c.roundtrip("GET", "/x.txt").status)
                    except Exception as e:
                        statuses.append(repr(e))
            is_(statuses, [200] * limit,
                "%s's requests through the balancer are all served while %s hogs it"
                % (OTHER, CLIENT))
            st = proxy_stats(srv)
            ok(st["refused_by_reason"]["top_client"] + st["evicted"] > 0,
               "the hog, not the other, gave way", st["refused_by_reason"], st["evicted"])
            for c in hog:
                c.close()
        finally:
            ok(lb.stop(), "haproxy stops cleanly")


# ---- behind nginx's stream proxy, which sends version 1 ----------------------

NGINX_STREAM = "/usr/lib/nginx/modules/ngx_stream_module.so"  # Debian's libnginx-mod-stream


class NginxStream(Balancer):
    """nginx's stream module (TCP) with proxy_protocol on in front of BACKEND:
    one process, its files in TMP."""

    def __init__(self, nginx, tmp, backend):
        self.port = free_port()
        home = os.path.join(tmp, "nginx")
        os.makedirs(home, exist_ok=True)
        self.path = os.path.join(home, "nginx.conf")
        with open(self.path, "w") as f:
            f.write("load_module %s;\n"
                    "daemon off;\nmaster_process off;\npid %s/nginx.pid;\n"
                    "error_log %s/error.log;\nevents {}\n"
                    "stream {\n    server {\n        listen 127.0.0.1:%d;\n"
                    "        proxy_pass 127.0.0.1:%d;\n        proxy_protocol on;\n    }\n}\n"
                    % (NGINX_STREAM, home, home, self.port, backend))
        self.log = open(os.path.join(home, "stderr.log"), "wb")
        self.proc = subprocess.Popen([nginx, "-p", home, "-e", os.path.join(home, "error.log"),
                                      "-c", self.path], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)


def test_nginx_stream(nginx):
    conf = {"proxy_protocol_from": BALANCER, "stats_from": OTHER, "stats_detail": "full"}
    with Server(files=FILES, conf=conf) as srv:
        lb = NginxStream(nginx, srv.tmp, srv.port)
        try:
            ok(poll(lb.up, 20), "nginx's stream proxy (proxy_protocol on: version 1) serves")
            with lb.conn(OTHER) as c:
                for _ in range(3):
                    is_(c.roundtrip("GET", "/x.txt").status, 200, "a request from %s" % OTHER)
                resp = c.roundtrip("GET", "/stats")
                is_(resp.status, 200, "/stats answers %s through nginx" % OTHER)
                st = json.loads(resp.body)["connections"]
                clients = [row["client"] for row in st["top_clients"].values()]
                ok(OTHER in clients and BALANCER not in clients,
                   "/stats' top clients show %s, not nginx" % OTHER, clients)
                ok(st["proxy_protocol"]["clients"] >= 2, "each connection's header counted")
        finally:
            ok(lb.stop(), "nginx stops cleanly")
    is_(access_clients(srv, "/x.txt"), [CLIENT, OTHER],
        "the access log shows the clients' addresses, not nginx's")


def main():
    test_header_rules()
    nginx = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx")
    if nginx and os.path.exists(NGINX_STREAM):
        test_nginx_stream(nginx)
    elif os.environ.get("UNCLOG_REQUIRE_NGINX_STREAM") == "1":
        ok(False, "nginx's stream module is installed (UNCLOG_REQUIRE_NGINX_STREAM=1)",
           "apt-get install libnginx-mod-stream")
    else:
        skip_test("the real client behind nginx's stream proxy",
                  "nginx or its stream module (libnginx-mod-stream) is not installed")
    haproxy = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and
                                          "/usr/sbin/haproxy")
    if not haproxy:
        if os.environ.get("UNCLOG_REQUIRE_HAPROXY") == "1":
            ok(False, "haproxy is installed (UNCLOG_REQUIRE_HAPROXY=1)",
               "haproxy is not on PATH: apt-get install haproxy")
        else:
            skip_test("the real client behind Debian's haproxy", "haproxy is not installed")
        return
    test_real_client(haproxy)
    test_hog_behind_balancer(haproxy)


run(main, timeout=180)
