#!/usr/bin/env python3
# Byte ranges (RFC 9110 14): Accept-Ranges; bytes=a-b, a- and -n give 206
# with Content-Range; unsatisfiable gives 416 with "bytes */SIZE"; malformed
# Range headers are ignored; If-Range with an ETag or a date; several ranges
# give multipart/byteranges, overlapping ones the whole file (unclog's
# documented choice); ranges across partition boundaries at --partition 4k
# and whole; HEAD with Range; downloads resumed with curl -C - and wget -c.
import os
import re
import shutil
import subprocess
import tempfile

from harness import (SLOW, KiB, MiB, ProtocolError, Server, comparable_headers, exchange, is_,
                     like, ok, parse_byteranges, random_bytes, run, skip_test, split_response,
                     text_bytes)

SIZE = 100000
DATA = random_bytes(SIZE, 40)
BIG = random_bytes(3 * MiB + 123, 41)  # crosses 4k and 1 MiB boundaries, odd tail
FILES = {
    "data.bin": DATA,
    "text.txt": text_bytes(20 * KiB),
    "empty.bin": b"",
    "one.bin": b"x",
}


def check_206(resp, first, last, size, data, desc):
    is_(resp.status, 206, "%s: 206" % desc)
    is_(resp.header("Content-Range"), "bytes %d-%d/%d" % (first, last, size),
        "%s: Content-Range" % desc)
    is_(resp.header("Content-Length"), str(last - first + 1), "%s: Content-Length" % desc)
    ok(resp.body == data[first:last + 1], "%s: the bytes %d-%d" % (desc, first, last),
       "got %d bytes" % len(resp.body))


def test_accept_ranges(srv):
    for method in ("GET", "HEAD"):
        resp = srv.conn().roundtrip(method, "/data.bin")
        is_(resp.status, 200, "%s /data.bin: 200" % method)
        is_(resp.header("Accept-Ranges"), "bytes", "%s /data.bin: Accept-Ranges: bytes" % method)


def test_single(srv):
    cases = [
        ("bytes=0-0", 0, 0),
        ("bytes=0-499", 0, 499),
        ("bytes=500-999", 500, 999),
        ("bytes=99999-99999", 99999, 99999),
        ("bytes=99000-", 99000, 99999),
        ("bytes=0-", 0, 99999),
        ("bytes=-500", 99500, 99999),
        ("bytes=-1", 99999, 99999),
        ("bytes=99000-200000", 99000, 99999),  # last-pos past the end: clamped
        ("bytes=-200000", 0, 99999),  # suffix longer than the file: all of it
        ("bytes=0-99999999999999999999999", 0, 99999),  # 23 digits: still past the end
        ("bytes=-99999999999999999999999", 0, 99999),
        ("Bytes=10-19", 10, 19),  # the unit is case-insensitive (14.1)
        ("bytes=10-19, 200000-", 10, 19),  # the unsatisfiable one is dropped
    ]
    with srv.conn() as conn:
        for spec, first, last in cases:
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            check_206(resp, first, last, SIZE, DATA, "Range: %s" % spec)
            is_(resp.media_type, "application/octet-stream", "Range: %s: Content-Type" % spec)
            ok(resp.has_header("ETag") and resp.has_header("Last-Modified"),
               "Range: %s: ETag and Last-Modified" % spec)
        resp = conn.roundtrip("GET", "/one.bin", headers={"Range": "bytes=-5"})
        check_206(resp, 0, 0, 1, b"x", "1-byte file, Range: bytes=-5")


