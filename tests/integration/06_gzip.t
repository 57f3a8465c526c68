#!/usr/bin/env python3
# POST /gzip: the answer is application/gzip and decompresses to exactly the
# request body, for Content-Length and chunked bodies, at --gzip-partition
# 4k, 64k and whole; 413 beyond --gzip-max-body, sent before the body is; a
# chunked body that goes bad (413, a bad chunk, 408) while the response's
# first slot is not full gets its status, after that a reset; a long body's
# slices are bulk work, chunked too; a round trip through curl and the real
# gzip -d.
import os
import subprocess
import threading

from harness import (IO_TIMEOUT, SLOW, KiB, MiB, Conn, ProtocolError, Server, build_request, diag, exchange,
                     gunzip, in_parallel, is_, ok, poll, random_bytes, request, run, statuses,
                     text_bytes)

LIMIT = 2 * MiB
RANDOM_1M = random_bytes(MiB, 11)
MIXED = text_bytes(100 * KiB) + random_bytes(70 * KiB, 12) + text_bytes(90 * KiB + 3)

CASES = [
    ("0 B", b""),
    ("1 KiB text", text_bytes(KiB)),
    ("1 MiB random", RANDOM_1M),
    ("260 KiB mixed", MIXED),
]
CHUNKED = [
    ("chunked, 7 uneven chunks", [b"a", text_bytes(100), random_bytes(5000, 13),
                                  random_bytes(70000, 14), b"xyz", text_bytes(65536),
                                  random_bytes(12345, 15)]),
    ("chunked, 2000 chunks of 7 B", [b"%07d" % i for i in range(2000)]),
    ("chunked, one 1 MiB chunk", [RANDOM_1M]),
]


def check_answer(resp, want, desc):
    is_(resp.status, 200, "%s: 200" % desc)
    is_(resp.media_type, "application/gzip", "%s: Content-Type application/gzip" % desc)
    is_(resp.body[:2], b"\x1f\x8b", "%s: gzip magic" % desc)
    got = gunzip(resp.body)
    ok(got == want, "%s: decompresses to the request body (%d bytes)" % (desc, len(want)),
       "gzip.decompress: %s" % ("invalid gzip stream" if got is None else "%d bytes" % len(got)))


def check_partition(partition):
    with Server(args=["--gzip-partition", partition, "--gzip-max-body", str(LIMIT)],
                name="server at gzip " + partition) as srv:
        with srv.conn() as conn:
            for desc, body in CASES:
                resp = conn.roundtrip("POST", "/gzip", body=body)
                check_answer(resp, body, "--gzip-partition %s, %s" % (partition, desc))
            for desc, chunks in CHUNKED:
                resp = conn.roundtrip("POST", "/gzip", chunks=chunks)
                check_answer(resp, b"".join(chunks), "--gzip-partition %s, %s"
                             % (partition, desc))
        if partition != "4k":
            # A slice deflates 4 KiB per call (GZIP_STEP) and gives the CPU way
            # between calls once it has run 50 us of CPU: 1 MiB of random
            # bytes takes milliseconds.
            gave = srv.stats()["jobs"]["gzip"]["gave_way"]
            ok(gave > 0, "--gzip-partition %s: deflates gave the CPU way (%d times)"
               % (partition, gave))


def test_limits():
    with Server(args=["--gzip-max-body", "1m"], name="server with 1m limit") as srv:
        with Conn(srv.port) as conn:
            # Headers only: the 413 must come without waiting for the body.
            conn.send(build_request("POST", "/gzip", headers={"Content-Length": str(2 * MiB)}))
            try:
                resp = conn.read_response()
                status = resp.status
            except (OSError, ProtocolError) as e:
                status = "no answer (%s: %s)" % (type(e).__name__, e)
            is_(status, 413, "Content-Length 2 MiB over a 1m limit: 413 before the body")

        with Conn(srv.port) as conn:
            conn.send(build_request("POST", "/gzip", headers={"Content-Length": str(MiB + 1),
                                                              "Expect": "100-continue"}))
            try:
                status = conn.read_response().status
            except (OSError, ProtocolError) as e:
                status = "no answer (%s: %s)" % (type(e).__name__, e)
            is_(status, 413, "Content-Length 1 MiB + 1 with Expect: 100-continue: 413")

        resp = Conn(srv.port).roundtrip("POST", "/gzip", body=RANDOM_1M)
        check_answer(resp, RANDOM_1M, "exactly at the 1m limit")

        # Incompressible, the body's output fills the response's first slot
        # long before the body passes the limit: the 200 is out, and the
        # response ends cut short, with a reset.
        chunks = [random_bytes(64 * KiB, 16)] * 20
        data, end = exchange(srv.port, build_request("POST", "/gzip", chunks=chunks))
        is_((data[:15], end), (b"HTTP/1.1 200 OK", "reset"),
            "chunked random body of 1.25 MiB over a 1m limit: the response is cut by a reset")
        ok(not data.endswith(b"\r\n0\r\n\r\n"), "... without its last chunk")
        # With `whole`, nothing is out before the body is in: 413.
        with Server(args=["--gzip-max-body", "1m", "--gzip-partition", "whole"],
                    name="whole server with 1m limit") as whole:
            data, end = exchange(whole.port, build_request("POST", "/gzip", chunks=chunks))
            is_((data[:12], end), (b"HTTP/1.1 413", "closed"),
                "gzip_partition whole: a chunked body over the limit gets 413")

        resp = srv.get("/stats")
        is_(resp.status, 200, "server still answers after the 413s")


