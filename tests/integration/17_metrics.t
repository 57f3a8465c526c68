#!/usr/bin/env python3
# GET /metrics: the Prometheus text exposition format 0.0.4. Every family has
# HELP and TYPE lines and its samples together; promtool accepts it (skipped
# without promtool, unless UNCLOG_REQUIRE_PROMTOOL=1). Known traffic moves
# the counters by exactly what it costs (file cache off: a GET one open,
# which reads a file that fits the partition, and else one read per
# partition); histograms are cumulative at powers of two of
# microseconds, +Inf is _count, and their counts and sums agree with the
# counters and with /stats. Under emulate_disk = 50ms no read lands below
# 50 ms: the bounds are in seconds. HEAD is the head of GET, POST is 405.
# Last, when the prometheus binary is installed, a real Prometheus scrapes
# the server once on loopback and finds every sample.
import math
import re
from decimal import Decimal

from harness import (KiB, Prometheus, Server, comparable_headers, exchange, is_, ok, poll,
                     promtool_check, random_bytes, run, split_response, text_bytes)

PARTITION = 4 * KiB
GZIP_PARTITION = 64 * KiB
FILES = {"small.txt": b"small", "mid.bin": random_bytes(100 * KiB, 17),
         "text.txt": text_bytes(30 * KiB + 1)}
BODY = text_bytes(200 * KiB + 1)
CLASSES = ("open", "read", "gzip", "list")
ROUTES = ("none", "unrouted", "/gzip", "/stats", "/stats/history", "/settings", "/metrics",
          "/.unclog/dashboard", "static")
LIVE_KEYS = ("partition", "gzip_partition", "scheduler", "emulate_disk", "gzip_files",
             "gzip_static", "file_cache")
# Bucket bounds: 2^0 .. 2^26 microseconds, in seconds, exactly as printed.
LES = ["%d.%06d" % divmod(2 ** n, 10 ** 6) for n in range(27)] + ["+Inf"]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

FAMILIES = {
    "unclog_build_info": "gauge",
    "unclog_http_responses_total": "counter",
    "unclog_http_response_body_bytes_total": "counter",
    "unclog_http_request_duration_seconds": "histogram",
    "unclog_connections_active": "gauge",
    "unclog_connections_accepted_total": "counter",
    "unclog_connections_refused_total": "counter",
    "unclog_jobs_submitted_total": "counter",
    "unclog_jobs_completed_total": "counter",
    "unclog_jobs_cancelled_total": "counter",
    "unclog_jobs_withdrawn_total": "counter",
    "unclog_job_cost_bytes_total": "counter",
    "unclog_job_queue_wait_seconds": "histogram",
    "unclog_job_run_seconds": "histogram",
    "unclog_buffer_memory_budget_bytes": "gauge",
    "unclog_buffer_memory_held_bytes": "gauge",
    "unclog_buffer_memory_peak_bytes": "gauge",
    "unclog_buffer_memory_waiters": "gauge",
    "unclog_buffer_memory_waits_total": "counter",
    "unclog_setting_info": "gauge",
    "unclog_threads": "gauge",
    "unclog_partition_bytes": "gauge",
    "unclog_gzip_partition_bytes": "gauge",
    "unclog_scheduler_jobs_started_total": "counter",
    "unclog_scheduler_bulk_over_short_total": "counter",
    "unclog_scheduler_streak_breaks_total": "counter",
    "unclog_scheduler_short_max_bytes": "gauge",
    "unclog_scheduler_bulk_jobs_max": "gauge",
    "unclog_scheduler_bulk_jobs_running": "gauge",
    "unclog_scheduler_bulk_cpu_ratio": "gauge",
    "unclog_jobs_in_flight": "gauge",
    "unclog_job_queue_wait_max_seconds": "gauge",
    "unclog_job_run_max_seconds": "gauge",
    "unclog_http_small_response_max_bytes": "gauge",
    "unclog_admin_enabled": "gauge",
    "unclog_file_cache_enabled": "gauge",
    "unclog_file_cache_entries": "gauge",
    "unclog_file_cache_bytes": "gauge",
    "unclog_file_cache_hits_total": "counter",
    "unclog_file_cache_misses_total": "counter",
}

