#!/usr/bin/env python3
# The dashboard's history lives in the server. GET /stats/history answers
# the figures the chart draws, a sample every 500 ms of server time (small
# requests' p50 and p99 over the recent window, the bytes sent), at most
# `capacity` of them, and the setting changes with their values, as
# POST /settings made them; since=MS keeps what came after. It is an
# instrument: counted in /stats, not in the latency it serves. Then, after
# 30 s of traffic, headless Chromium opens the dashboard: its chart starts
# where the server's history starts, not where the page did, and its
# markers name the values of every change (the page exposes what it drew
# in data attributes, read through --dump-dom). States and counters only.
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

from harness import (IO_TIMEOUT, SLOW, KiB, Conn, Server, is_, like, note, ok, poll, run,
                     skip_test, text_bytes)

TRAFFIC_MS = 30000  # server time with traffic before the browser opens the page
FILES = {"small.txt": text_bytes(2 * KiB), "big.txt": text_bytes(512 * KiB)}
COLUMNS = ["t_ms", "requests", "p50_us", "p99_us", "bytes_sent"]


class Traffic:
    """A GET of /small.txt every 50 ms and of /big.txt every second, on one
    keep-alive connection, until stopped: counts the answers."""

    def __init__(self, port):
        self.port = port
        self.stop_event = threading.Event()
        self.answered = 0
        self.errors = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        n = 0
        try:
            with Conn(self.port) as c:
                while not self.stop_event.wait(0.05):
                    target = "/big.txt" if n % 20 == 0 else "/small.txt"
                    if c.roundtrip("GET", target).status == 200:
                        self.answered += 1
                    n += 1
        except OSError as e:
            self.errors.append(str(e))

    def stop(self):
        self.stop_event.set()
        self.thread.join(IO_TIMEOUT)


asked = {"2xx": 0}  # this test's GETs of /stats/history answered 200


def history(srv, query=""):
    r = srv.get("/stats/history" + query)
    if r.status != 200:
        raise RuntimeError("GET /stats/history%s answered %d: %r" % (query, r.status, r.body))
    asked["2xx"] += 1
    return json.loads(r.body)


def rows(h):
    """The samples as tuples (t_ms, requests, p50_us, p99_us, bytes_sent)."""
    return list(zip(*(h["samples"][k] for k in COLUMNS)))


def post(srv, form):
    r = srv.request("POST", "/settings", body=form.encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    is_(r.status, 200, "POST /settings %s: 200" % form)
    return json.loads(r.body)


def instrument(srv):
    """Before any traffic: samples come, and asking is counted, not timed."""
    ok(poll(lambda: len(history(srv)["samples"]["t_ms"]) >= 2),
       "a server up for a second has samples")
    h = history(srv)
    is_((h["period_ms"], h["capacity"]), (500, 240), "period_ms 500, capacity 240 (120 s)")
    is_(sorted(h["samples"]), sorted(COLUMNS), "the samples' columns: " + ", ".join(COLUMNS))
    s = srv.stats()
    is_(s["responses"]["/stats/history"]["2xx"], asked["2xx"],
        "/stats counts every GET /stats/history (%d)" % asked["2xx"])
    is_(s["latency"]["small"]["requests"], 0, "and none is in the small requests' latency")


def endpoint(srv, start_ms):
    """The history after TRAFFIC_MS of traffic and two setting changes."""
    h = history(srv)
    after = srv.stats()["uptime_ms"]
    samples = rows(h)
    is_(sorted({len(h["samples"][k]) for k in COLUMNS}), [len(samples)],
        "every column has one value per sample (%d)" % len(samples))
    ok(0 < len(samples) <= h["capacity"], "at most capacity samples")
    ok(len(samples) <= after // h["period_ms"],
       "no more samples than periods of uptime (%d ms)" % after)
    gaps = [b[0] - a[0] for a, b in zip(samples, samples[1:])]
    ok(gaps and min(gaps) >= h["period_ms"],
       "samples at least a period apart, in order", "gaps %r" % gaps[:20])
    gaps.sort()
    note("median gap %d ms, largest %d ms" % (gaps[len(gaps) // 2], gaps[-1]))
    ok(all(b[4] >= a[4] for a, b in zip(samples, samples[1:])), "bytes_sent never goes back")
    busy = [r for r in samples if r[1] > 0]
    ok(len(busy) >= 2 and all(0 < r[2] <= r[3] for r in busy),
       "samples under traffic have 0 < p50 <= p99 (%d of them)" % len(busy))
    ok(all(r[2] == r[3] == 0 for r in samples if r[1] == 0), "idle samples have no percentiles")
    ok(busy and busy[0][0] >= start_ms, "the first busy sample comes after the traffic started")

    mid = samples[len(samples) // 2][0]
    later = rows(history(srv, "?since=%d" % mid))
    ok(later and all(r[0] > mid for r in later), "since=%d: only samples after it" % mid)
    tail = [r for r in samples if r[0] > mid]
    is_(later[:len(tail)], tail, "since=: the same samples the whole history has after it")
    is_(rows(history(srv, "?since=%d" % (after + 60000))), [], "since= beyond now: none")
    for query in ("?since=", "?since=-1", "?since=12x", "?since=99999999999999999999"):
        is_(srv.get("/stats/history" + query).status, 400, "since%s: 400" % query[6:])
    r = srv.head("/stats/history")
    is_((r.status, r.header("Content-Type"), r.body), (200, "application/json", b""),
        "HEAD: 200, JSON, no body")
    return h


def markers(srv, changes):
    """Every change POST /settings made, in order, with its value and time."""
    h = history(srv)
    got = [(m["t_ms"], m["key"], m["value"]) for m in h["markers"]]
    is_(got, changes, "the markers: each change's time (its changed_ms), key and value")
    got = history(srv, "?since=%d" % changes[0][0])["markers"]
    is_([(m["t_ms"], m["key"], m["value"]) for m in got], changes[1:],
        "since= the first change: the later ones")


def dump_dom(chromium, url):
    """Chromium's DOM of url after 4 s of virtual time: (exit status, DOM, stderr)."""
    profile = tempfile.mkdtemp(prefix="unclog-chromium-")
    try:
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--window-size=1280,800",
             "--virtual-time-budget=4000", "--user-data-dir=" + profile, "--dump-dom", url],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=90 * SLOW)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode()


def chart(dom):
    """The chart canvas' data attributes, as a dict."""
    m = re.search(r'<canvas id="chart"([^>]*)>', dom)
    return dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1))) if m else {}