def test_status_held():
    """What deflates small stays in the response's first slot, with its head:
    until that slot is full, a body that goes bad still gets its status and
    a clean close, however much of it was deflated."""
    text = text_bytes(64 * KiB)
    with Server(name="server with the default 16m limit") as srv:
        # The issue's case: 16 MiB + 64 KiB of text deflate to about 16 KiB.
        chunks = [text] * (16 * 16 + 1)
        data, end = exchange(srv.port, build_request("POST", "/gzip", chunks=chunks), timeout=30)
        is_((data[:12], end), (b"HTTP/1.1 413", "closed"),
            "chunked text of 16 MiB + 64 KiB over the 16m limit: 413, then a close")
        is_(statuses(data), [413], "... and no other response")

        # A bad chunk after 192 KiB, three slices deflated.
        raw = build_request("POST", "/gzip", chunks=[text] * 3)[:-5] + b"zz\r\nhello\r\n"
        data, end = exchange(srv.port, raw)
        is_((data[:12], end), (b"HTTP/1.1 400", "closed"),
            "a bad chunk after 192 KiB of text: 400, then a close")

        resp = Conn(srv.port).roundtrip("POST", "/gzip", chunks=chunks[:5])
        check_answer(resp, text * 5, "after them, 320 KiB of chunked text")

    with Server(args=["--body-timeout", "500ms"], name="server with body_timeout 500ms") as srv:
        # 192 KiB of text, then silence (the body is not over).
        raw = build_request("POST", "/gzip", chunks=[text] * 3)[:-5]
        data, end = exchange(srv.port, raw)
        is_((data[:12], end), (b"HTTP/1.1 408", "closed"),
            "192 KiB of chunked text, then silence past body_timeout: 408, then a close")
        raw = build_request("POST", "/gzip", headers={"Content-Length": str(MiB)}, body=text)
        data, end = exchange(srv.port, raw)
        is_((data[:12], end), (b"HTTP/1.1 408", "closed"),
            "64 KiB of a 1 MiB Content-Length body, then silence: 408, then a close")


def test_framing():
    with Server(args=["--gzip-partition", "4k"], name="server for framing") as srv:
        body = text_bytes(50 * KiB)
        with Conn(srv.port) as conn:
            resp = conn.roundtrip("POST", "/gzip", body=body, version="HTTP/1.0", host=False)
            ok(not resp.chunked, "HTTP/1.0 POST /gzip: answer not chunked (1.0 has no chunks)",
               repr(resp.headers))
            check_answer(resp, body, "HTTP/1.0 POST /gzip")
            is_(conn.wait_closed(), "closed", "HTTP/1.0 POST /gzip: closed after")

        # Chunk extensions and trailers belong to the framing, not the body.
        raw = (b"POST /gzip HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
               b"GET /missing HTTP/1.1\r\nHost: a\r\n\r\n")
        with Conn(srv.port) as conn:
            conn.send(raw)
            resp = conn.read_response()
            check_answer(resp, b"hello world", "chunk extension and trailer")
            is_(conn.read_response().status, 404, "the request after the trailer is answered")

        with Conn(srv.port) as conn:
            resp = conn.roundtrip("POST", "/gzip", body=body, headers={"Connection": "close"})
            check_answer(resp, body, "POST /gzip with Connection: close")
            is_(conn.wait_closed(), "closed", "POST /gzip with Connection: close: closed after")