# ------------------------------------------------------------ parsing -----

META_RE = re.compile(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$")
SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)')


class Metrics:
    """One exposition: families {name: {"HELP": text, "TYPE": type}},
    samples {(name, ((label, value), ...) sorted): Decimal}, and what
    breaks the format's rules (problems)."""

    def __init__(self, text):
        self.text = text
        self.families, self.samples, self.problems = {}, {}, []
        current, done = None, set()
        for n, line in enumerate(text.split("\n"), 1):
            if line == "":
                continue
            m = META_RE.match(line)
            if m:
                kind, name, rest = m.groups()
                if name != current:
                    if name in done:
                        self.problems.append("line %d: family %s again" % (n, name))
                    done.add(current)
                    current = name
                fam = self.families.setdefault(name, {})
                if kind in fam:
                    self.problems.append("line %d: a second %s for %s" % (n, kind, name))
                fam[kind] = rest
                continue
            m = SAMPLE_RE.match(line)
            if not m:
                self.problems.append("line %d: not a sample: %r" % (n, line))
                continue
            name, labels, value = m.groups()
            fam = self.family_of(name)
            if fam != current:
                self.problems.append("line %d: %s outside its family's block" % (n, name))
            pairs = tuple(sorted(self.labels(labels or "", n)))
            key = (name, pairs)
            if key in self.samples:
                self.problems.append("line %d: duplicate series %s%s" % (n, name, pairs))
            self.samples[key] = Decimal("Infinity") if value == "+Inf" else Decimal(value)
        for name, fam in self.families.items():
            if set(fam) != {"HELP", "TYPE"} or not fam["HELP"].strip():
                self.problems.append("%s: HELP and TYPE, each once, are %r" % (name, fam))

    def labels(self, text, n):
        pos, out = 0, []
        while pos < len(text):
            m = LABEL_RE.match(text, pos)
            if not m:
                self.problems.append("line %d: bad labels %r" % (n, text))
                return out
            out.append((m.group(1), m.group(2)))
            pos = m.end()
        return out

    def family_of(self, name):
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.families.get(base, {}).get("TYPE") == "histogram":
                return base
        return name

    def get(self, name, **labels):
        """A sample's value (Decimal), or None."""
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def series(self, name):
        """{labels tuple: value} of every sample named NAME."""
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def total(self, name):
        return sum(self.series(name).values())

    def hist(self, name, **labels):
        """(bucket counts by le, _sum, _count) of one histogram series."""
        want = set(labels.items())
        buckets = {dict(k)["le"]: v for k, v in self.series(name + "_bucket").items()
                   if set(k) - {("le", dict(k)["le"])} == want}
        return buckets, self.get(name + "_sum", **labels), self.get(name + "_count", **labels)


def scrape(conn, method="GET"):
    resp = conn.roundtrip(method, "/metrics")
    if resp.status != 200:
        raise RuntimeError("GET /metrics answered %d: %r" % (resp.status, resp.body[:200]))
    return Metrics(resp.body.decode("utf-8")), resp


def check_format(m, when):
    ok(not m.problems, "%s: the exposition keeps the format's rules (%d families, %d samples)"
       % (when, len(m.families), len(m.samples)), *m.problems[:20])
    types = {name: m.families.get(name, {}).get("TYPE") for name in FAMILIES}
    is_(types, FAMILIES, "%s: every expected family, with its type" % when)
    bad = [n for n, f in m.families.items()
           if (f.get("TYPE") == "counter") != n.endswith("_total")]
    is_(bad, [], "%s: counters, and only counters, end in _total" % when)
    for name, fam in sorted(m.families.items()):
        if fam.get("TYPE") != "histogram":
            continue
        keys = {tuple(p for p in k if p[0] != "le") for k in m.series(name + "_bucket")}
        wrong = []
        for key in sorted(keys):
            labels = dict(key)
            buckets, total, count = m.hist(name, **labels)
            les = [le for le in LES if le in buckets]
            counts = [buckets[le] for le in LES if le in buckets]
            if les != LES or len(buckets) != len(LES):
                wrong.append("%s: le %s" % (labels, sorted(buckets)))
            elif any(a > b for a, b in zip(counts, counts[1:])):
                wrong.append("%s: not cumulative: %s" % (labels, counts))
            elif count is None or buckets["+Inf"] != count:
                wrong.append("%s: +Inf %s, _count %s" % (labels, buckets["+Inf"], count))
            elif total is None or total < 0:
                wrong.append("%s: _sum %s" % (labels, total))
        ok(keys and not wrong,
           "%s: %s: %d series, buckets at 2^0..2^26 us and +Inf, cumulative, +Inf == _count"
           % (when, name, len(keys)), *wrong[:10])


