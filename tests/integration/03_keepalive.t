#!/usr/bin/env python3
# Connection handling: HTTP/1.1 keep-alive by default, Connection: close
# in every spelling (close wins over keep-alive), HTTP/1.0 with and without
# keep-alive, pipelining (answers in order, also across large files and
# POST /gzip), requests split into tiny writes.
import socket
import threading
import time

from harness import (KiB, MiB, ProtocolError, Server, build_request, exchange, gunzip,
                     in_parallel, is_, like, note, ok, random_bytes, run, statuses)

FILES = {
    "a.txt": b"file a",
    "b.txt": b"file bb",
    "c.txt": b"file ccc",
    "big.bin": random_bytes(1 * MiB + 5, 7),
    "mid.bin": random_bytes(200 * KiB + 1, 8),
}


def test_keepalive(srv):
    with srv.conn() as conn:
        for i in range(20):
            name = "abc"[i % 3] + ".txt"
            resp = conn.roundtrip("GET", "/" + name)
            if not ok(resp.status == 200 and resp.body == FILES[name],
                      "keep-alive request %d on one connection" % (i + 1), repr(resp)):
                return
        ok("close" not in resp.tokens("Connection"), "HTTP/1.1 answer does not announce close",
           "Connection: %r" % resp.header("Connection"))
        is_(conn.wait_closed(0.3), "open", "connection stays open after 20 requests")

    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/a.txt", headers={"Connection": "close"})
        is_((resp.status, resp.body), (200, FILES["a.txt"]), "GET with Connection: close")
        note("Connection header of the answer: %r" % resp.header("Connection"))
        is_(conn.wait_closed(), "closed", "server closes after Connection: close")

    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/big.bin", headers={"Connection": "close"})
        ok(resp.status == 200 and resp.body == FILES["big.bin"],
           "1 MiB GET with Connection: close is complete", repr(resp))
        is_(conn.wait_closed(), "closed", "server closes after the 1 MiB body")


def test_http10(srv):
    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/b.txt", version="HTTP/1.0", host=False)
        like(resp.version, r"^HTTP/1\.[01]$", "HTTP/1.0 request: HTTP/1.x status line")
        is_((resp.status, resp.body), (200, FILES["b.txt"]), "HTTP/1.0 GET body")
        is_(conn.wait_closed(), "closed", "HTTP/1.0 without keep-alive: server closes")

    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/b.txt", version="HTTP/1.0",
                              headers={"Connection": "keep-alive"})
        is_((resp.status, resp.body), (200, FILES["b.txt"]), "HTTP/1.0 keep-alive: first")
        note("Connection header of the answer: %r" % resp.header("Connection"))
        ok(not resp.chunked, "HTTP/1.0 answer is not chunked")
        resp = conn.roundtrip("GET", "/c.txt", version="HTTP/1.0",
                              headers={"Connection": "keep-alive"})
        is_((resp.status, resp.body), (200, FILES["c.txt"]), "HTTP/1.0 keep-alive: second")
        resp = conn.roundtrip("GET", "/a.txt", version="HTTP/1.0")
        is_((resp.status, resp.body), (200, FILES["a.txt"]), "HTTP/1.0 third, without keep-alive")
        is_(conn.wait_closed(), "closed", "then the server closes")

    with srv.conn() as conn:
        resp = conn.roundtrip("HEAD", "/mid.bin", version="HTTP/1.0")
        is_((resp.status, resp.header("Content-Length")), (200, str(len(FILES["mid.bin"]))),
            "HTTP/1.0 HEAD")
        is_(conn.wait_closed(), "closed", "HTTP/1.0 HEAD: server closes")

# RFC 9112 9.6: once "close" is seen, no further request on the connection
# is processed, whatever else the Connection lines say.
CLOSE_SPELLINGS = [
    ("HTTP/1.0", [b"Connection: keep-alive, close"]),
    ("HTTP/1.0", [b"Connection: close, keep-alive"]),
    ("HTTP/1.0", [b"Connection: Keep-Alive, CLOSE"]),
    ("HTTP/1.0", [b"Connection: keep-alive", b"Connection: close"]),
    ("HTTP/1.1", [b"Connection: Close"]),
    ("HTTP/1.1", [b"Connection: CLOSE"]),
    ("HTTP/1.1", [b"Connection: keep-alive,close"]),
    ("HTTP/1.1", [b"Connection: keep-alive", b"Connection: close"]),
    ("HTTP/1.1", [b"Connection: foo", b"Connection: bar, close"]),
    ("HTTP/1.1", [b"Connection: foo,\t close \t, bar"]),
    ("HTTP/1.1", [b"Connection: close\t"]),
    ("HTTP/1.1", [b"Connection:\tclose"]),
]

