#!/usr/bin/env python3
# The dashboard built into the binary: served at /.unclog/dashboard whatever
# the root (an empty directory here), the bytes of static/dashboard.html as
# text/html, named by the startup line (under a loopback address when the
# server listens on a wildcard one), one file that loads nothing but
# /stats, /stats/history and /settings, gzipped for a client that accepts it;
# and a site's own files, /dashboard.html and the rest of /.unclog/ included,
# stay the site's.
# 35_browser.t renders it.
import gzip
import os
import re
import socket

from harness import REPO, Conn, Server, is_, like, note, ok, run

PATH = "/.unclog/dashboard"
with open(os.path.join(REPO, "static", "dashboard.html"), "rb") as f:
    PAGE = f.read()


def empty_root():
    with Server(name="server of an empty directory") as srv:
        like(srv.startup_line, r"listening on http://127\.0\.0\.1:%d/ .*, admin "
             r"http://127\.0\.0\.1:%d/, dashboard http://127\.0\.0\.1:%d/\.unclog/dashboard$"
             % (srv.port, srv.admin_port, srv.admin_port),
             "the startup line names the admin door and the dashboard's URL there")
        ok(srv.admin_port != srv.port, "the admin door is a port of its own (%s)" % srv.admin_port)
        is_(srv.get(PATH, door="public").status, 404, "the public listener has no dashboard: 404")
        r = srv.get(PATH)
        is_((r.status, r.header("Content-Type")), (200, "text/html; charset=utf-8"),
            "GET %s from an empty root: 200, text/html" % PATH)
        ok(r.body == PAGE, "the body is static/dashboard.html, byte for byte (%d bytes)"
           % len(PAGE), "got %d bytes" % len(r.body))
        r = srv.get(PATH + "?set=partition=64k&theme=dark")
        is_((r.status, len(r.body)), (200, len(PAGE)), "with a query: the same page")
        r = srv.head(PATH)
        is_((r.status, r.header("Content-Length"), r.body), (200, str(len(PAGE)), b""),
            "HEAD: 200, the page's length, no body")
        r = srv.request("POST", PATH, body=b"x")
        is_((r.status, r.header("Allow")), (405, "GET, HEAD"), "POST: 405, Allow: GET, HEAD")
        is_(srv.get("/dashboard.html").status, 404, "/dashboard.html is not claimed: 404 here")
        answered = srv.stats()["responses"][PATH]
        is_((answered["2xx"], answered["4xx"]), (3, 1),
            "/stats counts the dashboard's route: 3 pages, 1 refusal (the public 404 is "
            "unrouted)")


def ipv6_loopback():
    """Whether ::1 can be bound here."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def settings_status(port, host):
    """GET /settings with this Host: (status, body text)."""
    with Conn(port) as c:
        r = c.roundtrip("GET", "/settings", headers={"Host": host})
    return r.status, r.body.decode("utf-8", "replace")


def wildcard():
    """A wildcard admin listener prints a loopback dashboard URL: under its
    own address the page's switch would be refused by the Host rule."""
    binds = [("0.0.0.0", "127.0.0.1")]
    if ipv6_loopback():
        binds.append(("[::]", "[::1]"))
    else:
        note("no IPv6 on loopback: [::] not tried")
    for bind, loopback in binds:
        args = ["--listen", bind + ":0", "--admin-listen", bind + ":0", "--admin", "on"]
        with Server(args=args, name="server on " + bind) as srv:
            like(srv.startup_line, r"listening on http://%s:%d/ .*, admin http://%s:%d/, dashboard "
                 r"http://%s:%d/\.unclog/dashboard$" % (re.escape(bind), srv.port,
                                                        re.escape(loopback), srv.admin_port,
                                                        re.escape(loopback), srv.admin_port),
                 "--admin-listen %s:0: the startup line's dashboard URL names %s"
                 % (bind, loopback))
            is_(settings_status(srv.admin_port, "%s:%d" % (loopback, srv.admin_port))[0], 200,
                "  GET /settings under that URL's Host: 200, the page may switch")
            status, text = settings_status(srv.admin_port, "%s:%d" % (bind, srv.admin_port))
            is_(status, 403, "  under Host %s: 403" % bind)
            like(text, r"^403 Forbidden: /settings answers only its own page: Host must be ",
                 "  naming the Host rule")


def gzipped():
    """A client that accepts gzip gets the page gzipped (made at build time),
    which unpacks to the same bytes; one that does not, or refuses it, the
    page as it is; both told Vary: Accept-Encoding."""
    with Server(name="server for the gzipped dashboard") as srv:
        r = srv.get(PATH, headers={"Accept-Encoding": "gzip, deflate, br"})
        is_((r.status, r.header("Content-Encoding"), r.header("Vary")),
            (200, "gzip", "Accept-Encoding"), "Accept-Encoding: gzip: the page gzipped")
        ok(gzip.decompress(r.body) == PAGE and len(r.body) * 3 < len(PAGE),
           "it unpacks to static/dashboard.html (%d bytes for %d)" % (len(r.body), len(PAGE)))
        r = srv.head(PATH, headers={"Accept-Encoding": "gzip"})
        is_((r.status, r.header("Content-Encoding"), r.body), (200, "gzip", b""),
            "HEAD with gzip: the same head, no body")
        for accept in (None, "gzip;q=0", "identity"):
            headers = {"Accept-Encoding": accept} if accept else {}
            r = srv.get(PATH, headers=headers)
            is_((r.header("Content-Encoding"), r.header("Vary"), r.body == PAGE),
                (None, "Accept-Encoding", True), "Accept-Encoding %r: the page as it is" % accept)


def self_contained():
    """Nothing for the browser to fetch from the root: every src and href is
    data: or in the page, CSS imports nothing, and the script fetches only
    the server's own /stats, /stats/history and /settings."""
    text = PAGE.decode("utf-8")
    links = re.findall(r'\b(?:src|href)\s*=\s*["\']?([^"\'\s>]*)', text)
    is_([u for u in links if not u.startswith(("data:", "#"))], [],
        "every src and href of the page is a data: URI (%d)" % len(links))
    is_(re.findall(r"@import|url\((?!data:)", text), [], "the styles load nothing")
    is_(sorted(set(re.findall(r'fetch\(\s*["\']([^"\']*)', text))),
        ["/settings", "/stats", "/stats/history?since="],
        "the script fetches /stats, /stats/history and /settings, by absolute path")


def site_files_win():
    files = {"dashboard.html": b"the site's own dashboard\n",
             ".unclog/dashboard.html": b"a sibling\n", ".unclog/index.html": b"an index\n"}
    # dotfiles on: .unclog/ is a hidden name, served only then
    with Server(files=files, args=["--dotfiles", "on"],
                name="server of a site with its own files") as srv:
        for target, body in (("/dashboard.html", files["dashboard.html"]),
                             ("/.unclog/dashboard.html", files[".unclog/dashboard.html"]),
                             ("/.unclog/", files[".unclog/index.html"])):
            r = srv.get(target)
            is_((r.status, r.body), (200, body), "GET %s: the site's file" % target)
        r = srv.get(PATH)
        ok(r.status == 200 and r.body == PAGE, "and %s is the built-in page" % PATH)


def main():
    empty_root()
    wildcard()
    gzipped()
    self_contained()
    site_files_win()


run(main)
