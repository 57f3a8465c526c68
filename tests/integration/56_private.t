#!/usr/bin/env python3
# The server's figures are private by default. /stats, /stats/history and
# /metrics answer on the admin door (admin_listen), and on the public
# listener only the clients under stats_from (off by default: loopback ones
# neither); anyone else gets 403 naming that key. The dashboard answers on
# the admin door only (404 on the public listener). A client let in by
# stats_from sees no other client's address and no pid unless
# stats_detail = full; the admin door shows everything. The server listens
# on 0.0.0.0 and a client bound to this machine's 192.0.2.2 is a
# non-loopback peer. /settings refuses a request a proxy carried (Forwarded,
# X-Forwarded-For, X-Real-IP, Via) and judges an absolute-form target by its
# authority. Statuses and bodies, no timings.
import json
import socket

from harness import Conn, Prometheus, Server, is_, like, ok, poll, run, run_with_conf

OUTSIDE = "192.0.2.2"  # this machine's non-loopback address
VISITOR = "127.0.0.3"  # another client, whose address must not leak
FIGURES = ("/stats", "/stats/history", "/metrics")
DASHBOARD = "/.unclog/dashboard"


def outside_available():
    try:
        with socket.socket() as s:
            s.bind((OUTSIDE, 0))
        return True
    except OSError:
        return False


def get(srv, target, source=None, method="GET", admin=False):
    """One request from SOURCE (an address of this machine; None: 127.0.0.1)
    to the address it reaches the server's public listener on (or, ADMIN,
    to its admin door on 127.0.0.1): (status, body text)."""
    port, host = (srv.admin_port, "127.0.0.1") if admin else (srv.port, source or "127.0.0.1")
    with Conn(port, host=host, source=source) as c:
        r = c.roundtrip(method, target)
    return r.status, r.body.decode("utf-8", "replace")


