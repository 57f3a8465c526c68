"""The slow attacker of scenario 4, run as its own (pinned) process.

    python3 slow.py --port P --from ADDR[,ADDR...] --shape head|body|read [--conns N]
                    [--path PATH] [--interval S] [--duration S] [--every S] [--host ADDR]

Holds --conns connections from ADDR to 127.0.0.1:P (or --host's address:
127/8, or 192.0.2.0/24, the test hosts make loadtest-cluster makes in
network namespaces; ADDR likewise), each reopened as soon as
the server closes it (several ADDRs, comma-separated: connection i comes from
the (i mod n)-th, so each holds 1/n of them: make loadtest-attacks --attackers), and on each, every --interval seconds (the connections
spread over the interval):

    head  one more header line of a GET of PATH that never ends
    body  one more byte of a POST to PATH whose head says Content-Length: 16 MiB
    read  512 more bytes of a GET of PATH (the 16 MiB file), read through a
          receive buffer made tiny before connect (SO_RCVBUF)

One process, non-blocking sockets and a selector, no threads; RLIMIT_NOFILE
is raised to what --conns needs (up to the hard limit). Prints one JSON line,
as build/probe's hog does: {"mode": "slow-SHAPE", "requests" (responses whose
status line came), "refused" (503s), "errors" (connects that failed),
"server_closed", "conns_opened", "held_mean" (connections held, averaged over
the run), "req_s", "mb_s", ...}; with --every S also a line every S seconds
{"t", "window_s", "ok" (responses), "held"}.
"""

import argparse
import errno
import heapq
import json
import resource
import selectors
import socket
import sys
import time

BODY_SIZE = 16 << 20
READ_BYTES = 512
RCVBUF = 1024  # the kernel doubles it and keeps its own floor
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


class Conn:
    """One held connection: its socket, what it has sent, whether its head came."""

    serial = 0

    def __init__(self, slot, sock):
        Conn.serial += 1
        self.slot, self.sock, self.serial = slot, sock, Conn.serial
        self.connected = False
        self.lines = 0  # head: header lines sent after the request line
        self.head = b""  # the start of the response, until its status line
        self.answered = False


