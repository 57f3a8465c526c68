#!/usr/bin/env python3
# Response headers: charset=utf-8 on text types; Cache-Control only when
# configured (--cache-control); X-Content-Type-Options: nosniff; HEAD sends
# exactly the headers GET would (identity, gzip, ranges, 304, 416, errors,
# redirects); Content-Length always equals the bytes sent; a 304 (and a
# HEAD) never carries a body, so pipelined responses after it parse.

from harness import (KiB, Server, build_request, comparable_headers, exchange, is_, like, ok,
                     random_bytes, run, split_response, text_bytes)

FILES = {
    "index.html": b"<!doctype html><title>i</title>\n",
    "page.htm": b"<p>htm</p>",
    "style.css": text_bytes(3 * KiB),
    "app.js": text_bytes(3 * KiB),
    "notes.txt": text_bytes(10 * KiB),
    "readme.md": b"# title\n",
    "data.csv": b"a,b\n1,2\n",
    "img.png": b"\x89PNG\r\n\x1a\n" + random_bytes(2000, 50),
    "blob.bin": random_bytes(50 * KiB, 51),
    "data.json": b'{"a": 1}',
    "empty.txt": b"",
    "sub/index.html": b"<p>sub</p>",
}
TEXT = ("index.html", "page.htm", "style.css", "app.js", "notes.txt", "readme.md", "data.csv")
BINARY = ("img.png", "blob.bin")
AE = {"Accept-Encoding": "gzip"}


def test_charset(srv):
    for name in TEXT:
        resp = srv.get("/" + name)
        ok(resp.media_type and resp.media_type.startswith("text/"),
           "%s: a text/* type" % name, "Content-Type: %r" % resp.header("Content-Type"))
        like(resp.header("Content-Type", ""), r"(?i);\s*charset=\"?utf-8\"?$",
             "%s: charset=utf-8" % name)
    for name in BINARY:
        resp = srv.get("/" + name)
        ok("charset" not in resp.header("Content-Type", "").lower(),
           "%s: no charset on a binary type" % name,
           "Content-Type: %r" % resp.header("Content-Type"))
    resp = srv.get("/notes.txt", headers=AE)
    like(resp.header("Content-Type", ""), r"(?i)^text/plain;\s*charset=utf-8$",
         "gzip-encoded notes.txt: still text/plain; charset=utf-8")
    resp = srv.get("/notes.txt", headers={"Range": "bytes=0-9"})
    like(resp.header("Content-Type", ""), r"(?i)^text/plain;\s*charset=utf-8$",
         "206 of notes.txt: text/plain; charset=utf-8")


def file_responses(srv):
    """(description, response) for every kind of file response."""
    etag = srv.get("/notes.txt").header("ETag")
    return [
        ("200", srv.get("/notes.txt")),
        ("200 HEAD", srv.head("/notes.txt")),
        ("200 binary", srv.get("/blob.bin")),
        ("200 index", srv.get("/sub/")),
        ("200 gzip", srv.get("/notes.txt", headers=AE)),
        ("206", srv.get("/notes.txt", headers={"Range": "bytes=0-9"})),
        ("206 multipart", srv.get("/notes.txt", headers={"Range": "bytes=0-9,20-29"})),
        ("304", srv.get("/notes.txt", headers={"If-None-Match": etag})),
        ("200 empty", srv.get("/empty.txt")),
    ]


def test_cache_control():
    with Server(files=FILES, name="server, default Cache-Control") as srv:
        for desc, resp in file_responses(srv):
            ok(not resp.has_header("Cache-Control"), "default: %s: no Cache-Control" % desc,
               "Cache-Control: %r" % resp.header("Cache-Control"))
    with Server(files=FILES, args=["--cache-control", "max-age=60"],
                name="server, --cache-control max-age=60") as srv:
        for desc, resp in file_responses(srv):
            # RFC 9110 15.4.5: a 304 carries the Cache-Control a 200 would.
            is_(resp.header_all("Cache-Control"), ["max-age=60"],
                "--cache-control max-age=60: %s: Cache-Control: max-age=60" % desc)
    with Server(files=FILES, conf={"cache_control": "public, max-age=3600"},
                name="server, cache_control in the file") as srv:
        is_(srv.get("/notes.txt").header("Cache-Control"), "public, max-age=3600",
            "cache_control = public, max-age=3600 in the config file")


def test_nosniff(srv):
    for desc, resp in file_responses(srv):
        if resp.status == 304:
            continue
        is_(resp.header("X-Content-Type-Options"), "nosniff",
            "%s: X-Content-Type-Options: nosniff" % desc)
    resp = srv.get("/notes.txt", headers={"Range": "bytes=999999-"})
    is_((resp.status, resp.header("X-Content-Type-Options")), (416, "nosniff"),
        "416: X-Content-Type-Options: nosniff")


