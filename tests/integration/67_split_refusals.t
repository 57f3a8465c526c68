#!/usr/bin/env python3
# A failed first request is answered the same however its bytes arrive.
# One that begins as a PROXY header (a client claiming an address it may not
# claim) is closed unanswered and counted under refused.unlisted; one that
# only begins like a header's signature and then breaks is answered as any
# bad request. Which it is must not depend on where the reads cut: each
# input is sent once whole and once a byte at a time, each byte only once
# the server has read the one before (its socket's receive queue, asked of
# the kernel's sock_diag as ss(8) does, is empty again), on a relayed
# connection (a balancer's v1 header first, from an address under
# proxy_protocol_from) and on a direct one. Both runs must get the same
# answer (its Date aside), or both the same close, and bump
# refused.unlisted alike. And five refusals of the parser's, which the
# relay fuzzer found: a HEAD's bare LF that llhttp reads past before a
# callback refuses its head (the 400 has its body, whole as in pieces), a
# bad line in a head that on_headers_complete refuses (400, not 405), a
# bad character in a target before max_url, the target going on past it
# (400, not 414), a character llhttp refuses itself past max_url (414,
# not 400), and a bare CR after a HEAD's answer (a 400 with its body).
# Bytes and counters, never timings.
import json
import re
import select
import socket
import struct

from harness import IO_TIMEOUT, SLOW, Conn, Server, is_, poll, run

BALANCER, CLIENT, STRANGER = "127.0.0.3", "127.0.0.5", "127.0.0.4"
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"
GET = b"GET /x.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def v1(client):
    return b"PROXY TCP4 %s 127.0.0.1 40000 80\r\n" % client.encode()


def v2(client):
    addr = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 40000, 80)
    return V2_SIG + b"\x21\x11" + struct.pack("!H", len(addr)) + addr


