#!/usr/bin/env python3
# Directories: /dir redirects to /dir/ keeping the query string; /dir/ serves
# index.html; without index.html, 404 while listing is off (the default);
# with --listing on, an HTML listing: directories first, then files, each
# sorted by name; names HTML-escaped, links percent-encoded (and
# followable), sizes readable with the byte count in a title, dates shown,
# directories linked with a trailing slash; a large listing gzipped for a
# client that accepts gzip.
import html
import html.parser
import os
import re
import urllib.parse

from harness import Server, comparable_headers, gunzip, is_, like, ok, run

INDEX = b"<!doctype html><title>dir</title><p>the index</p>\n"
FILES = {
    "dir/index.html": INDEX,
    "dir/sub/index.html": b"<p>nested</p>\n",
    "a b/index.html": b"<p>space</p>\n",
    "noindex/x.txt": b"x",
    "root.txt": b"root",
    "q?x/index.html": b"<p>question mark</p>",
    "100%/index.html": b"<p>percent</p>",
    "a#b/index.html": b"<p>hash</p>",
}

# Listed directory: tricky names, each with distinct content.
LISTED = {
    "b.txt": b"bbb",
    "a.txt": b"a" * 12345,
    "Z.txt": b"zz",
    "<x>&\"'.txt": b"html special",
    "sp ace.txt": b"space",
    "\u00fcn\u00efc\u00f6de.txt": b"unicode",
    "100%.txt": b"percent",
    "q?hash#.txt": b"query and fragment",
    "colon:name.txt": b"colon",
    "empty.txt": b"",
}
LISTED_DIRS = ["subdir", "d<&>"]
MTIME = 1000000000  # 2001-09-09 01:46:40 UTC


def location_of(resp):
    """The path and query of a Location header (absolute or not)."""
    parts = urllib.parse.urlsplit(resp.header("Location", ""))
    return parts.path + ("?" + parts.query if parts.query else "")


def test_redirects(srv):
    cases = [
        ("/dir", "/dir/"),
        ("/dir?x=1&y=%20z", "/dir/?x=1&y=%20z"),
        ("/dir?", "/dir/"),
        ("/dir/sub", "/dir/sub/"),
        ("/dir/sub?a=b", "/dir/sub/?a=b"),
        ("/a%20b", "/a%20b/"),
        ("/noindex", "/noindex/"),
    ]
    for target, want in cases:
        for method in ("GET", "HEAD"):
            resp = srv.conn().roundtrip(method, target)
            is_(resp.status, 301, "%s %s: 301" % (method, target))
            got = location_of(resp)
            # "/dir/?" and "/dir/" are the same resource.
            is_(got.rstrip("?"), want, "%s %s: Location %s" % (method, target, want))
        if want.startswith("/dir/?"):
            # following the redirect works, the query does not matter
            resp = srv.get(location_of(srv.get(target)))
            is_((resp.status, resp.body), (200, INDEX), "following %s: the index" % target)


def test_encoded_redirects(srv):
    # The Location must re-encode what the request had to encode.
    for target, name in (("/q%3Fx", "q?x"), ("/100%25", "100%"), ("/a%23b", "a#b"),
                         ("/q%3Fx?k=v", "q?x")):
        resp = srv.get(target)
        is_(resp.status, 301, "GET %s: 301" % target)
        loc = resp.header("Location", "")
        got = srv.get(urllib.parse.urljoin(target, loc))
        is_((got.status, got.body), (200, FILES[name + "/index.html"]),
            "GET %s: following Location %s gives %s/index.html" % (target, loc, name))


def test_index(srv):
    for target in ("/dir/", "/dir/?q=1", "/dir/index.html", "//dir//"):
        resp = srv.get(target)
        is_((resp.status, resp.body), (200, INDEX), "GET %s: index.html" % target)
        is_(resp.media_type, "text/html", "GET %s: text/html" % target)
    resp = srv.get("/a%20b/")
    is_((resp.status, resp.body), (200, FILES["a b/index.html"]), "GET /a%20b/: its index")
    head = srv.head("/dir/")
    is_(comparable_headers(head), comparable_headers(srv.get("/dir/")),
        "HEAD /dir/: the same headers as GET")


def test_listing_off(srv):
    for target in ("/noindex/", "/noindex/?x"):
        resp = srv.get(target)
        is_(resp.status, 404, "listing off: GET %s: 404" % target)
        ok(b"x.txt" not in resp.body, "listing off: GET %s: no listing" % target)
        ok(b"listing = on" in resp.body, "listing off: GET %s: the body says listing = on"
           % target, "body %r" % resp.body)
    is_(srv.get("/noindex/nothing.txt").body, b"404 Not Found\n",
        "a missing file: a plain 404, no word of listings")
    is_(srv.get("/noindex/x.txt").body, b"x", "listing off: files in it are served")