# -------------------------------------------------------------- tests -----


def test_counters(srv):
    """Known traffic on one connection, between two scrapes on one of the
    admin door."""
    with srv.conn() as conn, srv.admin_conn() as admin:
        m0, r0 = scrape(admin)
        is_(r0.header("Content-Type"), CONTENT_TYPE, "Content-Type: " + CONTENT_TYPE)
        is_(r0.header("Cache-Control"), "no-store", "Cache-Control: no-store")
        check_format(m0, "at start")
        sizes = [len(r0.body)]  # body bytes of every response counted by m1
        gets = 0
        for _ in range(3):
            for name, data in FILES.items():
                r = conn.roundtrip("GET", "/" + name)
                ok(r.status == 200 and r.body == data, "GET /%s" % name)
                sizes.append(len(r.body))
                gets += 1
        r = conn.roundtrip("HEAD", "/small.txt")
        is_((r.status, r.body), (200, b""), "HEAD /small.txt")
        r = conn.roundtrip("GET", "/missing.txt")
        is_(r.status, 404, "GET /missing.txt: 404")
        sizes.append(len(r.body))
        r = conn.roundtrip("POST", "/gzip", body=BODY)
        is_(r.status, 200, "POST /gzip of 200 KiB + 1")
        sizes.append(len(r.body))
        m1, _ = scrape(admin)
    check_format(m1, "after the work")

    def delta(name, **labels):
        return m1.get(name, **labels) - (m0.get(name, **labels) or 0)

    resp = {(route, code): delta("unclog_http_responses_total", route=route, code=code)
            for route in ROUTES for code in ("1xx", "2xx", "3xx", "4xx", "5xx")}
    want = {k: 0 for k in resp}
    want.update({("static", "2xx"): gets + 1, ("static", "4xx"): 1, ("/gzip", "2xx"): 1,
                 ("/metrics", "2xx"): 1})
    is_({k: v for k, v in resp.items() if v}, {k: v for k, v in want.items() if v},
        "responses_total grew by exactly the %d GETs and the HEAD (static 2xx), the 404, the "
        "POST /gzip and the first scrape; every other route and class by 0" % gets)
    is_(len(resp), len(m1.series("unclog_http_responses_total")),
        "responses_total has a series for every route x class, no other")
    is_(delta("unclog_http_response_body_bytes_total"), sum(sizes),
        "response_body_bytes_total grew by the body bytes received (%d)" % sum(sizes))
    small = delta("unclog_http_request_duration_seconds_count", size="small")
    large = delta("unclog_http_request_duration_seconds_count", size="large")
    # The scrape itself is an instrument: counted, but not timed.
    is_((small, large), (len(sizes) - 3, 3),
        "request_duration_seconds: the 3 GETs of 100 KiB are large, the other responses small,"
        " the scrape not timed")
    instruments = sum(v for labels, v in m1.series("unclog_http_responses_total").items()
                      if dict(labels)["route"] in ("/stats", "/stats/history", "/metrics",
                                                     "/settings", "/.unclog/dashboard"))
    is_(m1.total("unclog_http_request_duration_seconds_count"),
        m1.total("unclog_http_responses_total") - instruments,
        "request_duration_seconds _count (small + large) == responses_total less the instruments'")

    fits = [len(d) for d in FILES.values() if len(d) <= PARTITION]
    pumped = [len(d) for d in FILES.values() if len(d) > PARTITION]
    reads = 3 * sum(math.ceil(n / PARTITION) for n in pumped)
    for cls, n, cost in (("open", gets + 2, 3 * sum(fits)),
                         ("read", reads, 3 * sum(pumped)),
                         ("gzip", math.ceil(len(BODY) / GZIP_PARTITION), len(BODY))):
        names = ["unclog_jobs_submitted_total", "unclog_jobs_completed_total",
                 "unclog_jobs_cancelled_total", "unclog_job_cost_bytes_total"]
        want = [n, n, 0, cost]
        is_([delta(f, **{"class": cls}) for f in names], want, "%s{class=%s} grew by %s"
            % (", ".join(f[len("unclog_"):] for f in names), cls, want))
    for cls in CLASSES:
        completed = m1.get("unclog_jobs_completed_total", **{"class": cls})
        counts = (m1.get("unclog_job_queue_wait_seconds_count", **{"class": cls}),
                  m1.get("unclog_job_run_seconds_count", **{"class": cls}))
        is_(counts, (completed, completed),
            "job_queue_wait_seconds and job_run_seconds{class=%s}: _count == completed (%s)"
            % (cls, completed))
    started = m1.total("unclog_scheduler_jobs_started_total")
    is_(started, m1.total("unclog_jobs_completed_total"),
        "scheduler_jobs_started_total (short + bulk) == jobs completed, none in flight")
    is_((m1.get("unclog_connections_active"), delta("unclog_connections_accepted_total"),
         m1.total("unclog_connections_refused_total")), (2, 0, 0),
        "connections: 2 active (the work's and the scraper's), none accepted since, none refused")

    st = srv.stats()
    for cls in CLASSES:
        j = st["jobs"][cls]
        is_(m1.get("unclog_job_cost_bytes_total", **{"class": cls}), j["cost_bytes"],
            "job_cost_bytes_total{class=%s} is /stats' cost_bytes" % cls)
        sums = (m1.get("unclog_job_queue_wait_seconds_sum", **{"class": cls}) * 10 ** 6,
                m1.get("unclog_job_run_seconds_sum", **{"class": cls}) * 10 ** 6)
        is_(sums, (j["queued_us_total"], j["running_us_total"]),
            "job histograms{class=%s}: _sum in seconds is /stats' queued_us_total and "
            "running_us_total" % cls)
    mem = st["memory"]
    is_(tuple(m1.get("unclog_buffer_memory_" + k) for k in ("budget_bytes", "peak_bytes",
                                                               "waits_total")),
        (mem["budget"], mem["peak"], mem["waits"]), "buffer_memory: budget, peak, waits as /stats")
    is_(m1.get("unclog_buffer_memory_held_bytes"), 0, "buffer_memory_held_bytes: 0 at rest")
    is_(m1.get("unclog_build_info", version=st["version"]), 1,
        "build_info{version=\"%s\"} 1" % st["version"])
    settings = {dict(k)["key"]: dict(k)["value"] for k in m1.series("unclog_setting_info")}
    is_(settings, {"partition": "4k", "gzip_partition": "64k", "scheduler": "fair",
                   "emulate_disk": "off", "gzip_files": "on", "gzip_static": "on",
                   "file_cache": "off"}, "setting_info: every live key, as configured")
    is_((m1.get("unclog_file_cache_enabled"), m1.get("unclog_file_cache_hits_total")), (0, 0),
        "file_cache off: file_cache_enabled 0, no hit")
    is_((m1.get("unclog_threads"), m1.get("unclog_partition_bytes"),
         m1.get("unclog_gzip_partition_bytes")), (3, PARTITION, GZIP_PARTITION),
        "threads 3, partition_bytes 4096, gzip_partition_bytes 65536")
    return m1