# A client's first bytes, and what they get sent whole (None: closed
# unanswered, counted under refused.unlisted).
CASES = [
    ("a v1 signature, then a CR without its LF", b"PROXY TCP4\r\r\n" + GET, 400),
    ("a v1 signature, then no protocol", b"PROXY HTTP/1.1\r\n" + GET, 400),
    ("a v2 signature broken at its 9th byte", V2_SIG[:8] + b"X" + V2_SIG[9:] + GET, 400),
    ("a v2 signature, then version 1", V2_SIG + b"\x11\x11\x00\x0c" + b"\0" * 12 + GET, 400),
    ("a v1 header of its own", v1("127.0.0.6") + GET, None),
    ("a v1 UNKNOWN header of its own", b"PROXY UNKNOWN\r\n" + GET, None),
    ("a v2 header of its own", v2("127.0.0.6") + GET, None),
    # Cut short by the client's EOF while it still begins as a header.
    ("a v1 header of its own, cut short", b"PROXY TCP4 127", None),
    ("a v2 header of its own, cut short", V2_SIG[:6], None),
    # llhttp takes "HEAD /x" LF as HTTP/0.9 and refuses its head after the
    # next line; the line check refuses the bare LF first.
    ("a HEAD line ending in a bare LF", b"HEAD /x.txt\n\r\n", 400),
    # Two spaces before the version, in a head that on_headers_complete
    # refuses (a body to a route without POST: 405).
    ("a request line with two spaces, then a refused head",
     b"POST /x.txt  HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 400),
    # A character llhttp refuses itself after max_url: the limit comes first.
    ("a target past max_url, then a control character",
     b"GET /" + b"a" * 1100 + b"\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    # A HEAD answered, then bytes refused before a request begins (a bare
    # CR): the 400 is not a HEAD's.
    ("a HEAD, then a bare CR", b"HEAD /x.txt HTTP/1.1\r\nHost: x\r\n\r\n\r\rM\n\n", 200),
    # A tab before max_url (1k here), and the target goes on past it.
    ("a target with a tab, longer than max_url",
     b"GET /" + b"a" * 600 + b"\t" + b"a" * 500 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
]


def unread(port, source, sport):
    """The bytes the server's end of the connection from SOURCE:SPORT to
    PORT holds unread (None once it is gone): the kernel's sock_diag, as
    ss(8) asks it, for that one socket."""
    req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
    req += struct.pack("!HH", port, sport)
    req += socket.inet_aton("127.0.0.1") + bytes(12) + socket.inet_aton(source) + bytes(12)
    req += struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, no cookie
    # nlmsghdr: SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST
    msg = struct.pack("=IHHII", 16 + len(req), 20, 1, 1, 0) + req
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as nl:  # NETLINK_SOCK_DIAG
        nl.send(msg)
        reply = nl.recv(65536)
    if struct.unpack_from("=H", reply, 4)[0] == 2:  # NLMSG_ERROR: no such socket
        return None
    # inet_diag_msg after the header: 4 bytes, the 48-byte id, expires, rqueue
    return struct.unpack_from("=I", reply, 16 + 4 + 48 + 4)[0]


def exchange(srv, data, source, bytewise):
    """Sends DATA from SOURCE on a new connection (BYTEWISE: a byte at a
    time, each once the server has read the one before), then half-closes:
    the answer (its Date blanked), b"" when the server closed without one."""
    c = Conn(srv.port, source=source)
    sport = c.sock.getsockname()[1]
    try:
        pieces = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
        for piece in pieces:
            c.sock.sendall(piece)
            # Read once it is (or the connection has ended, or an answer came:
            # then the server reads no more, and the rest may as well wait in
            # its queue). A hang guard, not a check.
            poll(lambda: unread(srv.port, source, sport) in (0, None)
                 or select.select([c.sock], [], [], 0)[0], timeout=IO_TIMEOUT, interval=0.001)
        c.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # closed by the server: what it sent is still to be read
    try:
        out, _ = c.read_to_end()
    except OSError:
        out = bytes(c.buf)
    finally:
        c.close()
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: x", out)


def status(answer):
    return int(answer[9:12]) if answer.startswith(b"HTTP/1.1 ") else None


def silent_status(srv, data, source):
    """Sends DATA from SOURCE and no more, without a half-close: the first
    bytes of what comes back once the server ends the connection, and how
    it ended."""
    c = Conn(srv.port, source=source)
    c.sock.sendall(data)
    try:
        out, end = c.read_to_end()
    except ConnectionResetError:
        out, end = bytes(c.buf), "reset"
    finally:
        c.close()
    return out[:12], end


def unlisted(srv):
    with Conn(srv.admin_port, source=STRANGER) as c:
        st = json.loads(c.roundtrip("GET", "/stats").body)
    return st["connections"]["proxy_protocol"]["refused"]["unlisted"]


def main():
    conf = {"proxy_protocol_from": BALANCER, "header_timeout": "60s", "max_url": "1k"}
    with Server(files={"x.txt": b"hello"}, conf=conf, args=["--admin", "on"]) as srv:
        for what, data, want in CASES:
            for how, source, head in (("relayed", BALANCER, v1(CLIENT)),
                                      ("direct", STRANGER, b"")):
                got = {}
                for bytewise in (False, True):
                    before = unlisted(srv)
                    answer = exchange(srv, head + data, source, bytewise)
                    got[bytewise] = (answer, unlisted(srv) - before)
                counted = 1 if want is None else 0
                is_((status(got[False][0]), got[False][1]), (want, counted),
                    "%s, %s, whole: %s" % (what, how, want or "closed, unlisted"))
                is_(got[True], got[False], "%s, %s, a byte at a time: the same" % (what, how))

    # A client that begins a header of its own and then sends nothing more is
    # closed at its head's deadline, unanswered and counted, as it is at its
    # EOF (no 408: its request failed at its "X"). Sent whole, at once, as
    # header_timeout runs from the accept.
    conf["header_timeout"] = "%ds" % (2 * SLOW)
    with Server(files={"x.txt": b"hello"}, conf=conf, args=["--admin", "on"]) as srv:
        for how, source, head in (("relayed", BALANCER, v1(CLIENT)), ("direct", STRANGER, b"")):
            before = unlisted(srv)
            is_(silent_status(srv, head + b"PROXY TCP4 127", source), (b"", "closed"),
                "a v1 header of its own begun, %s, then silence: closed at header_timeout" % how)
            is_(unlisted(srv) - before, 1, "and counted under refused.unlisted")


run(main, timeout=300)