def test_concurrency_and_aborts():
    with Server(args=["--gzip-partition", "4k", "--threads", "2"],
                name="server for aborts") as srv:
        def post(i):
            resp = request(srv.port, "POST", "/gzip", body=RANDOM_1M[i:])
            return gunzip(resp.body) == RANDOM_1M[i:]

        is_(in_parallel(post, 4), [True] * 4, "4 concurrent 1 MiB POST /gzip on 2 threads at 4k")

        # Clients that leave with their gzip work queued or running.
        for i in range(10):
            with Conn(srv.port) as conn:
                raw = build_request("POST", "/gzip", body=RANDOM_1M)
                conn.send(raw if i % 2 else raw[:len(raw) // 2])
        ok(poll(srv.settled), "aborted uploads leave no connection or gzip job behind",
           repr(srv.stats()))
        resp = Conn(srv.port).roundtrip("POST", "/gzip", body=b"still here")
        check_answer(resp, b"still here", "POST /gzip after the aborts")


def test_curl():
    with Server(name="server for curl") as srv:
        path = os.path.join(srv.tmp, "upload.bin")
        with open(path, "wb") as f:
            f.write(MIXED)
        url = "http://127.0.0.1:%d/gzip" % srv.port
        for desc, extra in (("Content-Length", ""), ("chunked", "-H 'Transfer-Encoding: chunked'")):
            script = ("set -o pipefail; curl -sS --fail --max-time %d %s --data-binary @%s %s"
                      " | gzip -d | cmp - %s" % (30 * SLOW, extra, path, url, path))
            proc = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=60 * SLOW)
            is_(proc.returncode, 0, "curl --data-binary (%s) | gzip -d | cmp" % desc)
            if proc.returncode:
                diag(proc.stdout.decode("utf-8", "replace"))


def test_classes():
    """A long upload's slices are bulk work while more than 256 KiB of it is
    to come, and each is charged its bytes, chunked or not: a chunked body's
    rest is unknown, so it counts up to the limit."""
    body = random_bytes(2 * MiB, 17)
    chunks = [body[i:i + 64 * KiB] for i in range(0, len(body), 64 * KiB)]
    with Server(args=["--gzip-partition", "64k"], name="server for job classes") as srv:
        for desc, kw in (("Content-Length", {"body": body}), ("chunked", {"chunks": chunks})):
            before = srv.stats()["scheduler"]
            with srv.conn() as conn:
                check_answer(conn.roundtrip("POST", "/gzip", **kw), body, "2 MiB, " + desc)
            after = srv.stats()["scheduler"]
            bulk = after["bulk_started"] - before["bulk_started"]
            short = after["short_started"] - before["short_started"]
            ok(bulk >= 16, "2 MiB, %s: its 64k slices start as bulk work while much is to come "
               "(%d bulk, %d short)" % (desc, bulk, short))


def test_partition_lowered():
    """gzip_partition lowered by POST /settings while a chunked body streams
    in and its answer streams out: the rest of the body goes in 4k slices,
    each deflated with the body's window shut (the loop writes nothing a
    running job reads: under ThreadSanitizer, no report), and the answer is
    byte-exact."""
    body = random_bytes(4 * MiB, 18)
    head = build_request("POST", "/gzip", headers={"Transfer-Encoding": "chunked"})
    step = 16 * KiB
    pieces = [b"%x\r\n%s\r\n" % (step, body[i:i + step]) for i in range(0, len(body), step)]
    half = len(pieces) // 4
    with Server(args=["--admin", "on", "--gzip-partition", "64k", "--send-buffer", "4k"],
                name="server for a live gzip_partition") as srv:
        with Conn(srv.port, rcvbuf=16 * KiB) as conn:
            changed = threading.Event()

            def send():
                conn.send(head + b"".join(pieces[:half]))
                changed.wait(IO_TIMEOUT)
                for piece in pieces[half:]:
                    conn.send(piece)
                conn.send(b"0\r\n\r\n")

            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            ok(poll(lambda: srv.stats()["jobs"]["gzip"]["completed"] >= 2),
               "a chunked 4 MiB body is being deflated at 64k")
            with srv.admin_conn() as c:
                r = c.roundtrip("POST", "/settings", body=b"gzip_partition=4k",
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
            is_(r.status, 200, "POST /settings gzip_partition=4k mid-body")
            before = srv.stats()["jobs"]["gzip"]["completed"]
            changed.set()
            resp = conn.read_response()
            sender.join()
        check_answer(resp, body, "gzip_partition lowered mid-body")
        jobs = srv.stats()["jobs"]["gzip"]["completed"] - before
        ok(jobs >= 3 * MiB // (4 * KiB), "the body's last 3 MiB took 4k slices: %d jobs" % jobs)


def main():
    test_partition_lowered()
    for partition in ("4k", "64k", "whole"):
        check_partition(partition)
    test_classes()
    test_limits()
    test_status_held()
    test_framing()
    test_concurrency_and_aborts()
    test_curl()


run(main, timeout=180)
