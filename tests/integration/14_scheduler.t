#!/usr/bin/env python3
# The fair scheduler as a client sees it. One client (127.0.0.2) floods the
# pool with large downloads on FLOOD connections; every pool read is slow
# (emulate_disk), so each connection always has a bulk piece waiting. Then
# another client (127.0.0.3) asks for a small file, whose open and read are
# short work. With `scheduler = fair` they start on the thread bulk may not
# take, so the flood's clients receive at most a few pieces while the small
# request waits; with fifo they queue behind the flood's waiting pieces, so
# the flood's clients receive about one piece per flood connection per job
# first. Bytes the clients received, counted by the test: no timing, and no
# counter of the server's. Every body stays byte-exact.
import selectors
import threading

from harness import KiB, MiB, Conn, Server, is_, ok, poll, random_bytes, run

BIG = random_bytes(8 * MiB, 3)
SMALL = b"x" * KiB
PIECE = 64 * KiB
FLOOD = 12
ROUNDS = 3
# Fair: a short job starts on the reserved thread at once, while the one
# bulk thread goes on: a piece or two of the flood's arrive meanwhile (a
# few more if the loop is slow to send the small response). Fifo: the small
# request's open, then its read, each wait behind about FLOOD pieces.
FEW = FLOOD // 2


class Flood:
    """FLOOD connections asking for BIG; one thread reads them all and
    counts the bytes they received."""

    def __init__(self, srv):
        self.conns = [Conn(srv.port, source="127.0.0.2") for _ in range(FLOOD)]
        self.data = [bytearray() for _ in self.conns]
        self.received = 0
        self.stop = threading.Event()
        for c in self.conns:
            c.request("GET", "/big.bin")
        self.thread = threading.Thread(target=self.read)
        self.thread.start()

    def read(self):
        sel = selectors.DefaultSelector()
        for i, c in enumerate(self.conns):
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, i)
        while not self.stop.is_set():
            for key, _ in sel.select(0.05):
                try:
                    chunk = key.fileobj.recv(256 * KiB)
                except (BlockingIOError, InterruptedError):
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                self.data[key.data] += chunk
                self.received += len(chunk)
        sel.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        for c in self.conns:
            c.close()
        bad = 0
        for d in self.data:
            if not d:
                continue  # its first piece still waited: one bulk thread
            head, _, body = bytes(d).partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200") or BIG[:len(body)] != body:
                bad += 1
        return bad


def one(scheduler):
    srv = Server(files={"big.bin": BIG, "small.txt": SMALL},
                 # every read meets the pool, slowly: the small GET is short work
                 args=["--scheduler", scheduler, "--threads", "2", "--partition", str(PIECE),
                       "--file-cache", "off", "--loop-reads", "off", "--emulate-disk", "300ms"],
                 name="%s server" % scheduler)
    srv.start()
    flood = Flood(srv)
    ok(poll(lambda: flood.received >= 4 * PIECE, timeout=60),
       "%s: the flood's pieces arrive" % scheduler)
    meanwhile, bad = [], 0
    for _ in range(ROUNDS):
        with Conn(srv.port, source="127.0.0.3") as c:
            before = flood.received
            resp = c.roundtrip("GET", "/small.txt")
            meanwhile.append((flood.received - before) // PIECE)
            bad += resp.status != 200 or resp.body != SMALL
    is_(bad, 0, "%s: every small body is byte-exact" % scheduler)
    is_(flood.close(), 0, "%s: every flood body is byte-exact so far" % scheduler)
    is_(srv.stats()["scheduler"]["mode"], scheduler, "/stats names the scheduler")
    srv.stop()
    return meanwhile


def main():
    fair = one("fair")
    ok(max(fair) <= FEW, "fair: the flood's clients received at most %d pieces while each small "
       "request waited (%s)" % (FEW, fair))
    fifo = one("fifo")
    ok(min(fifo) > FEW, "fifo: more than %d while each waited behind the flood (%s)"
       % (FEW, fifo))


run(main)
