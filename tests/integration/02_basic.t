#!/usr/bin/env python3
# GET and HEAD of files: bodies, Content-Length, Content-Type by extension,
# Date and Server; directories and their redirect; percent-decoding and query
# strings; 404, 405 with Allow, 400 for garbage; the server survives abuse.
import email.utils
import os
import time
import urllib.parse

from harness import (IMF_FIXDATE, Conn, ProtocolError, Server, is_, like, note, ok, random_bytes,
                     run)

FILES = {
    "index.html": b"<!doctype html><title>root</title>\n",
    "style.css": b"body { color: red }\n",
    "app.js": b"console.log('hi');\n",
    "data.json": b'{"a": 1}\n',
    "notes.txt": b"plain text\n",
    "img.png": b"\x89PNG\r\n\x1a\n" + random_bytes(300, 1),
    "pic.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>\n",
    "mod.wasm": b"\x00asm\x01\x00\x00\x00",
    "blob.xyz": random_bytes(1000, 2),
    "noext": b"no extension",
    "empty.txt": b"",
    "x.txt": b"hello",
    "a b.txt": b"with a space",
    "sub/index.html": b"<p>sub index</p>\n",
    "sub/other.txt": b"other",
    "noindex/file.txt": b"f",
    "mid.bin": random_bytes(300 * 1024 + 3, 3),
}

MEDIA = {
    "index.html": "text/html",
    "style.css": "text/css",
    "app.js": "text/javascript",
    "data.json": "application/json",
    "notes.txt": "text/plain",
    "img.png": "image/png",
    "pic.svg": "image/svg+xml",
    "mod.wasm": "application/wasm",
    "blob.xyz": "application/octet-stream",
    "noext": "application/octet-stream",
}


def check_file(srv, conn, name):
    target = "/" + urllib.parse.quote(name)
    data = FILES[name]
    resp = conn.roundtrip("GET", target)
    is_(resp.status, 200, "GET %s: 200" % target)
    ok(resp.body == data, "GET %s: body is the file (%d bytes)" % (target, len(data)),
       "got %d bytes" % len(resp.body))
    if not resp.chunked:
        is_(resp.header("Content-Length"), str(len(data)), "GET %s: Content-Length" % target)
    if name in MEDIA:
        is_(resp.media_type, MEDIA[name], "GET %s: Content-Type" % target)
    like(resp.header("Date", ""), IMF_FIXDATE, "GET %s: Date is an IMF-fixdate" % target)
    ok(resp.header("Server"), "GET %s: Server header" % target)

    head = conn.roundtrip("HEAD", target)
    is_(head.status, 200, "HEAD %s: 200" % target)
    for h in ("Content-Length", "Content-Type"):
        is_(head.header(h), resp.header(h), "HEAD %s: same %s as GET" % (target, h))
    ok(head.has_header("Date") and head.has_header("Server"), "HEAD %s: Date and Server" % target)