def page(chromium, srv, h, changes):
    """The dashboard opened after the traffic shows the server's history."""
    busy = [r for r in rows(h) if r[1] > 0]
    opened = srv.stats()["uptime_ms"]
    status, dom, err = dump_dom(chromium, "http://127.0.0.1:%d/.unclog/dashboard" % srv.admin_port)
    ok(status == 0, "chromium --dump-dom: exit status 0", err[-2000:])
    c = chart(dom)
    note("the chart: %r, opened at %d ms" % (c, opened))
    frm, to = int(c.get("from") or 1 << 62), int(c.get("to") or 0)
    ok(frm <= busy[0][0], "the chart starts at the server's first busy sample (%d ms), before "
       "the page opened (%d ms)" % (busy[0][0], opened), "from %d" % frm)
    ok(to >= opened, "and reaches the page's own polls")
    ok(int(c.get("points") or 0) >= len(busy),
       "it draws every busy sample the history had (%d)" % len(busy))
    note("the chart spans %.1f s of server time" % ((to - frm) / 1000))
    for _, key, value in changes:
        like(c.get("markers", ""), r"\b%s=%s\b" % (key, value),
             "a marker names %s=%s, as it was then" % (key, value))


def main():
    srv = Server(files=FILES, args=["--admin", "on"], name="server with history").start()
    instrument(srv)
    start_ms = srv.stats()["uptime_ms"]
    traffic = Traffic(srv.port)
    changes = []
    try:
        for form, want in (("partition=64k", "64k"), ("partition=4k", "4k")):
            poll(lambda: srv.stats()["uptime_ms"] >= start_ms + 2000 * (len(changes) + 1), 20)
            answer = post(srv, form)
            changes.append((answer["changed_ms"]["partition"], "partition", want))
        poll(lambda: srv.stats()["uptime_ms"] >= start_ms + TRAFFIC_MS, 2 * TRAFFIC_MS / 1000)
        h = endpoint(srv, start_ms)
        markers(srv, changes)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None and os.environ.get("UNCLOG_REQUIRE_BROWSER") == "1":
            ok(False, "chromium is installed (UNCLOG_REQUIRE_BROWSER=1)")
        elif chromium is None:
            skip_test("the dashboard opened after 30 s shows them", "chromium is not installed")
        else:
            page(chromium, srv, h, changes)
    finally:
        traffic.stop()
    ok(traffic.answered > 0 and not traffic.errors,
       "the traffic ran (%d answers)" % traffic.answered, repr(traffic.errors[:3]))
    srv.stop()


run(main, timeout=150)