class Links(html.parser.HTMLParser):
    """Collects (href, text, text of the rest of the row) from <a> tags."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []  # [href, link text, text after the link until the next]
        self.in_a = False

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append([dict(attrs).get("href"), "", ""])
            self.in_a = True
        elif self.links and not self.in_a:
            self.links[-1][2] += " "  # cells apart

    def handle_endtag(self, tag):
        if tag == "a":
            self.in_a = False
        elif self.links and not self.in_a:
            self.links[-1][2] += " "

    def handle_data(self, data):
        if self.links:
            self.links[-1][1 if self.in_a else 2] += data


def fetch_listing(srv, target):
    resp = srv.get(target)
    is_(resp.status, 200, "listing: GET %s: 200" % target)
    is_(resp.media_type, "text/html", "listing: GET %s: text/html" % target)
    like(resp.header("Content-Type", ""), r"(?i)charset=utf-8",
         "listing: GET %s: charset=utf-8" % target)
    is_(resp.header("Content-Length"), str(len(resp.body)),
        "listing: GET %s: Content-Length" % target)
    page = resp.body.decode("utf-8")
    parser = Links()
    parser.feed(page)
    parser.close()
    # the parent link is not an entry
    entries = [link for link in parser.links if link[0] not in ("../", "..")]
    return resp, page, entries


def test_listing_on(srv):
    for name, data in LISTED.items():
        srv.write_file("list/" + name, data)
        os.utime(srv.path("list/" + name), (MTIME, MTIME))
    for d in LISTED_DIRS:
        os.makedirs(srv.path("list/" + d))
        srv.write_file("list/%s/inner.txt" % d, b"inner of " + d.encode())
    resp, page, entries = fetch_listing(srv, "/list/")
    names = [text.rstrip("/") for _, text, _ in entries]
    by_name = lambda n: n.encode("utf-8")
    want = sorted(LISTED_DIRS, key=by_name) + sorted(LISTED, key=by_name)
    is_(sorted(names), sorted(want), "listing: every entry, and only those")
    is_(names, want, "listing: directories first, then files, each sorted by name")

    # HTML escaping: the raw page has no unescaped special name.
    for raw in ("<x>", "&\"'", "d<&>", "<d&>"):
        ok(raw not in page, "listing: %r does not appear unescaped" % raw)
    like(page, r"&lt;x&gt;&amp;(&quot;|&#34;|&#x22;)(&#39;|&#x27;|&apos;)\.txt",
         "listing: <>&\"' escaped as entities")

    for href, text, rest in entries:
        name = text.rstrip("/")
        is_dir = name in LISTED_DIRS
        ok(href is not None and re.match(r"^[\x21-\x7e]+$", href),
           "listing: %r: the link is printable ASCII, no spaces" % name, "href %r" % href)
        if href is None:
            continue
        path = urllib.parse.urlsplit(href).path
        ok(not urllib.parse.urlsplit(href).scheme, "listing: %r: a relative link" % name,
           "href %r" % href)
        is_(os.path.basename(urllib.parse.unquote(path.rstrip("/"))), name,
            "listing: %r: the link decodes to the name" % name)
        if is_dir:
            ok(href.endswith("/"), "listing: directory %r: the link ends in /" % name,
               "href %r" % href)
            ok(text.endswith("/"), "listing: directory %r: shown with a trailing /" % name)
        target = urllib.parse.urljoin("/list/", href)
        got = srv.get(target)
        if is_dir:
            # the linked directory is listed itself
            ok(got.status == 200 and b"inner.txt" in got.body,
               "listing: following %r (%s): its listing" % (name, target),
               "got %d" % got.status)
        else:
            is_((got.status, got.body), (200, LISTED[name]),
                "listing: following %r (%s): the file" % (name, target))
            # sizes and dates are shown in the entry's row
            size = len(LISTED[name])
            ok(re.search(r"(?<![\d.])%d(?![\d.])" % size, rest) or
               (size > 9999 and re.search(r"\b12(\.\d+)?\s*[kK]", rest)),
               "listing: %r: its size %d is shown" % (name, size), "row text %r" % rest)
            ok("2001" in rest, "listing: %r: its date (2001) is shown" % name,
               "row text %r" % rest)
    # readable sizes, the exact count in a title
    like(page, r'title="12345 bytes">12\.1 KiB<',
         "listing: 12345 bytes read 12.1 KiB, exactly in a title")
    like(page, r'title="3 bytes">3 B<', "listing: 3 bytes read 3 B")

    # the escaped directory's own listing escapes its title
    _, page, entries = fetch_listing(srv, "/list/d%3C%26%3E/")
    ok("<&>" not in page, "listing of /list/d<&>/: its name escaped in the page")
    is_([text for _, text, _ in entries], ["inner.txt"], "listing of /list/d<&>/: its entry")

    # parent link, root without index.html
    ok('href="../"' in page, "listing: a parent link in a subdirectory")
    _, page, entries = fetch_listing(srv, "/")
    ok("root.txt" in [text for _, text, _ in entries], "listing of / (no index.html)")

    # index.html still wins; /list still redirects; HEAD like GET
    is_(srv.get("/dir/").body, INDEX, "listing on: a directory with index.html serves it")
    is_(location_of(srv.get("/list")), "/list/", "listing on: /list still redirects")
    head = srv.head("/list/")
    get = srv.get("/list/")
    is_(head.status, 200, "listing: HEAD /list/: 200")
    is_(comparable_headers(head), comparable_headers(get), "listing: HEAD like GET")

    os.makedirs(srv.path("list/empty"))
    _, page, entries = fetch_listing(srv, "/list/empty/")
    is_(entries, [], "listing of an empty directory: no entries")

    # a dangling symlink and a FIFO do not break the listing
    srv.write_file("odd/f.txt", b"f")
    srv.symlink("odd/dangling", "/nonexistent/unclog-test")
    os.mkfifo(srv.path("odd/fifo"))
    _, page, entries = fetch_listing(srv, "/odd/")
    is_(sorted(text for _, text, _ in entries), ["dangling", "f.txt", "fifo"],
        "listing with a dangling symlink and a FIFO: every entry")


def test_sizes(srv):
    cases = [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (8192, "8.0 KiB"),
             (1258291, "1.2 MiB"), (1048575, "1.0 MiB"), (5 << 30, "5.0 GiB")]
    for size, shown in cases:
        srv.sparse_file("sizes/%d.bin" % size, size)
    _, page, _ = fetch_listing(srv, "/sizes/")
    for size, shown in cases:
        like(page, r'title="%d bytes">%s<' % (size, re.escape(shown)),
             "listing: %d bytes read %s" % (size, shown))


def test_large_listing_gzipped(srv):
    """20,000 entries, some 2 MB of HTML: gzipped for a client that accepts
    it, the same page as the identity one."""
    os.makedirs(srv.path("big"))
    for i in range(20000):
        open(srv.path("big/file-with-a-rather-long-name-%05d.txt" % i), "wb").close()
    plain = srv.get("/big/")
    is_(plain.status, 200, "large listing: 200")
    ok(len(plain.body) > 2000000, "large listing: over 2 MB", "%d bytes" % len(plain.body))
    ok(not plain.has_header("Content-Encoding"), "large listing without Accept-Encoding: identity")
    ok("accept-encoding" in plain.tokens("Vary"), "large listing: Vary: Accept-Encoding")
    for accept in ("gzip", "gzip, br", "*"):
        gz = srv.get("/big/", headers={"Accept-Encoding": accept})
        is_(gz.header("Content-Encoding"), "gzip",
            "large listing, Accept-Encoding: %s: gzipped" % accept)
        is_(gz.header("Content-Length"), str(len(gz.body)),
            "large listing gzipped: Content-Length of the gzip body")
        ok(len(gz.body) < len(plain.body) // 5, "large listing gzipped: much smaller",
           "%d of %d bytes" % (len(gz.body), len(plain.body)))
        is_(gunzip(gz.body), plain.body, "large listing gzipped: the same page inflated")
        ok("accept-encoding" in gz.tokens("Vary"), "large listing gzipped: Vary")
    head = srv.head("/big/", headers={"Accept-Encoding": "gzip"})
    get = srv.get("/big/", headers={"Accept-Encoding": "gzip"})
    is_(comparable_headers(head), comparable_headers(get), "large listing gzipped: HEAD like GET")
    no = srv.get("/big/", headers={"Accept-Encoding": "gzip;q=0"})
    is_((no.header("Content-Encoding"), no.body), (None, plain.body),
        "large listing, gzip;q=0: identity")
    # below gzip_min_size a listing goes out as it is
    small = srv.get("/list/empty/", headers={"Accept-Encoding": "gzip"})
    ok(small.status == 200 and not small.has_header("Content-Encoding"),
       "a listing smaller than gzip_min_size: identity", "%d bytes" % len(small.body))


def main():
    with Server(files=FILES, name="server, listing off (default)") as srv:
        test_redirects(srv)
        test_encoded_redirects(srv)
        test_index(srv)
        test_listing_off(srv)
    with Server(files=FILES, args=["--listing", "on"], name="server, --listing on") as srv:
        test_redirects(srv)
        test_listing_on(srv)
        test_sizes(srv)
        test_large_listing_gzipped(srv)


run(main)
