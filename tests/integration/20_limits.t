#!/usr/bin/env python3
# Limits: a request-target over max_url gets 414, a header block over
# max_header_size or more than max_headers lines 431, a body over max_body
# 413 (before any of it is read when Content-Length says so), its text
# naming the key and its value. POST /gzip has gzip_max_body in place of
# max_body, above it too, Content-Length or chunked; its 413s count under
# the route /gzip, refusals before routing under "none". Each error closes
# its connection while a client on another connection is served
# throughout. Also: the defaults, and the new keys in the configuration
# file, on the command line and in --help.

import re

from harness import (KiB, MiB, Server, build_request, exchange, gunzip, is_, like, ok, poll,
                     run, run_bin, run_with_conf, statuses, text_bytes)

FILES = {"x.txt": b"hello"}
LIMITS = {"max_url": "1k", "max_header_size": "2k", "max_headers": "10", "max_body": "64k",
          "gzip_max_body": "96k"}
OVER_MAX_BODY = b"413 Content Too Large: request body over max_body (64k)\n"
OVER_GZIP_MAX_BODY = b"413 Content Too Large: request body over gzip_max_body (96k)\n"


def expect_error(srv, watcher, raw, status, desc):
    data, end = exchange(srv.port, raw)
    is_(statuses(data), [status], "%s: one %d answer" % (desc, status))
    is_(end, "closed", "%s: then the connection is closed" % desc)
    resp = watcher.roundtrip("GET", "/x.txt")
    is_((resp.status, resp.body), (200, b"hello"), "%s: another client is still served" % desc)


def expect_status(srv, raw, status, desc):
    data, _ = exchange(srv.port, raw)
    is_(statuses(data)[:1], [status], desc)


def get(target, headers=None):
    """A GET of target with Host, Connection: close and headers."""
    return build_request("GET", target, headers=dict(headers or {}, Connection="close"))


def target(size):
    """A target of size bytes naming /x.txt."""
    return "/x.txt?" + "q" * (size - 7)


def padded_headers(count, name="X-H", value="v"):
    return [("%s-%d" % (name, i), value) for i in range(count)]


