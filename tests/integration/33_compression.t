#!/usr/bin/env python3
# Compression of static files. A client that accepts gzip gets a compressible
# file above gzip_min_size gzip-encoded (chunked on HTTP/1.1, close-
# delimited on HTTP/1.0, Vary: Accept-Encoding) and decompresses to the exact
# bytes at --partition 4k and whole; otherwise identity (no Accept-Encoding,
# gzip;q=0, small files, images, binaries, Range requests); FILE.gz is sent
# as-is with --gzip-static on and ignored with off; --gzip-files off turns
# on-the-fly compression off.
import gzip
import os
import shutil
import subprocess
import tempfile

from harness import (SLOW, KiB, MiB, Server, build_request, exchange, gunzip, is_, ok, run,
                     skip_test, split_response, text_bytes)

BIG = text_bytes(5 * MiB)
PRE = text_bytes(30 * KiB).replace(b"fox", b"cat")
# A .gz of PRE made differently from the server's own stream (mtime, level).
PRE_GZ = gzip.compress(PRE, compresslevel=1, mtime=123456789)
FILES = {
    "big.txt": BIG,
    "style.css": text_bytes(20 * KiB),
    "data.json": b'{"k": "' + text_bytes(20 * KiB).replace(b"\n", b" ") + b'"}',
    "app.js": b"// js\n" + text_bytes(20 * KiB),
    "pic.svg": b"<svg xmlns='http://www.w3.org/2000/svg'>" + b"<g/>" * 5000 + b"</svg>",
    "page.html": b"<!doctype html>" + text_bytes(20 * KiB),
    "small.txt": text_bytes(500),
    "img.png": b"\x89PNG\r\n\x1a\n" + text_bytes(20 * KiB),
    "blob.bin": text_bytes(20 * KiB),
    "pre.txt": PRE,
    "pre.txt.gz": PRE_GZ,
    "tiny.txt": b"tiny",
    "tiny.txt.gz": gzip.compress(b"tiny", mtime=0),
}
AE = {"Accept-Encoding": "gzip"}


def check_gzip(resp, want, desc, chunked=True):
    is_(resp.status, 200, "%s: 200" % desc)
    is_(resp.header("Content-Encoding"), "gzip", "%s: Content-Encoding: gzip" % desc)
    ok("accept-encoding" in resp.tokens("Vary"), "%s: Vary: Accept-Encoding" % desc,
       "Vary: %r" % resp.header_all("Vary"))
    if chunked:
        ok(resp.chunked and "chunked" in resp.tokens("Transfer-Encoding"),
           "%s: Transfer-Encoding: chunked" % desc)
        ok(not resp.has_header("Content-Length"), "%s: no Content-Length with chunked" % desc)
    got = gunzip(resp.body)
    ok(got == want, "%s: gunzips to the exact %d bytes" % (desc, len(want)),
       "got %s" % ("invalid gzip" if got is None else "%d bytes" % len(got)))


def check_identity(resp, want, desc):
    is_(resp.status, 200, "%s: 200" % desc)
    ok(resp.header("Content-Encoding") in (None, "identity"), "%s: no Content-Encoding" % desc,
       "Content-Encoding: %r" % resp.header("Content-Encoding"))
    is_(resp.header("Content-Length"), str(len(want)), "%s: Content-Length" % desc)
    ok(resp.body == want, "%s: the identical bytes" % desc)


def test_partition(partition):
    with Server(files={"big.txt": BIG}, args=["--partition", partition],
                name="server at --partition " + partition) as srv:
        with srv.conn() as conn:
            resp = conn.roundtrip("GET", "/big.txt", headers=AE)
            check_gzip(resp, BIG, "--partition %s: 5 MiB text" % partition)
            is_(resp.media_type, "text/plain", "--partition %s: Content-Type of the file"
                % partition)
            ok(len(resp.body) < len(BIG) // 10, "--partition %s: actually compressed (%d bytes)"
               % (partition, len(resp.body)))
            # the chunked framing ended right: the connection goes on
            resp = conn.roundtrip("GET", "/big.txt", headers=AE)
            check_gzip(resp, BIG, "--partition %s: again on the same connection" % partition)
            resp = conn.roundtrip("GET", "/big.txt")
            check_identity(resp, BIG, "--partition %s: no Accept-Encoding" % partition)


