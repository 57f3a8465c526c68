#!/usr/bin/env python3
# zlib's deflate states are reused from one stream to the next
# (server/pool/zstates.c): POST /gzip after POST /gzip allocates fewer states
# than it runs streams (/stats zlib.allocs < zlib.streams, zlib.reused > 0),
# and every answer gunzips to its body byte for byte, also right after
# streams cut short in the middle: uploads whose client vanished (a reset)
# after some of their slices were deflated, and a chunked body refused with
# 413. Files gzipped on the fly and gzipped listings take their states from
# the same place. An idle state's memory is the budget's `kept`; the
# /metrics families mirror the counters.
import socket
import struct

from harness import KiB, MiB, Conn, Server, build_request, exchange, gunzip, is_, ok, poll, \
    random_bytes, run, text_bytes

LIMIT = MiB
TEXT = text_bytes(100 * KiB)
RANDOM = random_bytes(200 * KiB, 59)
FILES = {"page.txt": text_bytes(64 * KiB + 5)}
FILES.update({"dir/entry-%03d.txt" % i: b"x" for i in range(60)})


def zlib(srv):
    return srv.stats()["zlib"]


def settled_zlib(srv, streams):
    """The counters once STREAMS streams have given their state back (a
    response's last byte may reach us just before its release)."""
    poll(lambda: zlib(srv)["streams"] >= streams, timeout=10)
    return zlib(srv)


def check_gzip(conn, body, desc, chunks=None):
    if chunks is not None:
        resp = conn.roundtrip("POST", "/gzip", chunks=chunks)
    else:
        resp = conn.roundtrip("POST", "/gzip", body=body)
    got = gunzip(resp.body) if resp.status == 200 else None
    ok(resp.status == 200 and got == body,
       "%s: 200, gunzips to the body (%d bytes)" % (desc, len(body)),
       "status %d, %s" % (resp.status, "not gzip" if got is None else "%d bytes" % len(got)))


def series(srv, n, desc):
    with srv.conn() as conn:
        for i in range(n):
            check_gzip(conn, TEXT, "%s: POST /gzip %d of %d, 100 KiB of text" % (desc, i + 1, n))


def vanish(srv, sent):
    """An upload of 1 MiB of random bytes whose client resets the connection
    once SENT bytes are out and some slices deflated, its answer unread."""
    before = srv.stats()["jobs"]["gzip"]["completed"]
    c = Conn(srv.port)
    c.send(build_request("POST", "/gzip", headers={"Content-Length": str(LIMIT)}))
    c.send(random_bytes(sent, sent))
    deflated = poll(lambda: srv.stats()["jobs"]["gzip"]["completed"] > before, timeout=10)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    return deflated


def stall(srv):
    """An upload of 1 MiB of random bytes whose client reads nothing of its
    answer (a small receive buffer, the server's --send-buffer small too):
    the answer fills the sockets, deflating stops with input still in zlib
    (a slice whose output did not fit the slot), and the client resets."""
    gzip = lambda: srv.stats()["jobs"]["gzip"]
    c = Conn(srv.port, rcvbuf=4096)
    c.send(build_request("POST", "/gzip", body=random_bytes(LIMIT, 60)))
    last = [None]

    def still():
        now = gzip()
        same = now["in_flight"] == 0 and now["completed"] == last[0]
        last[0] = now["completed"]
        return same

    stalled = poll(still, timeout=10, interval=0.3)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    return stalled


def main():
    with Server(files=FILES, args=["--gzip-partition", "4k", "--gzip-max-body", str(LIMIT),
                                   "--listing", "on", "--send-buffer", "8k"],
                name="server at gzip_partition 4k") as srv:
        n = 20
        series(srv, n, "first series")
        z = settled_zlib(srv, n)
        is_(z["streams"], n, "%d streams counted" % n)
        ok(z["allocs"] < z["streams"], "fewer states allocated than streams (%d < %d)"
           % (z["allocs"], z["streams"]), z)
        is_(z["reused"] + z["allocs"], z["streams"], "every stream reused a state or allocated one")
        ok(z["idle"] >= 1, "a state waits for the next stream", z)
        mem = srv.stats()["memory"]
        ok(mem["kept"] > 0 and mem["held"] == 0, "its memory is kept in the budget, none held",
           mem)

        for sent in (96 * KiB, 300 * KiB, 700 * KiB):
            ok(vanish(srv, sent), "an upload cut by its client after %d KiB: slices deflated first"
               % (sent // KiB))
        for i in range(3):
            ok(stall(srv), "an upload whose answer is not read, %d: deflating stalls, then a reset"
               % (i + 1))
        poll(srv.settled, timeout=10)
        # A chunked body of text past the limit: text deflates small, so the
        # first slot is not full and the body gets its status.
        data, end = exchange(srv.port, build_request("POST", "/gzip", chunks=[TEXT] * 11),
                             timeout=10)
        is_((data[:12], end), (b"HTTP/1.1 413", "closed"),
            "1.1 MiB of chunked text past a 1m limit, deflated as it came: 413, then a close")
        poll(srv.settled, timeout=10)

        cut = zlib(srv)
        ok(cut["streams"] >= n + 7, "the cut streams count too (%d)" % cut["streams"], cut)
        with srv.conn() as conn:
            for i in range(3):
                check_gzip(conn, TEXT, "after the cut streams, 100 KiB of text, %d" % (i + 1))
                check_gzip(conn, RANDOM, "after the cut streams, 200 KiB random, %d" % (i + 1))
                check_gzip(conn, TEXT + RANDOM, "after the cut streams, chunked, %d" % (i + 1),
                           chunks=[TEXT, RANDOM])
                # A smaller window and hash: a state of its own kind.
                check_gzip(conn, TEXT[:KiB], "after the cut streams, 1 KiB of text, %d" % (i + 1))
        z = settled_zlib(srv, cut["streams"] + 12)
        ok(z["reused"] > cut["reused"] + 6, "the streams after them reused states (%d more)"
           % (z["reused"] - cut["reused"]), z)
        ok(z["allocs"] < z["streams"], "still fewer states than streams (%d < %d)"
           % (z["allocs"], z["streams"]), z)

        # A file gzipped on the fly, and a listing, twice each.
        before = zlib(srv)
        for i in range(2):
            resp = srv.get("/page.txt", headers={"Accept-Encoding": "gzip"})
            ok(resp.header("Content-Encoding") == "gzip" and gunzip(resp.body) == FILES["page.txt"],
               "a file gzipped on the fly, %d: gunzips to the file" % (i + 1))
            resp = srv.get("/dir/", headers={"Accept-Encoding": "gzip"})
            page = gunzip(resp.body) if resp.header("Content-Encoding") == "gzip" else None
            ok(page is not None and b"entry-059.txt" in page,
               "a gzipped listing, %d: gunzips to the page" % (i + 1))
        z = settled_zlib(srv, before["streams"] + 4)
        is_(z["streams"] - before["streams"], 4, "the files and listings are streams too")
        ok(z["reused"] - before["reused"] >= 2, "... and reuse states (%d of 4)"
           % (z["reused"] - before["reused"]), z)

        metrics = srv.get("/metrics").body.decode()
        for family in ("unclog_zlib_streams_total", "unclog_zlib_state_allocs_total",
                       "unclog_zlib_states_reused_total", "unclog_buffer_memory_kept_bytes"):
            ok(("\n%s " % family) in metrics, "/metrics has %s" % family)


run(main)
