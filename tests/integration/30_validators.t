#!/usr/bin/env python3
# Validators and conditional requests (RFC 9110 8.8, 13): every file response
# carries a strong ETag and Last-Modified; If-None-Match (one tag, a list,
# "*") and If-Modified-Since give 304 without a body; If-None-Match takes
# precedence over If-Modified-Since; If-Match and If-Unmodified-Since
# failures give 412; a browser-like revalidation sees a new ETag once the
# file changes.
import email.utils
import os

from harness import ETAG_RE, IMF_FIXDATE, KiB, Server, is_, like, ok, random_bytes, run, text_bytes

FILES = {
    "a.txt": text_bytes(5 * KiB),
    "img.png": b"\x89PNG\r\n\x1a\n" + random_bytes(3000, 30),
    "blob.bin": random_bytes(100 * KiB, 31),
    "empty.txt": b"",
    "sub/index.html": b"<!doctype html><p>sub</p>\n",
}

OLD = "Mon, 01 Jan 2001 00:00:00 GMT"
FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT"


def http_date(t):
    return email.utils.formatdate(t, usegmt=True)


def check_validators(srv):
    etags = {}
    for name, data in FILES.items():
        target = "/sub/" if name == "sub/index.html" else "/" + name
        for method in ("GET", "HEAD"):
            with srv.conn() as conn:
                resp = conn.roundtrip(method, target)
            is_(resp.status, 200, "%s %s: 200" % (method, target))
            etag = resp.header("ETag")
            like(etag, ETAG_RE, "%s %s: ETag is an entity-tag" % (method, target))
            ok(etag is not None and not etag.startswith("W/"),
               "%s %s: the ETag is strong" % (method, target), "ETag: %r" % etag)
            lm = resp.header("Last-Modified")
            like(lm, IMF_FIXDATE, "%s %s: Last-Modified is an IMF-fixdate" % (method, target))
            mtime = int(os.stat(srv.path(name)).st_mtime)
            is_(lm, http_date(mtime), "%s %s: Last-Modified is the file's mtime" % (method, target))
            etags.setdefault(name, set()).add(etag)
    for name, tags in etags.items():
        is_(len(tags), 1, "%s: GET and HEAD give the same ETag" % name)
    firsts = [next(iter(t)) for t in etags.values()]
    is_(len(set(firsts)), len(firsts), "every file has its own ETag")
    again = srv.get("/a.txt").header("ETag")
    is_(again, next(iter(etags["a.txt"])), "the ETag of an unchanged file is stable")


def check_304(resp, desc, etag, size, conn=None):
    """A 304: the validators, and no body (the next response parses)."""
    is_(resp.status, 304, "%s: 304" % desc)
    is_(resp.header("ETag"), etag, "%s: the 304 carries the ETag" % desc)
    ok(resp.has_header("Date"), "%s: the 304 carries Date" % desc)
    cl = resp.header("Content-Length")
    # RFC 9110 8.6: a Content-Length in a 304 can only be the 200's.
    ok(cl is None or cl == str(size), "%s: no Content-Length, or the 200's" % desc,
       "Content-Length: %r, file size %d" % (cl, size))
    if conn is not None:
        nxt = conn.roundtrip("GET", "/img.png")
        is_((nxt.status, nxt.body), (200, FILES["img.png"]),
            "%s: the next response on the connection parses (no body after the 304)" % desc)


