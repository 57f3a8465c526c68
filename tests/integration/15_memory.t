#!/usr/bin/env python3
# The buffer budget (max_buffer_memory): what responses hold at once stays
# within it; a response that does not fit waits its turn rather than fail,
# a small one does not wait behind big ones, and every byte arrives.
# /gzip deflates a body as it arrives, so what a connection holds does not
# grow with the body. Counters from /stats and bytes, not timings.
import select
import threading
import time

from harness import (IO_TIMEOUT, SANITIZED, SLOW, KiB, MiB, Conn, Server, build_request, gunzip,
                     in_parallel, is_, ok, poll, random_bytes, run, text_bytes)

BIG = random_bytes(MiB, 15)
SMALL = b"s" * KiB


def memory(srv):
    return srv.stats()["memory"]


def held_by(srv, client):
    """The buffer memory CLIENT's responses hold, by its top_clients row."""
    rows = srv.stats()["connections"]["top_clients"].values()
    return next((r["memory_held"] for r in rows if r["client"] == client), None)


def trickle_gzip():
    """Eight /gzip uploads from 127.0.0.3 trickle their bodies. Before a
    slice of theirs is in they hold only the input that arrived (a buffer of
    4 KiB that doubles as it fills), not a slice, zlib's state and a slot
    (about 410 KiB each, 3.3 MiB for eight: more than the budget). So
    127.0.0.2's 3 MiB download under a 2 MiB budget does not wait for them."""
    data = random_bytes(3 * MiB, 20)
    bodies = [random_bytes(70 * KiB, 30 + i) for i in range(8)]
    args = ["--sendfile", "off", "--max-buffer-memory", "2m", "--file-cache", "off", "--body-timeout", "60s"]
    head = build_request("POST", "/gzip", headers={"Transfer-Encoding": "chunked"})
    with Server(files={"big.bin": data}, args=args) as srv:
        uploads = [Conn(srv.port, source="127.0.0.3") for _ in bodies]
        for c, body in zip(uploads, bodies):
            c.send(head + b"1\r\n" + body[:1] + b"\r\n")
        ok(poll(lambda: memory(srv)["held"] == 8 * 4 * KiB),
           "eight uploads of a byte each hold 4 KiB each", memory(srv))
        is_(held_by(srv, "127.0.0.3"), 32 * KiB, "top_clients: 127.0.0.3 holds those 32 KiB")
        for c, body in zip(uploads, bodies):
            c.send(b"%x\r\n%s\r\n" % (5000, body[1:5001]))
        ok(poll(lambda: memory(srv)["held"] == 8 * 8 * KiB),
           "5,001 bytes each: their buffers doubled, 8 KiB each", memory(srv))
        with Conn(srv.port, source="127.0.0.2") as c:
            is_(c.roundtrip("GET", "/big.bin").body, data,
                "127.0.0.2's 3 MiB download under a 2 MiB budget completes meanwhile")
        is_(memory(srv)["waiting"], 0, "nothing waits")
        for c, body in zip(uploads, bodies):
            c.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body) - 5001, body[5001:]))
        answers = [c.read_response() for c in uploads]
        is_([a.status == 200 and gunzip(a.body) == b for a, b in zip(answers, bodies)],
            [True] * 8, "then the uploads end: each answer is byte-exact")
        for c in uploads:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "and all memory is given back")


def fair_share():
    """Under a 2 MiB budget, 127.0.0.3 holds all of it with a stalled
    download (two 1 MiB slots) when 127.0.0.2's download comes. 127.0.0.3 is
    past its share (the budget over the two clients) and its socket takes
    nothing more: it gives its slots back, and 127.0.0.2's download runs to
    its end while 127.0.0.3 still reads nothing (64_memory_gives_way.t has
    more). Once 127.0.0.3 reads, its file is byte-exact, and a small file
    of its own is served. (Loop reads off: a small file read on the loop
    takes no budget, as a cache hit.)"""
    data = random_bytes(3 * MiB, 21)
    args = ["--sendfile", "off", "--max-buffer-memory", "2m", "--partition", "1m", "--file-cache", "off",
            "--send-buffer", "4k", "--loop-reads", "off"]
    with Server(files={"big.bin": data, "small.txt": SMALL}, args=args) as srv:
        hog = Conn(srv.port, source="127.0.0.3", rcvbuf=16 * KiB)
        hog.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["held"] == 2 * MiB), "127.0.0.3's stalled download holds 2 MiB",
           memory(srv))
        is_(held_by(srv, "127.0.0.3"), 2 * MiB, "top_clients: 127.0.0.3 holds 2 MiB")
        with Conn(srv.port, source="127.0.0.2") as victim:
            is_(victim.roundtrip("GET", "/big.bin").body, data,
                "127.0.0.2's download completes while 127.0.0.3 reads nothing")
        ok(memory(srv)["given_back"] > 0, "127.0.0.3 gave its slots back", memory(srv))
        with Conn(srv.port, source="127.0.0.3") as small:
            small.request("GET", "/small.txt")
            is_(hog.read_response().body, data, "127.0.0.3 reads its download: byte-exact")
            is_(small.read_response().body, SMALL, "and its small file")
        hog.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "all memory is given back")