def test_head_and_methods(srv):
    with srv.admin_conn() as conn:
        get = conn.roundtrip("GET", "/metrics")
        head = conn.roundtrip("HEAD", "/metrics")
    is_(head.status, 200, "HEAD /metrics: 200")
    ignore = ("date", "content-length")  # the counters differ between two answers
    is_(comparable_headers(head, ignore), comparable_headers(get, ignore),
        "HEAD /metrics: the headers of GET /metrics")
    raw = b"HEAD /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    resp, rest = split_response(*exchange(srv.admin_port, raw))
    ok(resp.status == 200 and int(resp.header("Content-Length", "0")) > 0 and rest == b"",
       "HEAD /metrics: a Content-Length, and not a byte after the head",
       repr(resp.headers), repr(rest[:200]))
    for method in ("POST", "PUT"):
        r = srv.request(method, "/metrics", body=b"x")
        is_((r.status, r.header("Allow")), (405, "GET, HEAD"),
            "%s /metrics: 405 with Allow: GET, HEAD" % method)


def test_seconds():
    """emulate_disk = 50ms: every read runs at least 50 ms, so no read is
    counted in a bucket below 0.05 s, and the GET of 4 pieces takes 200 ms."""
    args = ["--sendfile", "off", "--loop-reads", "off", "--emulate-disk", "50ms", "--partition", "4k", "--file-cache", "off",
            "--gzip-partition", "whole"]
    with Server(files={"f.bin": random_bytes(16 * KiB, 3)}, args=args,
                name="emulate_disk server") as srv:
        with srv.conn() as conn, srv.admin_conn() as admin:
            is_(conn.roundtrip("GET", "/f.bin").status, 200, "emulate_disk 50ms: GET of 4 pieces")
            m, _ = scrape(admin)
        check_format(m, "emulate_disk")
        buckets, total, count = m.hist("unclog_job_run_seconds", **{"class": "read"})
        is_(count, 4, "job_run_seconds{class=read}: 4 reads")
        is_({le: n for le, n in buckets.items() if le != "+Inf" and Decimal(le) < Decimal("0.05")
             and n}, {}, "no read in a bucket below 0.05 s (le=%s is 0)" % LES[15])
        ok(total >= Decimal("0.2"), "their _sum is at least 0.2 s: %s" % total)
        buckets, total, count = m.hist("unclog_http_request_duration_seconds", size="small")
        is_((count, buckets["0.131072"]), (1, 0),
            "request_duration_seconds{size=small}: the GET, not below 0.131072 s")
        ok(total >= Decimal("0.2"), "its _sum is at least 0.2 s: %s" % total)
        is_(m.get("unclog_setting_info", key="emulate_disk", value="50ms"), 1,
            "setting_info{key=emulate_disk,value=50ms} 1")
        is_((m.get("unclog_setting_info", key="gzip_partition", value="whole"),
             m.get("unclog_gzip_partition_bytes")), (1, 0),
            "gzip_partition whole: setting_info value=whole, gzip_partition_bytes 0")
        is_((m.get("unclog_setting_info", key="partition", value="4k"),
             m.get("unclog_partition_bytes")), (1, 4096), "partition 4k: 4096 bytes")