def test_negotiation(srv):
    with srv.conn() as conn:
        for name in ("style.css", "data.json", "app.js", "pic.svg", "page.html", "big.txt"):
            resp = conn.roundtrip("GET", "/" + name, headers=AE)
            check_gzip(resp, FILES[name], "%s with Accept-Encoding: gzip" % name)
        for value in ("gzip, deflate, br", "br;q=1.0, gzip;q=0.8, *;q=0.1", "GZIP", "gzip;q=0.5",
                      "deflate,gzip"):
            resp = conn.roundtrip("GET", "/style.css", headers={"Accept-Encoding": value})
            check_gzip(resp, FILES["style.css"], "Accept-Encoding: %s" % value)
        for value in ("gzip;q=0", "gzip; q=0.000", "identity", "br, deflate", "",
                      "gzip;q=0, identity"):
            resp = conn.roundtrip("GET", "/style.css", headers={"Accept-Encoding": value})
            check_identity(resp, FILES["style.css"], "Accept-Encoding: %r" % value)
        resp = conn.roundtrip("GET", "/style.css")
        check_identity(resp, FILES["style.css"], "no Accept-Encoding")
        ok("accept-encoding" in resp.tokens("Vary"),
           "no Accept-Encoding, compressible file: Vary: Accept-Encoding (RFC 9110 12.5.5)")
        for name, why in (("small.txt", "below gzip_min_size"), ("img.png", "an image"),
                          ("blob.bin", "application/octet-stream")):
            resp = conn.roundtrip("GET", "/" + name, headers=AE)
            check_identity(resp, FILES[name], "%s (%s) with Accept-Encoding: gzip" % (name, why))

        # Range requests are served from the identity encoding.
        resp = conn.roundtrip("GET", "/big.txt", headers=dict(AE, Range="bytes=1000-1999"))
        is_(resp.status, 206, "Range + Accept-Encoding: gzip: 206")
        ok(resp.header("Content-Encoding") is None, "Range + Accept-Encoding: identity")
        is_(resp.header("Content-Range"), "bytes 1000-1999/%d" % len(BIG),
            "Range + Accept-Encoding: Content-Range of the identity")
        ok(resp.body == BIG[1000:2000], "Range + Accept-Encoding: the identity bytes")
        resp = conn.roundtrip("GET", "/pre.txt", headers=dict(AE, Range="bytes=0-9"))
        is_((resp.status, resp.body), (206, PRE[:10]),
            "Range on a file with a .gz next to it: the identity bytes")


def test_gzip_static(srv, on):
    mode = "--gzip-static %s" % ("on" if on else "off")
    resp = srv.get("/pre.txt", headers=AE)
    if on:
        is_(resp.status, 200, "%s: pre.txt: 200" % mode)
        is_(resp.header("Content-Encoding"), "gzip", "%s: pre.txt.gz sent gzip-encoded" % mode)
        is_(resp.media_type, "text/plain", "%s: with the Content-Type of pre.txt" % mode)
        is_(resp.header("Content-Length"), str(len(PRE_GZ)),
            "%s: with the Content-Length of the .gz" % mode)
        ok(resp.body == PRE_GZ, "%s: the .gz bytes as they are" % mode)
        ok("accept-encoding" in resp.tokens("Vary"), "%s: Vary: Accept-Encoding" % mode)
        ok(resp.header("ETag") != srv.get("/pre.txt").header("ETag"),
           "%s: the .gz has another ETag than the identity" % mode)
        resp = srv.get("/tiny.txt", headers=AE)
        is_(resp.header("Content-Encoding"), "gzip",
            "%s: tiny.txt.gz is sent even below gzip_min_size" % mode)
        is_(gunzip(resp.body), b"tiny", "%s: tiny.txt.gz body" % mode)
    else:
        ok(resp.body != PRE_GZ, "%s: pre.txt.gz is not sent" % mode)
        if resp.header("Content-Encoding") == "gzip":
            check_gzip(resp, PRE, "%s: pre.txt compressed on the fly" % mode)
        resp = srv.get("/tiny.txt", headers=AE)
        check_identity(resp, b"tiny", "%s: tiny.txt" % mode)
    resp = srv.get("/pre.txt")
    check_identity(resp, PRE, "%s: pre.txt without Accept-Encoding" % mode)
    resp = srv.get("/pre.txt.gz", headers=AE)
    is_((resp.status, resp.body), (200, PRE_GZ), "%s: /pre.txt.gz itself" % mode)
    ok(resp.header("Content-Encoding") is None,
       "%s: /pre.txt.gz itself has no Content-Encoding" % mode)