def keys_in(value):
    """Every member name in a JSON value, however deep."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from keys_in(v)


def refused_by_default():
    with Server(args=["--listen", "0.0.0.0:0"]) as srv:
        for page in FIGURES:
            status, body = get(srv, page, OUTSIDE)
            is_(status, 403, "default: GET %s from %s is 403" % (page, OUTSIDE))
            like(body, r"stats_from", "  and the body names the key that lets it in")
            is_(get(srv, page)[0], 403, "  from 127.0.0.1 on the public listener: 403 too")
            is_(get(srv, page, admin=True)[0], 200, "  on the admin door: 200")
        is_(get(srv, "/stats", OUTSIDE, "HEAD")[0], 403, "HEAD /stats from outside: 403")
        is_((get(srv, DASHBOARD, OUTSIDE)[0], get(srv, DASHBOARD)[0]), (404, 404),
            "the dashboard on the public listener, from outside or loopback: 404")
        is_(get(srv, DASHBOARD, admin=True)[0], 200, "  on the admin door: 200")
    with Server(args=["--listen", "0.0.0.0:0", "--stats-from", "192.0.3.0/24,10.0.0.1"]) as srv:
        is_(get(srv, "/metrics", OUTSIDE)[0], 403,
            "stats_from = 192.0.3.0/24,10.0.0.1 does not let %s in" % OUTSIDE)


def visitor_seen(srv):
    """/stats from loopback, once both workers run and its top clients list
    the visitor."""
    st = json.loads(get(srv, "/stats", admin=True)[1])
    rows = st["connections"]["top_clients"].values()
    up = all(w["up"] for w in st["by_worker"].values())
    return up and VISITOR in [r.get("client") for r in rows] and st


def let_in(detail):
    args = ["--listen", "0.0.0.0:0", "--stats-from", "10.0.0.1, 192.0.2.0/24", "--workers", "2"]
    if detail:
        args += ["--stats-detail", detail]
    full = detail == "full"
    what = "stats_detail = %s" % (detail or "private (default)")
    with Server(files={"x.txt": b"x" * 5000}, args=args) as srv:
        # The visitor keeps a connection open, so it stays among the top.
        with Conn(srv.port, source=VISITOR) as visitor:
            is_(visitor.roundtrip("GET", "/x.txt").status, 200, "a visitor from %s" % VISITOR)
            mine = poll(lambda: visitor_seen(srv))
            ok(mine, "the admin door's /stats names the visitor %s in top_clients, both workers "
               "up" % VISITOR)
            if not mine:
                return
            pids = [w["pid"] for w in mine["by_worker"].values()]
            ok("pid" in mine and all(pids), "the admin door's /stats has the pid and each "
               "worker's")
            is_(get(srv, DASHBOARD, OUTSIDE)[0], 404,
                "%s: the dashboard is not among them: 404 from %s" % (what, OUTSIDE))
            for page in FIGURES:
                status, body = get(srv, page, OUTSIDE)
                is_(status, 200, "%s: GET %s from %s (under 192.0.2.0/24)" % (what, page, OUTSIDE))
                if page == "/stats":
                    is_(VISITOR in body, full, "  %s the visitor's address" % (
                        "shows" if full else "does not show"))
                elif page == "/metrics":  # never an address, whatever the detail
                    ok(VISITOR not in body, "  without the visitor's address")
            st = json.loads(get(srv, "/stats", OUTSIDE)[1])
            names = set(keys_in(st))
            is_(("pid" in names, "client" in names), (full, full),
                "%s: /stats' members pid and client %s" % (what, "there" if full else "left out"))
            is_([w.get("pid") for w in st["by_worker"].values()], pids if full else [None, None],
                "  each worker's pid %s" % ("there" if full else "left out"))
            rows = st["connections"]["top_clients"]
            ok(rows and all("connections" in r for r in rows.values()),
               "  the top clients' figures are there, ranked (%d rows)" % len(rows))
            is_(len(st["by_worker"]), 2, "  and each worker's row")


def bad_values():
    for value, shown in (("192.0.2.7/24", "192.0.2.7/24"), ("10.0.0.1,nope", "nope"),
                         ("10.0.0.0/33", "10.0.0.0/33"), (",".join(["10.0.0.1"] * 9), "at most 8")):
        status, _, err, _ = run_with_conf("stats_from = %s\n" % value)
        is_(status, 2, "stats_from = %s: exit 2" % value)
        like(err, r":1: stats_from: .*%s" % shown.replace(".", r"\."), "  saying why, at file:line")


def prometheus_elsewhere():
    """docs/operations.md's example: a Prometheus on another host, let in by its
    address. Here it scrapes 192.0.2.2, so the server sees it from there."""
    if not Prometheus.installed("a real Prometheus off loopback scrapes /metrics"):
        return
    with Server(args=["--listen", "0.0.0.0:0", "--stats-from", OUTSIDE]) as srv:
        with Prometheus(srv.port, "1s", host=OUTSIDE) as prom:
            def scraped():
                up = prom.query('up{job="unclog"}')
                return up and up[0]["value"][1] == "1" and up

            ok(poll(scraped, timeout=20, interval=0.25),
               "stats_from = %s: a Prometheus scraping %s:PORT has up 1" % (OUTSIDE, OUTSIDE))
        st = srv.stats()
        is_(st["responses"]["/metrics"]["4xx"], 0, "  no scrape was refused")


FORM = "application/x-www-form-urlencoded"
# What a reverse proxy on this machine adds (nginx's proxy_pass sends Host
# $proxy_host: 127.0.0.1:PORT, and no Origin).
PROXY_HEADERS = (("Forwarded", "for=203.0.113.9"), ("X-Forwarded-For", "203.0.113.9"),
                 ("X-Real-IP", "203.0.113.9"), ("Via", "1.1 proxy"),
                 ("x-forwarded-for", "203.0.113.9"))


def settings(srv, method, target="/settings", headers=(), body=None):
    """One request to /settings on the admin door, from 127.0.0.1, with Host
    127.0.0.1:PORT and HEADERS: (status, body text)."""
    headers = [("Host", "127.0.0.1:%d" % srv.admin_port)] + list(headers)
    if body is not None:
        headers.append(("Content-Type", FORM))
    with Conn(srv.admin_port) as c:
        r = c.roundtrip(method, target, headers=headers, body=body, host=False)
    return r.status, r.body.decode("utf-8", "replace")


def proxied_settings():
    with Server(args=["--admin", "on"]) as srv:
        is_(settings(srv, "GET")[0], 200, "/settings from 127.0.0.1, no proxy header: 200")
        for name, value in PROXY_HEADERS:
            for method, body in (("GET", None), ("POST", b"partition=4k")):
                status, text = settings(srv, method, headers=[(name, value)], body=body)
                is_(status, 403, "%s /settings carrying %s: 403" % (method, name))
                like(text, r"a proxied request .* is refused", "  saying why")
        is_(srv.stats()["settings"]["partition"], "auto", "no proxied POST changed anything")
        here = "127.0.0.1:%d" % srv.admin_port
        for authority in ("example.com", "example.com:%d" % srv.admin_port, OUTSIDE):
            status, text = settings(srv, "GET", "http://%s/settings" % authority)
            is_(status, 403, "GET http://%s/settings under Host %s: 403" % (authority, here))
            like(text, r"an absolute-form target must name localhost", "  saying why")
        status, _ = settings(srv, "POST", "http://example.com/settings", body=b"partition=4k")
        ok(status in (400, 403), "POST http://example.com/settings is refused (%d)" % status)
        is_(srv.stats()["settings"]["partition"], "auto", "  and changed nothing")
        is_(settings(srv, "GET", "http://%s/settings" % here)[0], 200,
            "GET http://%s/settings (its own authority): 200" % here)


def main():
    if not outside_available():
        ok(False, "%s is an address of this machine (the tests need a non-loopback peer)"
           % OUTSIDE)
        return
    refused_by_default()
    let_in(None)
    let_in("full")
    bad_values()
    proxied_settings()
    prometheus_elsewhere()


run(main)
