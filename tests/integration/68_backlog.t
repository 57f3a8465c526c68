#!/usr/bin/env python3
# A burst of connections waits for accept() rather than being dropped: the
# public listener's backlog is max_connections (at least 511), as the kernel
# allows (net.core.somaxconn caps it), the admin door's 511. With the server
# stopped (SIGSTOP), 800 connections from another address all complete their
# handshake and wait in the accept queue (ss(8) shows its length); a backlog
# of 511 would hold 512 and drop the others' handshakes, each retried a
# second later by the client. Once the server runs again every one of them
# gets its answer. Counts from the kernel, never timings.
import resource
import signal
import socket
import struct

from harness import Server, is_, ok, poll, run

BURST = 800
MAX_CONNECTIONS = 1000


def somaxconn():
    with open("/proc/sys/net/core/somaxconn") as f:
        return int(f.read())


def listener(port):
    """(accept queue length, backlog) of the IPv4 socket listening on PORT:
    the kernel's sock_diag, as ss(8) asks it, for every listening socket."""
    req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 1 << 10)  # TCP_LISTEN
    req += bytes(48)  # any address, interface and cookie
    # nlmsghdr: SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP
    msg = struct.pack("=IHHII", 16 + len(req), 20, 0x301, 1, 0) + req
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as nl:  # NETLINK_SOCK_DIAG
        nl.send(msg)
        while True:
            reply = nl.recv(65536)
            at = 0
            while at + 16 <= len(reply):
                length, kind = struct.unpack_from("=IH", reply, at)
                if kind in (2, 3):  # NLMSG_ERROR, NLMSG_DONE
                    return None
                # inet_diag_msg: 4 bytes, then the id (sport first), expires,
                # rqueue (the accept queue), wqueue (the backlog)
                if struct.unpack_from("!H", reply, at + 20)[0] == port:
                    return struct.unpack_from("=II", reply, at + 16 + 4 + 48 + 4)
                at += (length + 3) & ~3


def body():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < BURST + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    cap = somaxconn()
    srv = Server(files={"x.txt": b"hello\n"},
                 args=["--max-connections", str(MAX_CONNECTIONS)]).start()
    is_(listener(srv.port)[1], min(MAX_CONNECTIONS, cap),
        "the public listener's backlog is max_connections")
    is_(listener(srv.admin_port)[1], min(511, cap), "the admin door's is 511")

    srv.send_signal(signal.SIGSTOP)
    socks = []
    try:
        for _ in range(BURST):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.port))
            socks.append(s)
        queued = poll(lambda: listener(srv.port)[0] >= min(BURST, cap) and
                      listener(srv.port)[0], timeout=10) or listener(srv.port)[0]
        is_(queued, min(BURST, cap), "every connection of the burst waits in the accept queue")
    finally:
        srv.send_signal(signal.SIGCONT)
    answered = 0
    for s in socks:
        s.settimeout(10)
        try:
            s.sendall(b"GET /x.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            answered += data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"hello\n")
        except OSError:
            pass
        s.close()
    is_(answered, BURST, "each of them gets its 200 once the server runs")
    ok(srv.alive(), "the server is up")
    srv.stop()


run(body)