class Attacker:
    def __init__(self, args):
        self.args = args
        self.sel = selectors.DefaultSelector()
        self.conns = [None] * args.conns
        self.due = []  # heap of (time, slot, serial): a connection's turn, or 0: reopen the slot
        self.counts = dict(requests=0, refused=0, errors=0, server_closed=0, conns_opened=0)
        self.bytes = 0
        self.held = 0
        self.window_ok = 0

    # ---- connections

    def open(self, slot, when):
        """Connects in SLOT at once; its first turn comes at WHEN."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        if self.args.shape == "read":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)  # before connect
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        c = Conn(slot, s)
        self.conns[slot] = c
        self.counts["conns_opened"] += 1
        try:
            s.bind((self.args.sources[slot % len(self.args.sources)], 0))
            rc = s.connect_ex((self.args.host, self.args.port))
        except OSError:
            rc = -1
        if rc not in (0, errno.EINPROGRESS):
            self.fail(c)
            return
        self.sel.register(s, selectors.EVENT_WRITE, c)
        heapq.heappush(self.due, (when, slot, c.serial))

    def close(self, c, reopen_at=None):
        """Closes C; its slot opens again at REOPEN_AT (monotonic), if given."""
        if self.conns[c.slot] is not c:
            return
        if c.connected:
            self.held -= 1
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        self.conns[c.slot] = None
        if reopen_at is not None:
            heapq.heappush(self.due, (reopen_at, c.slot, 0))

    def fail(self, c):
        """A connect failed: the slot tries again a turn later, not in a tight loop."""
        self.counts["errors"] += 1
        self.close(c, time.monotonic() + self.args.interval)

    def on_connect(self, c):
        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.fail(c)
            return
        c.connected = True
        self.held += 1
        # head and body read what comes at once (a response, the end); read
        # reads on its timer only
        if self.args.shape == "read":
            self.sel.unregister(c.sock)
        else:
            self.sel.modify(c.sock, selectors.EVENT_READ, c)
        self.send(c, self.first(c))

    def first(self, c):
        a = self.args
        if a.shape == "body":
            return (f"POST {a.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: application/octet-stream\r\n"
                    f"Content-Length: {BODY_SIZE}\r\n\r\n").encode()
        if a.shape == "read":
            return f"GET {a.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        return f"GET {a.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()

    def send(self, c, data):
        try:
            c.sock.send(data)  # a few bytes into an empty buffer: whole or an error
        except BlockingIOError:
            pass
        except OSError:
            self.closed_by_server(c)

    def closed_by_server(self, c):
        """Reopened at once: the slot is the attacker's as long as it can hold it."""
        self.counts["server_closed"] += 1
        self.close(c, time.monotonic())

    def got(self, c, data):
        self.bytes += len(data)
        if c.answered:
            return
        c.head += data[:64]
        if b"\r\n" in c.head or len(c.head) >= 64:
            c.answered = True
            self.counts["requests"] += 1
            self.window_ok += 1
            if c.head.startswith((b"HTTP/1.1 503", b"HTTP/1.0 503")):
                self.counts["refused"] += 1

    def on_readable(self, c):
        try:
            data = c.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.closed_by_server(c)
        else:
            self.got(c, data)

    def tick(self, c):
        """C's turn, every --interval: one more line, byte or 512 bytes read."""
        shape = self.args.shape
        if shape == "head":
            c.lines += 1
            self.send(c, f"X-Slow-{c.lines}: 1\r\n".encode())
        elif shape == "body":
            self.send(c, b"x")
        else:
            try:
                data = c.sock.recv(READ_BYTES)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                self.closed_by_server(c)
                return
            if data:
                self.got(c, data)
        if self.conns[c.slot] is c:
            heapq.heappush(self.due, (time.monotonic() + self.args.interval, c.slot, c.serial))

    # ---- the run

    def run(self):
        a = self.args
        start = time.monotonic()
        end = start + a.duration
        for slot in range(a.conns):
            self.open(slot, start + a.interval * slot / a.conns)
        held_sum, last = 0.0, start
        next_every = start + a.every if a.every else None
        window_start = start
        while True:
            now = time.monotonic()
            if now >= end:
                break
            timeout = min(end, self.due[0][0] if self.due else end) - now
            for key, events in self.sel.select(timeout=max(0.0, min(timeout, 0.1))):
                c = key.data
                if self.conns[c.slot] is not c:
                    continue
                if not c.connected:
                    self.on_connect(c)
                else:
                    self.on_readable(c)
            now = time.monotonic()
            while self.due and self.due[0][0] <= now:
                _, slot, serial = heapq.heappop(self.due)
                c = self.conns[slot]
                if serial == 0 and c is None:
                    self.open(slot, now + a.interval)
                elif c is not None and c.serial == serial and c.connected:
                    self.tick(c)
            held_sum += self.held * (now - last)
            last = now
            if next_every and now >= next_every:
                print(json.dumps({"t": round(now - start, 3),
                                  "window_s": round(now - window_start, 3),
                                  "ok": self.window_ok, "errors": 0, "timeouts": 0,
                                  "held": self.held}), flush=True)
                self.window_ok, window_start = 0, now
                next_every += a.every
        secs = time.monotonic() - start
        for c in list(self.conns):
            if c is not None:
                self.close(c)
        return dict(mode=f"slow-{a.shape}", path=a.path, conns=a.conns, duration_s=round(secs, 3),
                    **self.counts, held_mean=round(held_sum / secs, 1),
                    req_s=round(self.counts["requests"] / secs, 1),
                    mb_s=round(self.bytes / secs / 1e6, 3))


def raise_nofile(needed):
    """Raises the soft RLIMIT_NOFILE to NEEDED (or the hard limit); False if that is short."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want >= needed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--from", dest="source", default="127.0.0.1",
                    help="source address, or several comma-separated (connections spread)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--shape", choices=("head", "body", "read"), required=True)
    ap.add_argument("--conns", type=int, default=4500)
    ap.add_argument("--path", default="/1k.bin")
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=0.0)
    args = ap.parse_args()
    args.sources = args.source.split(",")
    for what, addr in [("--from", a) for a in args.sources] + [("--host", args.host)]:
        if not addr.startswith(("127.", "192.0.2.")):
            sys.exit(f"slow.py: {what} must be in 127/8 or 192.0.2.0/24: this is a load-test tool")
    if not raise_nofile(args.conns + 64):
        sys.exit(f"slow.py: {args.conns} connections need {args.conns + 64} fds; "
                 f"RLIMIT_NOFILE's hard limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}")
    print(json.dumps(Attacker(args).run()), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