def test_gzip_files_off():
    with Server(files=FILES, args=["--gzip-files", "off"], name="server, --gzip-files off") as srv:
        resp = srv.get("/big.txt", headers=AE)
        check_identity(resp, BIG, "--gzip-files off: big.txt")
        resp = srv.get("/style.css", headers=AE)
        check_identity(resp, FILES["style.css"], "--gzip-files off: style.css")
        resp = srv.get("/pre.txt", headers=AE)
        ok(resp.header("Content-Encoding") == "gzip" and resp.body == PRE_GZ,
           "--gzip-files off: pre.txt.gz still sent (gzip_static on)")


def get_http10(srv, **kw):
    """An HTTP/1.0 GET of /big.txt read to the close: (head, every byte after it)."""
    return split_response(*exchange(srv.port, build_request("GET", "/big.txt", version="HTTP/1.0",
                                                            **kw)))


def test_http10(srv):
    head, rest = get_http10(srv, headers=AE)
    is_(head.status, 200, "HTTP/1.0 gzip: 200")
    is_(head.header("Content-Encoding"), "gzip", "HTTP/1.0 gzip: Content-Encoding: gzip")
    ok(not head.has_header("Transfer-Encoding"),
       "HTTP/1.0 gzip: no Transfer-Encoding (RFC 9112 6.1)")
    ok(not head.has_header("Content-Length"), "HTTP/1.0 gzip: no Content-Length (length unknown)")
    ok(head.header("Connection", "close").lower() != "keep-alive",
       "HTTP/1.0 gzip: not keep-alive (the close delimits the body)")
    ok(gunzip(rest) == BIG, "HTTP/1.0 gzip: the body up to the close gunzips to the file",
       "%d bytes" % len(rest))

    # Even when the client asks to keep the connection: only the close can end the body.
    head, rest = get_http10(srv, headers=dict(AE, Connection="keep-alive"))
    ok(head.status == 200 and head.header("Content-Encoding") == "gzip" and gunzip(rest) == BIG,
       "HTTP/1.0 keep-alive gzip: the server closes after the gzip body")
    ok(head.header("Connection", "close").lower() != "keep-alive",
       "HTTP/1.0 keep-alive gzip: no Connection: keep-alive")

    head, rest = get_http10(srv)
    is_((head.status, head.header("Content-Length")), (200, str(len(BIG))),
        "HTTP/1.0 identity: Content-Length")
    ok(rest == BIG, "HTTP/1.0 identity: the file")


def test_head(srv):
    for target, headers in (("/big.txt", AE), ("/pre.txt", AE), ("/style.css", {}),
                            ("/small.txt", AE)):
        get = srv.get(target, headers=headers)
        head = srv.head(target, headers=headers)
        g = sorted((k.lower(), v) for k, v in get.headers if k.lower() != "date")
        h = sorted((k.lower(), v) for k, v in head.headers if k.lower() != "date")
        is_(h, g, "HEAD %s %s: the same headers as GET" % (target, headers or ""))


def test_curl(srv):
    if shutil.which("curl") is None:
        skip_test("curl --compressed", "curl is not installed")
        return
    tmp = tempfile.mkdtemp(prefix="unclog-curl-")
    try:
        out = os.path.join(tmp, "big.txt")
        url = "http://127.0.0.1:%d/big.txt" % srv.port
        proc = subprocess.run(["curl", "-sS", "-f", "--compressed", "-D", "-", "-o", out, url],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60 * SLOW)
        heads = proc.stdout.decode("latin-1").lower()
        ok(proc.returncode == 0, "curl --compressed: exit status 0", proc.stderr)
        ok("content-encoding: gzip" in heads, "curl --compressed: the answer was gzip-encoded",
           heads)
        with open(out, "rb") as f:
            ok(f.read() == BIG, "curl --compressed: the decoded file is identical")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    for partition in ("4k", "whole"):
        test_partition(partition)
    with Server(files=FILES) as srv:
        test_negotiation(srv)
        test_gzip_static(srv, True)
        test_http10(srv)
        test_head(srv)
        test_curl(srv)
    with Server(files=FILES, args=["--gzip-static", "off"],
                name="server, --gzip-static off") as srv:
        test_gzip_static(srv, False)
    test_gzip_files_off()


run(main)