def test_unsatisfiable(srv):
    with srv.conn() as conn:
        for spec in ("bytes=100000-", "bytes=100000-100000", "bytes=200000-300000", "bytes=-0",
                     "bytes=100000-,-0", "bytes=99999999999999999999999-"):
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            is_(resp.status, 416, "Range: %s: 416" % spec)
            is_(resp.header("Content-Range"), "bytes */%d" % SIZE,
                "Range: %s: Content-Range: bytes */SIZE" % spec)
            ok(resp.body != DATA, "Range: %s: not the file" % spec)
        resp = conn.roundtrip("GET", "/one.bin")
        is_((resp.status, resp.body), (200, b"x"), "the connection works after the 416s")

    # An empty file: no int-range can be satisfied (RFC 9110 14.1.1) -- nginx
    # answers 200 there; a suffix-range of non-zero length is satisfiable, but
    # no 206 can express zero bytes: 200 with the empty body.
    resp = srv.get("/empty.bin", headers={"Range": "bytes=0-"})
    ok(resp.status in (200, 416), "empty file, Range: bytes=0-: 416 or 200",
       "got %d" % resp.status)
    if resp.status == 416:
        is_(resp.header("Content-Range"), "bytes */0", "empty file, 416: Content-Range bytes */0")
    resp = srv.get("/empty.bin", headers={"Range": "bytes=-5"})
    is_((resp.status, resp.body), (200, b""),
        "empty file, Range: bytes=-5: 200 and the empty body (RFC 9110 14.1.1, nginx)")


def test_malformed(srv):
    specs = ["bytes=5-3", "bytes=abc", "items=0-5", "bytes 0-5", "bytes=", "bytes=0-5,x",
             "bytes=--5", "bytes=0-5;x", "bytes=1.5-2", "bytes=0x10-0x20", "=0-5", "bytes=,",
             "bytes=0-1-2", "bytes=-", "bytes=5"]
    with srv.conn() as conn:
        for spec in specs:
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            is_(resp.status, 200, "malformed Range: %s: 200" % spec)
            ok(resp.body == DATA, "malformed Range: %s: the whole file" % spec)
            ok(not resp.has_header("Content-Range"), "malformed Range: %s: no Content-Range"
               % spec)


def test_if_range(srv):
    full = srv.get("/data.bin")
    etag, lm = full.header("ETag"), full.header("Last-Modified")
    with srv.conn() as conn:
        for desc, value in (("the ETag", etag), ("Last-Modified", lm)):
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": "bytes=10-19",
                                                                 "If-Range": value})
            check_206(resp, 10, 19, SIZE, DATA, "If-Range %s matches" % desc)
        for desc, value in (("another ETag", '"nope"'), ("an older date",
                                                          "Mon, 01 Jan 2001 00:00:00 GMT"),
                            ("a later date", "Fri, 01 Jan 2100 00:00:00 GMT"),
                            ("the weak form of the ETag", "W/" + etag), ("garbage", "garbage")):
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": "bytes=10-19",
                                                                 "If-Range": value})
            is_(resp.status, 200, "If-Range %s: 200" % desc)
            ok(resp.body == DATA, "If-Range %s: the whole file" % desc)
            ok(not resp.has_header("Content-Range"), "If-Range %s: no Content-Range" % desc)
        # If-Range without Range is ignored.
        resp = conn.roundtrip("GET", "/data.bin", headers={"If-Range": '"nope"'})
        is_((resp.status, resp.body == DATA), (200, True), "If-Range without Range: 200")
        # If-Range mismatch does not turn an unsatisfiable range into a 416.
        resp = conn.roundtrip("GET", "/data.bin", headers={"Range": "bytes=200000-",
                                                             "If-Range": '"nope"'})
        is_((resp.status, resp.body == DATA), (200, True),
            "If-Range mismatch with an unsatisfiable Range: 200 with the file")


def check_multipart(resp, spans, size, data, ctype, desc):
    is_(resp.status, 206, "%s: 206" % desc)
    like(resp.header("Content-Type", ""), r"^multipart/byteranges; ?boundary=",
         "%s: multipart/byteranges" % desc)
    ok(not resp.has_header("Content-Range"), "%s: no Content-Range on the whole" % desc)
    if resp.header("Content-Length") is not None:
        is_(resp.header("Content-Length"), str(len(resp.body)), "%s: Content-Length" % desc)
    try:
        parts = parse_byteranges(resp)
    except ProtocolError as e:
        ok(False, "%s: the body parses as multipart/byteranges" % desc, str(e),
           repr(resp.body[:300]))
        return
    is_(len(parts), len(spans), "%s: %d parts" % (desc, len(spans)))
    for i, ((headers, body), (first, last)) in enumerate(zip(parts, spans)):
        is_(headers.get("content-range"), "bytes %d-%d/%d" % (first, last, size),
            "%s: part %d Content-Range" % (desc, i))
        is_(headers.get("content-type"), ctype, "%s: part %d Content-Type" % (desc, i))
        ok(body == data[first:last + 1], "%s: part %d bytes" % (desc, i),
           "got %d bytes, want %d" % (len(body), last - first + 1))