def test_prometheus(srv):
    """A real Prometheus scrapes the server every second, on loopback."""
    if not Prometheus.installed("a real Prometheus scrapes /metrics"):
        return
    with Prometheus(srv.admin_port, "1s") as prom:
        def scraped():
            up = prom.query('up{job="unclog"}')
            return up and up[0]["value"][1] == "1" and up

        up = poll(scraped, timeout=20, interval=0.25)
        ok(up, "Prometheus scraped /metrics: up{job=\"unclog\"} is 1", repr(up))
        if up:
            info = prom.query("unclog_build_info")
            ok(info and info[0]["metric"].get("version") and info[0]["value"][1] == "1",
               "Prometheus has unclog_build_info{version=...} 1", repr(info))
            # The top clients' rows come and go with the clients of the last
            # two seconds (the admin door's connections are nobody's): once
            # the test's own traffic is over, a scrape's count holds still.
            def agree():
                n = prom.query('scrape_samples_scraped{job="unclog"}')
                want = len(Metrics(srv.get("/metrics").body.decode()).samples)
                return (n and int(n[0]["value"][1])) == want and want
            want = poll(agree, timeout=20, interval=0.5)
            ok(want, "Prometheus took every sample of a scrape (%s)" % want)


def main():
    args = ["--loop-reads", "off", "--threads", "3", "--partition", "4k", "--gzip-partition", "64k", "--file-cache",
            "off"]
    with Server(files=FILES, args=args) as srv:
        m = test_counters(srv)
        promtool_check(m.text, "promtool check metrics")
        test_head_and_methods(srv)
        test_prometheus(srv)
    test_seconds()


run(main)