def stalled_whole():
    """Four clients stall 1 MiB `whole` downloads under a 2 MiB budget."""
    args = ["--sendfile", "off", "--partition", "whole", "--max-buffer-memory", "2m", "--file-cache", "off",
            "--send-buffer", "4k"]
    with Server(files={"big.bin": BIG, "small.txt": SMALL}, args=args) as srv:
        stalled = [Conn(srv.port, rcvbuf=16 * KiB) for _ in range(4)]
        for c in stalled:
            c.request("GET", "/big.bin")
        ok(poll(lambda: memory(srv)["waiting"] == 2), "two of four stalled downloads wait",
           memory(srv))
        is_(memory(srv)["held"], 2 * MiB, "the other two hold the budget, no more")
        is_(srv.get("/small.txt").body, SMALL, "a small file is served meanwhile (its own lane)")
        ok(gzip_roundtrip(srv.port, SMALL, False),
           "and a small /gzip body: its slice, window and hash are sized to it")
        # All at once: which two hold the budget is the server's choice.
        bodies = in_parallel(lambda i: stalled[i].read_response().body, 4)
        is_(sum(b != BIG for b in bodies), 0, "once read, all four are byte-exact")
        for c in stalled:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "every byte of the budget is given back")
        m = memory(srv)
        ok(m["peak"] <= 2 * MiB + 2 * MiB // 8, "peak within the budget and the small reserve", m)
        ok(m["waits"] >= 2 and m["waiting"] == 0, "the waits are counted, none is left", m)


def many_whole():
    """40 clients download a 2 MiB file in one piece under an 8 MiB budget."""
    data = random_bytes(2 * MiB, 16)
    args = ["--sendfile", "off", "--partition", "whole", "--max-buffer-memory", "8m", "--file-cache", "off"]
    with Server(files={"big.bin": data}, args=args) as srv:
        bodies = in_parallel(lambda i: srv.get("/big.bin").body, 40)
        is_(sum(b != data for b in bodies), 0, "40 whole downloads are byte-exact")
        m = memory(srv)
        ok(m["peak"] <= 8 * MiB, "their pieces never held more than the budget", m)
        ok(poll(lambda: memory(srv)["held"] == 0), "and all of it is given back")


def whole_beyond_budget():
    """`whole` of a file larger than the budget: read in pieces of the budget,
    or it could start only once nothing else held memory."""
    data = random_bytes(3 * MiB, 19)
    args = ["--sendfile", "off", "--partition", "whole", "--max-buffer-memory", "1m", "--file-cache", "off"]
    with Server(files={"big.bin": data}, args=args) as srv:
        is_(srv.get("/big.bin").body, data, "a 3 MiB file under a 1 MiB budget arrives whole")
        m = memory(srv)
        ok(m["peak"] <= MiB, "its pieces held no more than the budget", m)
        is_(srv.stats()["jobs"]["read"]["completed"], 3, "three reads of 1 MiB")


def gzip_roundtrip(port, data, chunked):
    """POST data to /gzip (chunked in uneven pieces, or with Content-Length)
    from a thread while reading the answer, as a streaming client must."""
    if chunked:
        cuts = list(range(0, len(data), 5000 + len(data) // 7)) + [len(data)]
        raw = build_request("POST", "/gzip", chunks=[data[a:b] for a, b in zip(cuts, cuts[1:])])
    else:
        raw = build_request("POST", "/gzip", body=data)
    with Conn(port) as c:
        sender = threading.Thread(target=c.send, args=(raw,), daemon=True)
        sender.start()
        resp = c.read_response()
        sender.join()
    return resp.status == 200 and gunzip(resp.body) == data


def gzip_matrix():
    """Byte-exact round trips, 0 B to 16 MiB, at each kind of slice. One
    byte per job is kept to small bodies: 16 MiB would be 16 M jobs."""
    data = random_bytes(16 * MiB, 17)
    sizes = [0, 1, 4095, 4096, 4097, 65535, 65536, 65537, MiB + 3, 16 * MiB]
    for partition in ["1", "4k", "64k", "whole"]:
        with Server(args=["--gzip-partition", partition]) as srv:
            bad = []
            for size in sizes if partition != "1" else [0, 1, 2, 3000]:
                for chunked in (False, True):
                    if not gzip_roundtrip(srv.port, data[:size], chunked):
                        bad.append((size, "chunked" if chunked else "length"))
            is_(bad, [], "gzip_partition %s: every body round-trips byte-exact" % partition)
            ok(poll(lambda: memory(srv)["held"] == 0), "gzip_partition %s: all memory given back"
               % partition)


def stalled_gzip(kind, chunk):
    """16 clients announce 16 MiB bodies, send 4 MiB each, read nothing and
    stall. Buffered whole, that is 64 MiB; streamed, each holds a slice of
    input, its output slots and zlib's state. Text deflates into the first
    slot, which keeps the response's head until it is full: nothing is sent
    yet, and no more is held."""
    n = 16
    # A busy machine may leave an upload unread for seconds: the body
    # timeout must not be what ends it here.
    # The socket holds what it held when this was written (a fixed send
    # buffer; send_buffer defaults to the kernel's autotuning, send_lowat to
    # a bound on unsent bytes), so that 8 slices of each upload complete.
    args = ["--body-timeout", "60s", "--send-buffer", "256k", "--send-lowat", "off"]
    with Server(files={"small.txt": SMALL}, args=args) as srv:
        base = srv.rss_kib()
        clients = [Conn(srv.port, rcvbuf=64 * KiB) for _ in range(n)]

        def send(c):
            try:
                c.send(build_request("POST", "/gzip", headers={"Content-Length": str(16 * MiB)})
                       + chunk)
            except OSError:
                pass  # the server stopped taking the body: the client reads nothing

        for c in clients:
            c.sock.settimeout(2 * SLOW if kind != "text" else IO_TIMEOUT)
            threading.Thread(target=send, args=(c,), daemon=True).start()
        ok(poll(lambda: srv.stats()["jobs"]["gzip"]["completed"] >= n * 8),
           "the %d uploads of %s are being deflated" % (n, kind))
        held = memory(srv)["held"]
        ok(held <= n * 640 * KiB, "they hold at most 640 KiB each by the budget", held)
        if kind == "text":
            ok(poll(lambda: srv.stats()["jobs"]["gzip"]["completed"] >= n * 64),
               "all of their 4 MiB is deflated")
            is_([readable(c) for c in clients], [False] * n,
                "none of them has had a byte of its response: the head waits")
        is_(srv.get("/small.txt").body, SMALL, "another client is served meanwhile")
        ok(gzip_roundtrip(srv.port, SMALL, True), "and its /gzip body round-trips")
        grown = srv.rss_kib() - base
        if SANITIZED:
            ok(True, "# SKIP RSS under a sanitizer (its shadow and quarantine count in it)")
        else:
            ok(grown < n * MiB // KiB, "RSS grew %d KiB, under 1 MiB per stalled upload" % grown)
        for c in clients:
            c.close()
        ok(poll(lambda: memory(srv)["held"] == 0), "once they are gone, all memory is given back")


def readable(conn):
    """Whether conn has bytes from the server to read now."""
    return bool(select.select([conn.sock], [], [], 0)[0])


def late_reader():
    """A client sends 8 MiB of incompressible body, then reads only after a
    pause longer than body_timeout. The server stops taking the body while
    the answer waits for the client: that is the send timeout's business,
    not the body timeout's, and the answer comes whole."""
    data = random_bytes(8 * MiB, 19)
    with Server(args=["--body-timeout", "1s"]) as srv:
        with Conn(srv.port) as c:
            raw = build_request("POST", "/gzip", body=data)
            sender = threading.Thread(target=c.send, args=(raw,), daemon=True)
            sender.start()
            time.sleep(2.5)
            resp = c.read_response()
            sender.join()
        ok(resp.status == 200 and gunzip(resp.body) == data,
           "read 2.5 s late with body_timeout 1s, the answer is whole")


def main():
    trickle_gzip()
    fair_share()
    stalled_whole()
    many_whole()
    whole_beyond_budget()
    gzip_matrix()
    stalled_gzip("random bytes", random_bytes(4 * MiB, 18))
    stalled_gzip("text", text_bytes(4 * MiB))
    late_reader()


run(main)