def test_if_none_match(srv):
    full = srv.get("/a.txt")
    etag, lm = full.header("ETag"), full.header("Last-Modified")
    size = len(FILES["a.txt"])
    cases = [
        ("single", etag),
        ("list, ours last", '"nope", "x-y-z", ' + etag),
        ("list, ours first", etag + ', "nope"'),
        ("list without spaces", '"nope",' + etag),
        ("*", "*"),
        ("weak form of ours (weak comparison)", "W/" + etag),
        ("list with an empty element (RFC 9110 5.6.1.2)", '"nope", , ' + etag),
    ]
    with srv.conn() as conn:
        for desc, value in cases:
            resp = conn.roundtrip("GET", "/a.txt", headers={"If-None-Match": value})
            check_304(resp, "GET If-None-Match %s" % desc, etag, size, conn)
        resp = conn.roundtrip("HEAD", "/a.txt", headers={"If-None-Match": etag})
        check_304(resp, "HEAD If-None-Match", etag, size, conn)
        resp = conn.roundtrip("GET", "/sub/", headers={"If-None-Match": srv.get("/sub/")
                                                       .header("ETag")})
        is_(resp.status, 304, "GET /sub/ (index.html) with its ETag: 304")
        for desc, value in (("another tag", '"nope"'), ("a list of others", '"a", "b"'),
                            ("an unterminated tag", etag[:-1]), ("garbage", "garbage"),
                            ("the ETag of another file", srv.get("/img.png").header("ETag"))):
            resp = conn.roundtrip("GET", "/a.txt", headers={"If-None-Match": value})
            is_((resp.status, resp.body), (200, FILES["a.txt"]),
                "GET If-None-Match %s: 200 with the file" % desc)
    return etag, lm


def test_if_modified_since(srv):
    full = srv.get("/a.txt")
    etag, lm = full.header("ETag"), full.header("Last-Modified")
    size = len(FILES["a.txt"])
    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/a.txt", headers={"If-Modified-Since": lm})
        check_304(resp, "If-Modified-Since = Last-Modified", etag, size, conn)
        resp = conn.roundtrip("HEAD", "/a.txt", headers={"If-Modified-Since": lm})
        check_304(resp, "HEAD If-Modified-Since = Last-Modified", etag, size, conn)
        for desc, value in (("a year before", OLD), ("garbage (ignored)", "yesterday"),
                            ("a bad day (ignored)", lm[:5] + "32" + lm[7:]),
                            ("empty (ignored)", "")):
            resp = conn.roundtrip("GET", "/a.txt", headers={"If-Modified-Since": value})
            is_((resp.status, resp.body), (200, FILES["a.txt"]),
                "If-Modified-Since %s: 200 with the file" % desc)
        # RFC 9110 5.6.7: the obsolete date forms must be accepted too.
        t = email.utils.parsedate_to_datetime(lm)
        asctime = t.strftime("%a %b ") + "%2d" % t.day + t.strftime(" %H:%M:%S %Y")
        resp = conn.roundtrip("GET", "/a.txt", headers={"If-Modified-Since": asctime})
        is_(resp.status, 304, "If-Modified-Since in asctime form (%s): 304" % asctime)

    # If-None-Match takes precedence (RFC 9110 13.2.2 step 3 before 4).
    resp = srv.get("/a.txt", headers={"If-None-Match": '"nope"', "If-Modified-Since": lm})
    is_((resp.status, resp.body), (200, FILES["a.txt"]),
        "If-None-Match another tag + If-Modified-Since = Last-Modified: 200 (INM wins)")
    resp = srv.get("/a.txt", headers={"If-None-Match": etag, "If-Modified-Since": OLD})
    is_(resp.status, 304, "If-None-Match ours + If-Modified-Since long ago: 304 (IMS ignored)")