# Options that only look like close: the connection stays open.
NOT_CLOSE = [b"Connection: closed", b"Connection: keep-alive, x-close", b"Connection: clo se",
             b"Connection: keep-alive", b"X-Connection: close"]


def test_close_spellings(srv):
    after = build_request("GET", "/b.txt")
    for version, lines in CLOSE_SPELLINGS:
        head = b"GET /a.txt " + version.encode() + b"\r\n"
        if version == "HTTP/1.1":
            head += b"Host: a\r\n"
        raw = head + b"".join(l + b"\r\n" for l in lines) + b"\r\n" + after
        desc = "%s %s" % (version, " + ".join(repr(l.decode()) for l in lines))
        data, end = exchange(srv.port, raw)
        head, _, rest = data.partition(b"\r\n\r\n")
        is_(statuses(head + b"\r\n"), [200], "%s: 200" % desc)
        is_(rest, FILES["a.txt"], "%s: the first body, and no answer to the pipelined request"
            % desc)
        is_(end, "closed", "%s: then the connection is closed" % desc)
        like(head.decode("latin-1"), r"(?im)^Connection:\s*close\s*$",
             "%s: the answer says Connection: close" % desc)
    # A streaming route: its answer is under way while the head is read.
    body = b"compress me " * 100
    raw = (b"POST /gzip HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, CLOSE\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body) + body + after)
    with srv.conn() as conn:
        conn.send(raw)
        resp = conn.read_response()
        ok(resp.status == 200 and gunzip(resp.body) == body, "POST /gzip with keep-alive, CLOSE",
           repr(resp))
        is_(conn.wait_closed(), "closed", "POST /gzip with keep-alive, CLOSE: closed, the "
            "pipelined request unanswered")
    for line in NOT_CLOSE:
        with srv.conn() as conn:
            conn.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\n" + line + b"\r\n\r\n" + after)
            got = [(r.status, r.body) for r in conn.read_responses(["GET", "GET"])]
            is_(got, [(200, FILES["a.txt"]), (200, FILES["b.txt"])],
                "%r is not close: both answered" % line.decode())


def pipeline(srv, reqs, desc, close_at_end=False):
    """Send reqs [(method, target, body)] in one write; check in-order answers."""
    raw = b""
    for i, (method, target, body) in enumerate(reqs):
        headers = {}
        if close_at_end and i == len(reqs) - 1:
            headers["Connection"] = "close"
        raw += build_request(method, target, body=body, headers=headers)
    with srv.conn() as conn:
        conn.send(raw)
        got = conn.read_responses([m for m, _, _ in reqs])
        for (method, target, body), resp in zip(reqs, got):
            if target == "/gzip":
                good = resp.status == 200 and gunzip(resp.body) == body
            elif target.startswith("/missing"):
                good = resp.status == 404
            elif method == "HEAD":
                good = (resp.status == 200 and
                        resp.header("Content-Length") == str(len(FILES[target[1:]])))
            else:
                good = resp.status == 200 and resp.body == FILES[target[1:]]
            ok(good, "%s: %s %s answered in order" % (desc, method, target), repr(resp))
        if close_at_end:
            is_(conn.wait_closed(), "closed", "%s: closed after the last" % desc)
        else:
            resp = conn.roundtrip("GET", "/a.txt")
            is_(resp.body, FILES["a.txt"], "%s: connection usable afterwards" % desc)


def test_pipelining(srv):
    pipeline(srv, [("GET", "/a.txt", None), ("GET", "/b.txt", None), ("GET", "/c.txt", None),
                   ("HEAD", "/b.txt", None), ("GET", "/missing.txt", None),
                   ("GET", "/a.txt", None)], "small files")
    pipeline(srv, [("GET", "/big.bin", None), ("GET", "/a.txt", None),
                   ("GET", "/mid.bin", None), ("HEAD", "/big.bin", None),
                   ("GET", "/c.txt", None)], "big file first")
    pipeline(srv, [("GET", "/a.txt", None), ("POST", "/gzip", b"compress me " * 1000),
                   ("GET", "/mid.bin", None), ("POST", "/gzip", b""), ("GET", "/b.txt", None)],
             "with POST /gzip")
    pipeline(srv, [("GET", "/a.txt", None), ("GET", "/b.txt", None), ("GET", "/c.txt", None)],
             "last with Connection: close", close_at_end=True)
    pipeline(srv, [("GET", "/a.txt", None)] * 100, "100 requests")


def test_split_writes(srv):
    raw = build_request("GET", "/c.txt", headers={"X-Padding": "p" * 40})
    with srv.conn() as conn:
        for i in range(len(raw)):
            conn.send(raw[i:i + 1])
            time.sleep(0.001)
        resp = conn.read_response()
        is_((resp.status, resp.body), (200, FILES["c.txt"]), "request sent one byte per write")
        body = b"0123456789" * 300
        raw = build_request("POST", "/gzip", body=body) + build_request("GET", "/a.txt")
        for i in range(0, len(raw), 97):
            conn.send(raw[i:i + 97])
        resp = conn.read_response()
        ok(resp.status == 200 and gunzip(resp.body) == body,
           "POST /gzip in 97-byte writes", repr(resp))
        resp = conn.read_response()
        is_((resp.status, resp.body), (200, FILES["a.txt"]),
            "GET sharing a write with the end of a POST body")


def test_half_close(srv):
    # The client sends its request and shuts down its side (like `nc -N`):
    # the answer must still come.
    with srv.conn() as conn:
        conn.request("GET", "/b.txt")
        conn.sock.shutdown(socket.SHUT_WR)
        try:
            resp = conn.read_response()
            got = (resp.status, resp.body)
        except (OSError, ProtocolError) as e:
            got = "no answer (%s)" % e
        is_(got, (200, FILES["b.txt"]), "answer after the client's half-close")
    with srv.conn() as conn:
        conn.send(build_request("GET", "/mid.bin") + build_request("GET", "/a.txt"))
        conn.sock.shutdown(socket.SHUT_WR)
        try:
            got = [(r.status, r.body) for r in conn.read_responses(["GET", "GET"])]
        except (OSError, ProtocolError) as e:
            got = "no answer (%s)" % e
        ok(got == [(200, FILES["mid.bin"]), (200, FILES["a.txt"])],
           "two pipelined answers after the client's half-close", "got %.200r" % (got,))


def test_get_with_body(srv):
    raw = (build_request("GET", "/a.txt", body=b"ignored body") +
           build_request("GET", "/b.txt", chunks=[b"chunked", b"ignored"]) +
           build_request("GET", "/c.txt"))
    with srv.conn() as conn:
        conn.send(raw)
        got = [(r.status, r.body) for r in conn.read_responses(["GET"] * 3)]
        is_(got, [(200, FILES["a.txt"]), (200, FILES["b.txt"]), (200, FILES["c.txt"])],
            "GETs with bodies are framed correctly in a pipeline")


def test_many_pipelined_slow_reader(srv):
    # 300 pipelined GETs of 200 KiB (60 MiB of answers) sent while the client
    # does not read at first: the server must stop reading requests, not
    # buffer answers, and then answer every one in order.
    n = 300
    raw = build_request("GET", "/mid.bin") * n
    with srv.conn(rcvbuf=64 * KiB) as conn:
        sender = threading.Thread(target=conn.send, args=(raw,), daemon=True)
        sender.start()
        time.sleep(0.3)
        rss = srv.rss_kib()
        good = 0
        for _ in range(n):
            resp = conn.read_response()
            good += resp.status == 200 and resp.body == FILES["mid.bin"]
        sender.join(5)
        is_(good, n, "%d pipelined 200 KiB answers to a slow reader, all complete" % n)
        note("RSS while the pipeline was stalled: %d KiB" % rss)


def test_concurrent(srv):
    def client(i):
        name = "abc"[i % 3] + ".txt"
        with srv.conn() as conn:
            bodies = [conn.roundtrip("GET", "/" + name).body for _ in range(5)]
        return bodies == [FILES[name]] * 5

    results = in_parallel(client, 50)
    ok(results == [True] * 50, "50 concurrent clients x 5 requests all answered",
       "failures: %r" % [r for r in results if r is not True][:5])


def main():
    with Server(files=FILES) as srv:
        test_keepalive(srv)
        test_http10(srv)
        test_close_spellings(srv)
        test_pipelining(srv)
        test_split_writes(srv)
        test_half_close(srv)
        test_get_with_body(srv)
        test_many_pipelined_slow_reader(srv)
        test_concurrent(srv)


run(main)