def test_configured(srv):
    with srv.conn() as watcher:
        # Host: 127.0.0.1 and Connection: close come with every request.
        # Long targets are padded in the query: the path of a file is shorter.
        expect_status(srv, get(target(1024)), 200, "a 1024-byte target is within max_url 1k")
        expect_error(srv, watcher, get(target(1025)), 414, "a 1025-byte target")
        expect_error(srv, watcher, get("/x.txt?" + "q" * 5000), 414, "a 5 KiB query")

        # Header bytes count names, values and 4 bytes of ": " and CRLF per line.
        expect_status(srv, get("/x.txt", {"X-Pad": "p" * 1990}), 200,
                      "a 2 KiB header block is within max_header_size 2k")
        expect_error(srv, watcher, get("/x.txt", {"X-Pad": "p" * 2100}), 431,
                     "a header block over 2 KiB")
        expect_error(srv, watcher, get("/x.txt", dict(padded_headers(60, value="v" * 30))), 431,
                     "60 headers of 40 bytes")

        expect_status(srv, get("/x.txt", dict(padded_headers(8))), 200,
                      "10 header lines are within max_headers 10")
        expect_error(srv, watcher, get("/x.txt", dict(padded_headers(9))), 431, "11 header lines")

        # 413 comes before the body: only the head is sent. Its text names
        # the limit and its value.
        head = b"POST /x.txt HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n"
        expect_error(srv, watcher, head % (64 * KiB + 1), 413,
                     "Content-Length over max_body, body not sent")
        expect_error(srv, watcher, head % (10 ** 15), 413, "a petabyte Content-Length")
        data, end = exchange(srv.port, b"POST /x.txt HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                                       b"Content-Length: 1048576\r\n\r\n")
        is_(statuses(data), [413], "Expect: 100-continue over max_body: 413 and no 100 Continue")
        expect_text(srv, watcher, b"GET /x.txt HTTP/1.1\r\nHost: a\r\nContent-Length: 70000\r\n"
                    b"\r\n", OVER_MAX_BODY, "a GET announcing a body over max_body")
        chunks = [b"c" * 16 * KiB] * 5
        expect_text(srv, watcher, build_request("GET", "/x.txt", chunks=chunks), OVER_MAX_BODY,
                    "a chunked body growing past max_body")
        expect_error(srv, watcher, b"POST /gzip HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                     b"\r\n5;x=" + b"e" * 3000 + b"\r\nhello\r\n0\r\n\r\n", 400,
                     "a chunk extension longer than max_header_size")


def expect_text(srv, watcher, raw, text, desc):
    """expect_error for a 413 whose body is TEXT."""
    data, end = exchange(srv.port, raw)
    is_(statuses(data), [413], "%s: one 413 answer" % desc)
    is_(data.partition(b"\r\n\r\n")[2], text, "%s: its text names the limit" % desc)
    is_(end, "closed", "%s: then the connection is closed" % desc)
    resp = watcher.roundtrip("GET", "/x.txt")
    is_((resp.status, resp.body), (200, b"hello"), "%s: another client is still served" % desc)


def gzip_responses(srv):
    """POST /gzip's responses in class 4xx, by /stats and by /metrics."""
    stats = srv.stats()["responses"]["/gzip"]["4xx"]
    metrics = srv.get("/metrics").body.decode()
    m = re.search(r'(?m)^unclog_http_responses_total\{route="/gzip",code="4xx"\} (\d+)$', metrics)
    return stats, int(m.group(1)) if m else None


def test_gzip_limit(srv):
    """With gzip_max_body 96k over max_body 64k, /gzip takes up to 96 KiB,
    Content-Length or chunked; past it, 413 names gzip_max_body and counts
    under the route /gzip."""
    with srv.conn() as watcher:
        before = gzip_responses(srv)
        for desc, kw in (("Content-Length", {"body": text_bytes(80 * KiB)}),
                         ("chunked", {"chunks": [text_bytes(16 * KiB)] * 5})):
            resp = srv.request("POST", "/gzip", **kw)
            want = kw.get("body") or b"".join(kw.get("chunks", []))
            ok(resp.status == 200 and gunzip(resp.body) == want,
               "/gzip: an 80 KiB %s body, over max_body, within gzip_max_body, is served" % desc,
               repr(resp))
        body = text_bytes(96 * KiB)
        resp = srv.request("POST", "/gzip", body=body)
        ok(resp.status == 200 and gunzip(resp.body) == body,
           "/gzip: a body of exactly gzip_max_body is served", repr(resp))
        head = b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n"
        expect_text(srv, watcher, head % (96 * KiB + 1), OVER_GZIP_MAX_BODY,
                    "/gzip: Content-Length over gzip_max_body")
        # Its 200 waits until a slot of output is full, which 112 KiB of
        # text cannot fill: past the limit, 413 (06_gzip.t has the reset
        # that comes later).
        expect_text(srv, watcher, build_request("POST", "/gzip", chunks=[text_bytes(16 * KiB)] * 7),
                    OVER_GZIP_MAX_BODY, "/gzip: a chunked body growing past gzip_max_body")
        after = gzip_responses(srv)
    is_((after[0] - before[0], after[1] - before[1]), (2, 2),
        "the two 413s of /gzip count under route /gzip, in /stats and in /metrics")


def test_route_rows(srv):
    """Refusals before routing count under route "none"; "unrouted" is for
    targets no module claims without a fallback, which unclog does not
    lack: a missing file is the files route's 404."""
    def rows():
        st = srv.stats()["responses"]
        return (st["none"]["4xx"], st["static"]["4xx"], sum(st["unrouted"].values()))
    before = rows()
    for raw in (get(target(1025)), get("/x.txt", dict(padded_headers(9))), b"GARBAGE\r\n\r\n"):
        exchange(srv.port, raw)
    is_(srv.get("/missing.txt").status, 404, "a missing file: 404")
    want = (before[0] + 3, before[1] + 1, 0)
    poll(lambda: rows() == want)
    is_(rows(), want, "414, 431 and 400 before routing count under none, a 404 under static, "
        "and unrouted stays 0")


def test_gzip_limit_large():
    """The user's case: --gzip-max-body 32m with max_body at its 16m."""
    with Server(files=FILES, args=["--gzip-max-body", "32m"], name="gzip 32m server") as srv:
        body = text_bytes(20 * MiB)
        for desc, kw in (("Content-Length", {"body": body}),
                         ("chunked", {"chunks": [body[i:i + MiB] for i in range(0, len(body), MiB)]})):
            resp = srv.request("POST", "/gzip", **kw)
            ok(resp.status == 200 and gunzip(resp.body) == body,
               "--gzip-max-body 32m: a 20 MiB %s upload to /gzip is served" % desc,
               "status %d, %d bytes" % (resp.status, len(resp.body)))
        with srv.conn() as watcher:
            head = b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n"
            expect_text(srv, watcher, head % (b"/gzip", 32 * MiB + 1),
                        b"413 Content Too Large: request body over gzip_max_body (32m)\n",
                        "--gzip-max-body 32m: a /gzip body of 32 MiB + 1")
            expect_text(srv, watcher, head % (b"/x.txt", 20 * MiB),
                        b"413 Content Too Large: request body over max_body (16m)\n",
                        "--gzip-max-body 32m: other routes keep max_body")


def test_defaults(srv):
    with srv.conn() as watcher:
        expect_status(srv, get(target(8192)), 200, "defaults: an 8 KiB target is served")
        expect_error(srv, watcher, get(target(8193)), 414, "defaults: 8 KiB + 1 target")
        expect_status(srv, get("/x.txt", dict(padded_headers(98))), 200,
                      "defaults: 100 header lines are served")
        expect_error(srv, watcher, get("/x.txt", dict(padded_headers(99))), 431,
                     "defaults: 101 header lines")
        expect_status(srv, get("/x.txt", {"X-Pad": "p" * 16000}), 200,
                      "defaults: a 16000-byte header is served")
        expect_error(srv, watcher, get("/x.txt", {"X-Pad": "p" * 16400}), 431,
                     "defaults: a header block over 16 KiB")
        expect_error(srv, watcher, get("/x.txt", {"X-Pad": "p" * MiB}), 431,
                     "defaults: a 1 MiB header")


def test_config():
    for text, line, what in (("max_url = 100\n", 1, "max_url"),
                             ("\nheader_timeout = 10x\n", 2, "header_timeout"),
                             ("send_timeout = 0\n", 1, "send_timeout"),
                             ("keepalive_timeout = 2h\n", 1, "keepalive_timeout"),
                             ("max_connections = -1\n", 1, "max_connections")):
        status, _, err, _ = run_with_conf(text)
        is_(status, 2, "%r: exit status 2" % text.strip())
        like(err, r"bad\.conf:%d: %s" % (line, what), "%r: FILE:LINE: message" % text.strip())
    status, _, err = run_bin(["--body-timeout", "1.5s"])
    is_(status, 2, "--body-timeout 1.5s: exit status 2")
    status, out, _ = run_bin(["--help"])
    for flag in ("--max-connections", "--max-url", "--max-header-size", "--max-headers",
                 "--max-body", "--header-timeout", "--body-timeout", "--keepalive-timeout",
                 "--send-timeout"):
        like(out, r"(?m)^\s+%s " % flag, "--help lists %s" % flag)


def main():
    with Server(files=FILES, conf=LIMITS) as srv:
        test_configured(srv)
        test_gzip_limit(srv)
        test_route_rows(srv)
    test_gzip_limit_large()
    with Server(files=FILES, name="default server") as srv:
        test_defaults(srv)
    with Server(files=FILES, name="flag server",
                args=["--max-url", "300", "--header-timeout", "2s"]) as srv:
        expect_status(srv, get(target(300)), 200, "--max-url 300: a 300-byte target")
        expect_status(srv, get(target(301)), 414, "--max-url 300: a 301-byte target")
    test_config()


run(main)