def test_multiple(srv):
    with srv.conn() as conn:
        cases = [
            ("bytes=0-9,20-29", [(0, 9), (20, 29)]),
            ("bytes=20-29,0-9", [(20, 29), (0, 9)]),  # in the order asked
            ("bytes=0-0,-1", [(0, 0), (99999, 99999)]),
            ("bytes=0-9, 10-19", [(0, 9), (10, 19)]),  # adjacent, not overlapping
            ("bytes=100-199,5000-,,1000-1001", [(100, 199), (5000, 99999), (1000, 1001)]),
            ("bytes=" + ",".join("%d-%d" % (i * 10, i * 10 + 4) for i in range(16)),
             [(i * 10, i * 10 + 4) for i in range(16)]),
        ]
        for spec, spans in cases:
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            check_multipart(resp, spans, SIZE, DATA, "application/octet-stream",
                            "Range: %s" % spec[:40])
        resp = conn.roundtrip("GET", "/text.txt", headers={"Range": "bytes=0-4,-5"})
        check_multipart(resp, [(0, 4), (20 * KiB - 5, 20 * KiB - 1)], 20 * KiB,
                        FILES["text.txt"], "text/plain; charset=utf-8", "text.txt, 2 ranges")

        # Overlapping ranges, or more than 16: the whole file (unclog's choice).
        many = "bytes=" + ",".join("%d-%d" % (i * 2, i * 2) for i in range(100))
        for spec in ("bytes=0-10,5-15", "bytes=0-0,0-0", "bytes=0-,100-200", "bytes=-10,99995-",
                     "bytes=-200000,0-0",
                     "bytes=" + ",".join("%d-%d" % (i * 2, i * 2) for i in range(17)), many):
            resp = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            is_(resp.status, 200, "Range: %s: 200" % spec[:40])
            ok(resp.body == DATA, "Range: %s: the whole file" % spec[:40])
        resp = conn.roundtrip("GET", "/one.bin")
        is_((resp.status, resp.body), (200, b"x"), "the connection works after the multiparts")


def test_partitions():
    size = len(BIG)
    spans = [(0, 0), (4095, 4096), (4000, 12288), (1048570, 2097160), (MiB - 1, MiB),
             (size - 1, size - 1), (size - 4097, size - 1), (0, size - 1), (123, size - 2)]
    multi = [(100, 5000), (MiB - 1, MiB + 1), (3 * MiB - 10, size - 1)]
    for partition in ("4k", "whole"):
        with Server(files={"big.bin": BIG}, args=["--partition", partition],
                    name="server at --partition " + partition) as srv:
            with srv.conn() as conn:
                for first, last in spans:
                    resp = conn.roundtrip("GET", "/big.bin",
                                          headers={"Range": "bytes=%d-%d" % (first, last)})
                    check_206(resp, first, last, size, BIG, "--partition %s, %d-%d"
                              % (partition, first, last))
                resp = conn.roundtrip("GET", "/big.bin", headers={"Range": "bytes=-5000"})
                check_206(resp, size - 5000, size - 1, size, BIG, "--partition %s, -5000"
                          % partition)
                spec = "bytes=" + ",".join("%d-%d" % s for s in multi)
                resp = conn.roundtrip("GET", "/big.bin", headers={"Range": spec})
                check_multipart(resp, multi, size, BIG, "application/octet-stream",
                                "--partition %s, 3 ranges" % partition)
                resp = conn.roundtrip("GET", "/big.bin")
                ok(resp.status == 200 and resp.body == BIG, "--partition %s: the whole file"
                   % partition)