def test_head_like_get(srv):
    etag = srv.get("/notes.txt").header("ETag")
    gz_etag = srv.get("/notes.txt", headers=AE).header("ETag")
    cases = [
        ("/notes.txt", {}),
        ("/blob.bin", {}),
        ("/empty.txt", {}),
        ("/", {}),
        ("/notes.txt", AE),
        ("/style.css", AE),
        ("/index.html", AE),
        ("/notes.txt", {"Range": "bytes=10-19"}),
        ("/notes.txt", {"Range": "bytes=-100"}),
        ("/notes.txt", dict(AE, Range="bytes=10-19")),
        ("/notes.txt", {"Range": "bytes=999999-"}),
        ("/notes.txt", {"Range": "bytes=5-3"}),
        ("/notes.txt", {"If-None-Match": etag}),
        ("/notes.txt", dict(AE, **{"If-None-Match": gz_etag})),
        ("/notes.txt", {"If-Match": '"nope"'}),
        ("/notes.txt", {"Range": "bytes=0-1", "If-Range": '"nope"'}),
        ("/missing.txt", {}),
        ("/sub", {}),
    ]
    for target, headers in cases:
        with srv.conn() as conn:
            get = conn.roundtrip("GET", target, headers=headers)
            head = conn.roundtrip("HEAD", target, headers=headers)
        desc = "HEAD %s %s" % (target, headers or "")
        is_(head.status, get.status, "%s: the status of GET (%d)" % (desc, get.status))
        is_(comparable_headers(head), comparable_headers(get), "%s: the headers of GET" % desc)


def exact(srv, method, target, headers=None):
    """One request with Connection: close, read to EOF: (status, headers, body)."""
    head, rest = split_response(*exchange(srv.port, build_request(
        method, target, headers=dict(headers or {}, Connection="close"))))
    return head.status, {k.lower(): v for k, v in head.headers}, rest


def test_content_length(srv):
    etag = srv.get("/notes.txt").header("ETag")
    cases = [
        ("GET", "/notes.txt", {}),
        ("GET", "/blob.bin", {}),
        ("GET", "/empty.txt", {}),
        ("GET", "/img.png", AE),
        ("GET", "/notes.txt", {"Range": "bytes=100-199"}),
        ("GET", "/notes.txt", {"Range": "bytes=0-0,-1,100-"}),
        ("GET", "/notes.txt", {"Range": "bytes=999999-"}),
        ("GET", "/notes.txt", {"If-Match": '"nope"'}),
        ("GET", "/missing.txt", {}),
        ("GET", "/sub", {}),
        ("GET", "/sub/", {}),
        ("DELETE", "/notes.txt", {}),
        ("GET", "/stats", {}),
    ]
    for method, target, headers in cases:
        status, head, body = exact(srv, method, target, headers)
        desc = "%s %s %s (%d)" % (method, target, headers or "", status)
        if "transfer-encoding" in head:
            ok("content-length" not in head, "%s: chunked, no Content-Length" % desc)
            continue
        is_(head.get("content-length"), str(len(body)), "%s: Content-Length is the body" % desc)
    for method, target, headers in (("HEAD", "/notes.txt", {}), ("HEAD", "/notes.txt", AE),
                                    ("HEAD", "/notes.txt", {"Range": "bytes=0-9"}),
                                    ("GET", "/notes.txt", {"If-None-Match": etag}),
                                    ("GET", "/notes.txt", {"If-Modified-Since":
                                                           srv.get("/notes.txt")
                                                           .header("Last-Modified")}),
                                    ("HEAD", "/missing.txt", {})):
        status, head, body = exact(srv, method, target, headers)
        is_(body, b"", "%s %s %s (%d): no body bytes at all" % (method, target, headers or "",
                                                               status))
        if status == 200 and "content-length" in head and "content-encoding" not in head:
            is_(head["content-length"], str(len(FILES["notes.txt"])),
                "%s %s: Content-Length of the file" % (method, target))


def test_pipelined_304(srv):
    etag = srv.get("/notes.txt").header("ETag")
    gz_etag = srv.get("/notes.txt", headers=AE).header("ETag")
    lm = srv.get("/notes.txt").header("Last-Modified")
    reqs = [
        ("GET", "/notes.txt", {"If-None-Match": etag}),
        ("GET", "/data.json", {}),
        ("GET", "/notes.txt", {"If-Modified-Since": lm}),
        ("HEAD", "/blob.bin", {}),
        ("GET", "/notes.txt", dict(AE, **{"If-None-Match": gz_etag})),
        ("GET", "/index.html", {}),
        ("GET", "/empty.txt", {"If-None-Match": "*"}),
        ("GET", "/notes.txt", {"Range": "bytes=0-4"}),
    ]
    with srv.conn() as conn:
        conn.send(b"".join(build_request(m, t, headers=h) for m, t, h in reqs))
        got = [conn.read_response(head=(m == "HEAD")) for m, _, _ in reqs]
        is_([r.status for r in got], [304, 200, 304, 200, 304, 200, 304, 206],
            "8 pipelined requests with 304s among them: every status in order")
        is_(got[1].body, FILES["data.json"], "pipelined: the response after a 304 is intact")
        is_(got[5].body, FILES["index.html"], "pipelined: the response after a gzip 304 is intact")
        is_(got[7].body, FILES["notes.txt"][:5], "pipelined: the 206 after a 304 is intact")
        is_(conn.wait_closed(0.5), "open", "pipelined: no stray bytes after the last response")


def main():
    with Server(files=FILES) as srv:
        test_charset(srv)
        test_nosniff(srv)
        test_head_like_get(srv)
        test_content_length(srv)
        test_pipelined_304(srv)
    test_cache_control()


run(main)