def test_files(srv):
    with srv.conn() as conn:
        for name in FILES:
            if name in MEDIA or name in ("empty.txt", "mid.bin", "x.txt"):
                check_file(srv, conn, name)
        # HEAD sent no body: the next response on the same socket parses.
        resp = conn.roundtrip("GET", "/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "GET after the HEADs on one connection")


def test_directories(srv):
    resp = srv.get("/")
    is_((resp.status, resp.body), (200, FILES["index.html"]), "GET / serves index.html")
    is_(resp.media_type, "text/html", "GET /: text/html")
    resp = srv.get("/sub/")
    is_((resp.status, resp.body), (200, FILES["sub/index.html"]), "GET /sub/ serves sub/index.html")
    resp = srv.head("/sub/")
    is_((resp.status, resp.header("Content-Length")), (200, str(len(FILES["sub/index.html"]))),
        "HEAD /sub/")
    resp = srv.get("/sub")
    is_(resp.status, 301, "GET /sub: 301")
    loc = resp.header("Location", "")
    is_(urllib.parse.urlsplit(loc).path, "/sub/", "GET /sub: Location /sub/ (%s)" % loc)
    resp = srv.get("/sub/other.txt")
    is_((resp.status, resp.body), (200, b"other"), "GET /sub/other.txt")
    resp = srv.get("/noindex/")
    ok(resp.status in (403, 404), "GET /noindex/ (no index.html): 403 or 404",
       "got %d" % resp.status)


def test_names(srv):
    cases = [
        ("/a%20b.txt", b"with a space"),
        ("/x.txt?v=1", b"hello"),
        ("/x.txt?", b"hello"),
        ("/x.txt?a=b&c=%2F..%2F", b"hello"),
        ("/%78.txt", b"hello"),
        ("/sub/other.txt?x", b"other"),
    ]
    for target, body in cases:
        resp = srv.get(target)
        is_((resp.status, resp.body), (200, body), "GET %s" % target)


def test_more_names(srv):
    srv.write_file("caf\u00e9.txt", b"utf-8 name")
    resp = srv.get("/caf%C3%A9.txt")
    is_((resp.status, resp.body), (200, b"utf-8 name"), "GET /caf%C3%A9.txt (UTF-8 name)")
    resp = srv.get("/caf%c3%a9.txt")
    is_((resp.status, resp.body), (200, b"utf-8 name"), "GET /caf%c3%a9.txt (lower-case hex)")
    for target in ("/x%zz.txt", "/%", "/x.txt%", "/x.txt%4", "/%%%"):
        resp = srv.get(target)
        ok(resp.status in (400, 404), "GET %s (bad escape): 400 or 404" % target,
           "got %d" % resp.status)

    # A file that disappears is a 404, not a stale answer.
    srv.write_file("gone.txt", b"soon gone")
    is_(srv.get("/gone.txt").status, 200, "GET /gone.txt while it exists")
    os.unlink(srv.path("gone.txt"))
    is_(srv.get("/gone.txt").status, 404, "GET /gone.txt after unlink: 404")

    # index.html that is a directory is no index.
    os.makedirs(srv.path("odd/index.html"))
    resp = srv.get("/odd/")
    ok(resp.status in (403, 404), "GET /odd/ whose index.html is a directory: 403 or 404",
       "got %d" % resp.status)


def test_special_files(srv):
    # open() of a FIFO blocks until a writer comes: a pool thread stuck there
    # for good would starve every later file request and the shutdown.
    os.mkfifo(srv.path("fifo"))
    os.mkfifo(srv.path("fifo.html"))
    for target in ("/fifo", "/fifo.html", "/fifo", "/fifo", "/fifo.html", "/fifo"):
        try:
            resp = srv.get(target)
            status = resp.status
        except OSError as e:
            status = "no answer (%s)" % e
        ok(status in (403, 404), "GET %s (a FIFO): 403 or 404" % target, "got %r" % (status,))
    resp = srv.get("/x.txt")
    is_((resp.status, resp.body), (200, b"hello"), "files still served after the FIFO requests")
    resp = srv.get("/sub/other.txt")
    is_((resp.status, resp.body), (200, b"other"), "... and another one")


def test_date(srv):
    resp = srv.get("/x.txt")
    try:
        when = email.utils.parsedate_to_datetime(resp.header("Date")).timestamp()
    except (TypeError, ValueError):
        when = 0
    # Not a timing check: a time zone mix-up is hours off.
    ok(abs(when - time.time()) < 600, "Date is the current time in GMT (%s)" % resp.header("Date"))


def test_absolute_form(srv):
    # RFC 9112 3.2.2: a server MUST accept the absolute-form.
    with Conn(srv.port) as conn:
        conn.send(b"GET http://127.0.0.1/x.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        try:
            resp = conn.read_response()
            got = (resp.status, resp.body)
        except ProtocolError as e:
            got = str(e)
        ok(got == (200, b"hello") or (isinstance(got, tuple) and got[0] == 400),
           "GET http://127.0.0.1/x.txt (absolute-form): the file, or 400", "got %r" % (got,))
        note("absolute-form answer: %r" % (got,))


def test_errors(srv):
    for target in ("/missing.txt", "/sub/missing", "/missing/", "/x.txt/", "/x.txt/y"):
        resp = srv.get(target)
        if target.startswith("/x.txt/"):
            ok(resp.status in (404, 403), "GET %s (file as a directory): 403 or 404" % target,
               "got %d" % resp.status)
        else:
            is_(resp.status, 404, "GET %s: 404" % target)
        ok(resp.body != FILES["x.txt"], "GET %s: not the file" % target)
    resp = srv.head("/missing.txt")
    is_(resp.status, 404, "HEAD /missing.txt: 404")

    # An error answer keeps the connection usable when the request was framed.
    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/missing.txt")
        is_(resp.status, 404, "404 on a keep-alive connection")
        resp = conn.roundtrip("GET", "/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "next request after a 404 works")

    for method, body in (("DELETE", None), ("PUT", b"new content"), ("POST", b"a=b")):
        resp = srv.conn().roundtrip(method, "/x.txt", body=body)
        is_(resp.status, 405, "%s /x.txt: 405" % method)
        ok({"get", "head"} <= resp.tokens("Allow"), "%s /x.txt: Allow lists GET, HEAD" % method,
           "Allow: %r" % resp.header("Allow"))
    resp = srv.get("/gzip")
    is_(resp.status, 405, "GET /gzip: 405")
    ok("post" in resp.tokens("Allow"), "GET /gzip: Allow lists POST",
       "Allow: %r" % resp.header("Allow"))
    resp = srv.get("/x.txt")
    is_(resp.body, b"hello", "the file is unchanged after PUT/DELETE")


def test_garbage(srv):
    garbage = [
        b"GARBAGE\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /x.txt HTTX/1.1\r\nHost: a\r\n\r\n",
        b"GET /x.txt HTTP/1.1\r\nNo colon here\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",
        b"G E T / HTTP/1.1\r\n\r\n",
    ]
    for raw in garbage:
        with Conn(srv.port) as conn:
            conn.send(raw)
            try:
                resp = conn.read_response()
                status = resp.status
            except ProtocolError as e:
                status = "no response (%s)" % e
            is_(status, 400, "garbage %r: 400" % raw[:30])
            is_(conn.wait_closed(), "closed", "garbage %r: connection closed after" % raw[:30])


def test_abuse(srv):
    # Huge header, long URL, many headers: any answer or a close, but the
    # server must survive (the sanitizer build checks the memory use).
    abuse = [
        ("1 MiB header", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (1 << 20)
         + b"\r\n\r\n"),
        ("64 KiB URL", b"GET /" + b"b" * 65536 + b" HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("5000 headers", b"GET /x.txt HTTP/1.1\r\n" + b"X-H: v\r\n" * 5000 + b"\r\n"),
        ("bad Content-Length", b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"),
        ("two Content-Lengths", b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
         b"Content-Length: 2\r\n\r\nab"),
        ("bad chunk size", b"POST /gzip HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
         b"\r\nzz\r\nabc\r\n0\r\n\r\n"),
        ("half a request", b"GET /x.txt HTTP/1.1\r\nHost: a\r\n"),
    ]
    for desc, raw in abuse:
        with Conn(srv.port, timeout=3) as conn:
            try:
                conn.send(raw)
                if desc != "half a request":
                    conn.read_response()
            except (OSError, ProtocolError):
                pass
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "server still answers after %s" % desc)


def main():
    with Server(files=FILES) as srv:
        test_files(srv)
        test_directories(srv)
        test_names(srv)
        test_more_names(srv)
        test_special_files(srv)
        test_date(srv)
        test_absolute_form(srv)
        test_errors(srv)
        test_garbage(srv)
        test_abuse(srv)


run(main)