def test_preconditions(srv):
    full = srv.get("/blob.bin")
    etag, lm = full.header("ETag"), full.header("Last-Modified")
    data = FILES["blob.bin"]
    fails = [
        ("If-Match another tag", {"If-Match": '"nope"'}),
        ("If-Match a list of others", {"If-Match": '"a", "b"'}),
        ("If-Match the weak form of ours (strong comparison)", {"If-Match": "W/" + etag}),
        ("If-Unmodified-Since long ago", {"If-Unmodified-Since": OLD}),
        ("If-Match another + If-None-Match ours", {"If-Match": '"nope"', "If-None-Match": etag}),
        ("If-Match another + Range", {"If-Match": '"nope"', "Range": "bytes=0-9"}),
        ("If-Unmodified-Since long ago + Range", {"If-Unmodified-Since": OLD,
                                                  "Range": "bytes=0-9"}),
    ]
    with srv.conn() as conn:
        for desc, headers in fails:
            for method in ("GET", "HEAD"):
                resp = conn.roundtrip(method, "/blob.bin", headers=headers)
                is_(resp.status, 412, "%s %s: 412" % (method, desc))
                ok(method == "HEAD" or resp.body != data, "%s %s: not the file" % (method, desc))
        passes = [
            ("If-Match ours", {"If-Match": etag}),
            ("If-Match a list with ours", {"If-Match": '"nope", ' + etag}),
            ("If-Match *", {"If-Match": "*"}),
            ("If-Unmodified-Since = Last-Modified", {"If-Unmodified-Since": lm}),
            ("If-Unmodified-Since in the future", {"If-Unmodified-Since": FUTURE}),
            ("If-Unmodified-Since garbage (ignored)", {"If-Unmodified-Since": "garbage"}),
            ("If-Match ours + If-Unmodified-Since long ago (IUS ignored)",
             {"If-Match": etag, "If-Unmodified-Since": OLD}),
        ]
        for desc, headers in passes:
            resp = conn.roundtrip("GET", "/blob.bin", headers=headers)
            is_((resp.status, resp.body == data), (200, True), "%s: 200 with the file" % desc)
        resp = conn.roundtrip("GET", "/blob.bin", headers={"If-Match": etag,
                                                             "If-None-Match": etag})
        is_(resp.status, 304, "If-Match ours + If-None-Match ours: 304")
        resp = conn.roundtrip("GET", "/blob.bin", headers={"If-Match": etag,
                                                             "Range": "bytes=0-9"})
        is_((resp.status, resp.body), (206, data[:10]), "If-Match ours + Range: 206")


def test_browser_sequence(srv):
    name = "page.html"
    first = b"<!doctype html><title>v1</title>" + text_bytes(3000)
    srv.write_file(name, first)
    os.utime(srv.path(name), (1600000000, 1600000000))
    with srv.conn() as conn:
        resp = conn.roundtrip("GET", "/" + name)
        is_((resp.status, resp.body), (200, first), "browser: first GET: 200")
        etag1, lm1 = resp.header("ETag"), resp.header("Last-Modified")
        ok(etag1 and lm1, "browser: first GET has ETag and Last-Modified")
        is_(lm1, "Sun, 13 Sep 2020 12:26:40 GMT", "browser: Last-Modified is the set mtime")
        # A browser revalidates with both validators.
        reval = {"If-None-Match": etag1, "If-Modified-Since": lm1}
        resp = conn.roundtrip("GET", "/" + name, headers=reval)
        check_304(resp, "browser: revalidation", etag1, len(first), conn)

        # The file is touched: new content (same size) and a new mtime.
        second = first.replace(b"v1", b"v2")
        with open(srv.path(name), "r+b") as f:
            f.write(second)
        os.utime(srv.path(name), (1600000100, 1600000100))
        resp = conn.roundtrip("GET", "/" + name, headers=reval)
        is_((resp.status, resp.body), (200, second), "browser: after the change: 200, new body")
        etag2 = resp.header("ETag")
        ok(etag2 and etag2 != etag1, "browser: a new ETag", "old %r, new %r" % (etag1, etag2))
        is_(resp.header("Last-Modified"), "Sun, 13 Sep 2020 12:28:20 GMT",
            "browser: a new Last-Modified")
        resp = conn.roundtrip("GET", "/" + name,
                              headers={"If-None-Match": etag2,
                                       "If-Modified-Since": resp.header("Last-Modified")})
        check_304(resp, "browser: revalidation of the new version", etag2, len(second), conn)

        # Only the mtime changes (same bytes, same size): still a new ETag.
        os.utime(srv.path(name), (1600000200, 1600000200))
        resp = conn.roundtrip("GET", "/" + name, headers={"If-None-Match": etag2})
        is_(resp.status, 200, "browser: after a touch only: 200")
        ok(resp.header("ETag") not in (etag1, etag2), "browser: after a touch only: a new ETag")

        # Sub-second mtime change, same second: the ETag still changes.
        os.utime(srv.path(name), ns=(1600000200_500000000, 1600000200_500000000))
        etag3 = resp.header("ETag")
        resp = conn.roundtrip("GET", "/" + name, headers={"If-None-Match": etag3})
        is_(resp.status, 200, "browser: after a sub-second touch: 200 (the ETag has ns)")

        # The file is replaced by a new one (new inode), same size and mtime.
        tmp = srv.path(name + ".new")
        with open(tmp, "wb") as f:
            f.write(second)
        os.utime(tmp, ns=(1600000200_500000000, 1600000200_500000000))
        etag4 = conn.roundtrip("GET", "/" + name).header("ETag")
        os.rename(tmp, srv.path(name))
        resp = conn.roundtrip("GET", "/" + name, headers={"If-None-Match": etag4})
        is_(resp.status, 200, "browser: after a rename over it (new inode): 200")