def test_head(srv):
    specs = ["bytes=0-9", "bytes=-1", "bytes=500-", "bytes=0-9,20-29", "bytes=200000-",
             "bytes=5-3"]
    with srv.conn() as conn:
        for spec in specs:
            get = conn.roundtrip("GET", "/data.bin", headers={"Range": spec})
            head = conn.roundtrip("HEAD", "/data.bin", headers={"Range": spec})
            is_(head.status, get.status, "HEAD Range: %s: same status as GET (%d)"
                % (spec, get.status))
            # The multipart boundary may differ between two responses.
            g = [(k, re.sub(r"boundary=\S+", "boundary=B", v)) for k, v in comparable_headers(get)]
            h = [(k, re.sub(r"boundary=\S+", "boundary=B", v))
                 for k, v in comparable_headers(head)]
            is_(h, g, "HEAD Range: %s: the same headers as GET" % spec)
    # Nothing follows the head of a HEAD 206.
    head, rest = split_response(*exchange(srv.port, b"HEAD /data.bin HTTP/1.1\r\nHost: a\r\n"
                                          b"Range: bytes=0-9\r\nConnection: close\r\n\r\n"))
    is_((head.status, rest), (206, b""), "HEAD with Range: no body bytes")


def run_tool(cmd, cwd, desc):
    """Run a download tool in cwd; report its exit status as a test. Returns
    its stdout and stderr together."""
    proc = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60 * SLOW)
    out = proc.stdout.decode("utf-8", "replace")
    ok(proc.returncode == 0, "%s: exit status 0" % desc, "exit status %d: %s"
       % (proc.returncode, out))
    return out


def interrupted(tmp, name, size):
    """A download in tmp/name stopped after size bytes of BIG. Returns its path."""
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(BIG[:size])
    return path


def same_as_big(path):
    with open(path, "rb") as f:
        return f.read() == BIG


def curl_resume(out, url, tmp, desc):
    """curl -C - into out, which holds the file's first part: the server
    must answer 206 and out must end up the identical file."""
    got = run_tool(["curl", "-sS", "-f", "-w", "status %{http_code}", "-C", "-", "-o", out, url],
                   tmp, desc)
    is_(got, "status 206", "%s: the server answered 206" % desc)
    ok(same_as_big(out), "%s: the identical file" % desc)


def test_resume(srv):
    """A download interrupted halfway and resumed gives the identical file."""
    srv.write_file("dl.bin", BIG)
    url = "http://127.0.0.1:%d/dl.bin" % srv.port
    half = len(BIG) // 2 + 7
    tmp = tempfile.mkdtemp(prefix="unclog-resume-")
    try:
        if shutil.which("curl") is None:
            skip_test("curl -C - resumes a download", "curl is not installed")
        else:
            curl_resume(interrupted(tmp, "curl.bin", half), url, tmp,
                        "curl -C - after the first half")
            # First half with curl -r, then resume into the same file.
            out = os.path.join(tmp, "curl2.bin")
            run_tool(["curl", "-sS", "-f", "-r", "0-%d" % (half - 1), "-o", out, url], tmp,
                     "curl -r 0-%d" % (half - 1))
            is_(os.path.getsize(out), half, "curl -r 0-%d: the first part" % (half - 1))
            curl_resume(out, url, tmp, "curl -C - after curl -r")

        if shutil.which("wget") is None:
            skip_test("wget -c resumes a download", "wget is not installed")
        else:
            out = interrupted(tmp, "dl.bin", half)
            got = run_tool(["wget", "-nv", "-S", "-c", url], tmp, "wget -c")
            like(got, r"HTTP/1\.1 206", "wget -c: the server answered 206")
            like(got, r"(?i)Content-Range: bytes %d-%d/%d" % (half, len(BIG) - 1, len(BIG)),
                 "wget -c: for the second half")
            ok(same_as_big(out), "wget -c after the first half: the identical file")
            got = run_tool(["wget", "-nv", "-S", "-c", url], tmp, "wget -c of a complete file")
            like(got, r"HTTP/1\.1 416", "wget -c of a complete file: the server answered 416")
            ok(same_as_big(out), "wget -c of a complete file: unchanged")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    with Server(files=FILES) as srv:
        test_accept_ranges(srv)
        test_single(srv)
        test_unsatisfiable(srv)
        test_malformed(srv)
        test_if_range(srv)
        test_multiple(srv)
        test_head(srv)
        test_resume(srv)
    test_partitions()


run(main)