def test_gzip_variant(srv):
    # The gzip-encoded variant has its own validator and revalidates too.
    ae = {"Accept-Encoding": "gzip"}
    identity = srv.get("/a.txt")
    resp = srv.get("/a.txt", headers=ae)
    is_(resp.header("Content-Encoding"), "gzip", "a.txt with Accept-Encoding: gzip is gzipped")
    etag = resp.header("ETag")
    like(etag, ETAG_RE, "gzip variant: ETag is an entity-tag")
    ok(etag != identity.header("ETag"), "gzip variant: another ETag than identity (RFC 9110 8.8.3)",
       "both %r" % etag)
    ok(resp.has_header("Last-Modified"), "gzip variant: Last-Modified")
    resp = srv.get("/a.txt", headers=dict(ae, **{"If-None-Match": etag}))
    is_(resp.status, 304, "gzip variant: If-None-Match its ETag: 304")
    is_(resp.header("ETag"), etag, "gzip variant: the 304 carries its ETag")
    ok("accept-encoding" in resp.tokens("Vary"), "gzip variant: the 304 carries Vary")


def test_order(srv):
    """Preconditions come after the resource is found and before Range."""
    etag = srv.get("/blob.bin").header("ETag")
    lm = srv.get("/blob.bin").header("Last-Modified")
    with srv.conn() as conn:
        for desc, headers in (("If-None-Match ours", {"If-None-Match": etag}),
                              ("If-Modified-Since", {"If-Modified-Since": lm})):
            for spec in ("bytes=0-9", "bytes=0-9,20-29", "bytes=999999-"):
                resp = conn.roundtrip("GET", "/blob.bin", headers=dict(headers, Range=spec))
                is_(resp.status, 304, "%s + Range: %s: 304 (RFC 9110 13.2.2)" % (desc, spec))
        # RFC 9110 13.2.1: preconditions are ignored when the answer without
        # them would not be 2xx.
        for target, status in (("/missing.txt", 404), ("/sub", 301)):
            for headers in ({"If-Match": '"nope"'}, {"If-Match": "*"}, {"If-None-Match": "*"},
                            {"If-Unmodified-Since": OLD}, {"If-Modified-Since": FUTURE}):
                resp = conn.roundtrip("GET", target, headers=headers)
                is_(resp.status, status, "GET %s %s: still %d" % (target, headers, status))


def test_future_mtime(srv):
    # RFC 9110 8.8.2.1: a modification time in the future MUST be replaced
    # by the message origination date.
    srv.write_file("future.txt", b"from the future")
    os.utime(srv.path("future.txt"), (4102444800, 4102444800))  # 2100-01-01
    resp = srv.get("/future.txt")
    lm, date = resp.header("Last-Modified"), resp.header("Date")
    try:
        later = (email.utils.parsedate_to_datetime(lm) > email.utils.parsedate_to_datetime(date))
    except (TypeError, ValueError):
        later = True
    ok(not later, "a file modified in 2100: Last-Modified is not later than Date",
       "Last-Modified: %s, Date: %s" % (lm, date))


def test_empty(srv):
    resp = srv.get("/empty.txt")
    etag = resp.header("ETag")
    is_((resp.status, resp.body), (200, b""), "empty file: 200")
    like(etag, ETAG_RE, "empty file: ETag")
    resp = srv.get("/empty.txt", headers={"If-None-Match": etag})
    is_(resp.status, 304, "empty file: If-None-Match: 304")


def main():
    with Server(files=FILES) as srv:
        check_validators(srv)
        test_if_none_match(srv)
        test_if_modified_since(srv)
        test_preconditions(srv)
        test_browser_sequence(srv)
        test_gzip_variant(srv)
        test_order(srv)
        test_future_mtime(srv)
        test_empty(srv)


run(main)
