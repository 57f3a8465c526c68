#!/usr/bin/env python3
# workers = 2: /stats and /metrics answer for the whole server from either
# worker. Known traffic, half on a connection each worker holds, adds up
# exactly in both outputs whichever worker answers, and at once: the
# answering worker has the other publish first; the top client's
# connections over both workers are counted once; a SIGKILLed worker's
# replacement carries its predecessor's totals, so no counter of /metrics
# ever goes back between two scrapes; promtool accepts the exposition; and a
# real Prometheus scraping while a worker is killed sees no reset of any
# total (when installed).
import json
import os
import re
import signal
import time
from decimal import Decimal

from harness import SLOW, Prometheus, Server, is_, note, ok, poll, promtool_check, run

BODY = b"twelve bytes"
SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def metrics(srv):
    """{series: Decimal} of one GET /metrics on a new connection, with its text."""
    resp = srv.get("/metrics")
    if resp.status != 200:
        raise RuntimeError("GET /metrics answered %d" % resp.status)
    text = resp.body.decode()
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            name, labels, value = SAMPLE_RE.match(line).groups()
            samples[name + (labels or "")] = Decimal(value)
    return types, samples, text


def totals(types, samples):
    """The series that may never go back: counters, and histograms' parts."""
    out = {}
    for series, v in samples.items():
        name = series.split("{")[0]
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if types.get(name) == "counter" or types.get(base) == "histogram":
            out[series] = v
    return out


def figures(st):
    return {"static_2xx": st["responses"]["static"]["2xx"], "requests": st["requests"],
            "accepted": st["connections"]["accepted"],
            "by_worker": sum(w["requests"] for w in st["by_worker"].values())}


def both_answer(srv, pred, pause=0, tries=400):
    """/stats over new connections (PAUSE seconds apart) until each worker
    answered with PRED true; returns {worker: stats}, or None after TRIES."""
    seen = {}
    for _ in range(tries):
        time.sleep(pause)
        st = srv.stats()
        if pred(st):
            seen[st["worker"]] = st
        if set(seen) == {1, 2}:
            return seen
    return None


def conns_on_both(srv):
    """{worker: a keep-alive connection it serves} for workers 1 and 2 (a
    /stats on each new connection says who holds it), or None."""
    held = {}
    for _ in range(400):
        c = srv.conn()
        w = json.loads(c.roundtrip("GET", "/stats").body)["worker"]
        if w in held:
            c.close()
        else:
            held[w] = c
        if len(held) == 2:
            return held
    for c in held.values():
        c.close()
    return None


def test_adds_up(srv, n):
    small = 'unclog_http_request_duration_seconds_count{size="small"}'
    held = conns_on_both(srv)
    ok(held, "a connection held by each worker")
    if not held:
        return
    base_count = metrics(srv)[1][small]
    base = srv.stats()
    before = figures(base)
    statuses = []
    for w in (1, 2):
        statuses += [held[w].roundtrip("GET", "/f.txt").status for _ in range(n // 2)]
        held[w].close()
    is_(statuses, [200] * n, "%d file GETs, half on each worker's connection" % n)
    want = before["static_2xx"] + n
    seen = both_answer(srv, lambda st: st["responses"]["static"]["2xx"] == want)
    ok(seen, "both workers answer /stats with the static 2xx count of both (%d)" % want)
    if not seen:
        return
    moved = [seen[1]["by_worker"][w]["requests"] - base["by_worker"][w]["requests"]
             for w in ("1", "2")]
    ok(all(m >= n // 2 for m in moved), "each worker counts its half (and the /stats it answered)",
       "per worker %r" % moved)
    for w, st in sorted(seen.items()):
        f = figures(st)
        is_(f["requests"], f["by_worker"],
            "worker %d: requests is the sum of the per-worker counts" % w)
        is_(st["workers"], 2, "worker %d: workers = 2" % w)
    types, samples, _ = metrics(srv)
    is_(samples.get('unclog_http_responses_total{route="static",code="2xx"}'), want,
        "/metrics: the static 2xx total of both workers")
    is_(samples[small] - base_count, n,
        "/metrics: the merged duration histogram counts each file response once")
    for w in ("1", "2"):
        label = '{worker="%s"}' % w
        ok(samples.get("unclog_worker_up" + label) == 1
           and samples.get("unclog_worker_requests_total" + label, -1)
           >= seen[1]["by_worker"][w]["requests"] and types["unclog_worker_requests_total"]
           == "counter", "/metrics: worker %s's own series (up, its requests as a counter)" % w)
    buckets = [v for k, v in samples.items()
               if k.startswith('unclog_http_request_duration_seconds_bucket{size="small"')]
    ok(buckets == sorted(buckets) and buckets[-1] == samples[small],
       "its merged buckets are cumulative up to its count")


def test_exact_at_once(srv, n):
    """N GETs, half on each worker's connection, then /stats at once from
    either: both count exactly N more (and the /stats the test asked),
    with no wait for the next periodic publication."""
    held = conns_on_both(srv)
    ok(held, "a connection held by each worker")
    if not held:
        return
    ask = lambda w: json.loads(held[w].roundtrip("GET", "/stats").body)
    before = figures(ask(1))
    statuses = []
    for w in (1, 2):
        statuses += [held[w].roundtrip("GET", "/f.txt").status for _ in range(n // 2)]
    is_(statuses, [200] * n, "%d file GETs, half on each worker's connection" % n)
    # Worker 2 served the last of them just now: worker 1 must ask for them.
    for asked, (w, want) in enumerate(((1, 1), (2, 2))):
        f = figures(ask(w))
        is_(f["static_2xx"] - before["static_2xx"], n,
            "worker %d at once: the static 2xx of both workers, exactly %d more" % (w, n))
        is_(f["requests"] - before["requests"], n + want,
            "worker %d at once: requests exactly %d more (and the /stats asked)" % (w, n))
        is_(f["by_worker"], f["requests"], "worker %d: the per-worker counts add up" % w)
    for c in held.values():
        c.close()


def test_top_clients(srv, k):
    """K idle keep-alive connections spread over both workers: the top client
    (this host) holds them all, and every connection is counted once."""
    conns = [srv.conn() for _ in range(k)]
    for c in conns:
        c.roundtrip("GET", "/f.txt")
    # Asked on a connection each worker holds, not on new ones: on a busy
    # machine the kernel may hand every new connection to one worker for a
    # while. Both askers count, the one asking active and the other idle.
    askers = conns_on_both(srv) or {}
    want = k + 2

    def all_held(st):
        top = st["connections"]["top_clients"].get("1", {})
        return (st["connections"]["active"] == want and top.get("client") == "127.0.0.1"
                and top.get("connections") == want)

    # The other worker's gauges are those of its last publication: at most
    # WHOLE_PUBLISH_MS (250 ms) old. Each asked 300 ms after the other, so
    # the other's publication shows its asker idle again, and a connection
    # closed before as gone.
    seen = {}
    for _ in range(int(40 * SLOW) if askers else 0):
        for w, c in askers.items():
            time.sleep(0.3)
            st = json.loads(c.roundtrip("GET", "/stats").body)
            if all_held(st):
                seen[w] = st
        if len(seen) == 2:
            break
    ok(len(seen) == 2, "both workers: active = top client's connections = %d (the idle ones "
       "and one asking on each worker, over both workers)" % want)
    if len(seen) == 2:
        is_([s["connections"]["top_clients"]["1"]["idle"] for s in seen.values()],
            [k + 1, k + 1], "  with its %d idle ones and the other worker's asker" % k)
    for c in conns + list(askers.values()):
        c.close()


def scrape_all(srv, seen, problems, when):
    """One /metrics; every total in it at least as large as in the last one."""
    types, samples, _ = metrics(srv)
    for series, v in totals(types, samples).items():
        if series in seen and v < seen[series]:
            problems.append("%s: %s went back from %s to %s" % (when, series, seen[series], v))
        seen[series] = v
    return samples


def test_restart(srv):
    seen, problems = {}, []
    for _ in range(10):
        scrape_all(srv, seen, problems, "before")
    st = both_answer(srv, lambda st: True)
    victim = st[1]["by_worker"]["1"]["pid"]
    want = figures(st[1])["static_2xx"]
    os.kill(victim, signal.SIGKILL)
    for _ in range(30):
        scrape_all(srv, seen, problems, "after the kill")
        srv.get("/f.txt")
        want += 1

    def replaced():
        s = srv.stats()
        w1 = s["by_worker"]["1"]
        return s["workers"] == 2 and w1["up"] and w1["pid"] != victim and s

    ok(poll(replaced), "worker 1 is replaced (a new pid, up)")
    for _ in range(20):
        scrape_all(srv, seen, problems, "after the restart")
    ok(not problems, "no total of /metrics went back across the kill and restart (%d series)"
       % len(seen), *problems[:5])
    again = both_answer(srv, lambda s: s["responses"]["static"]["2xx"] == want)
    ok(again, "both workers still count every static 2xx, the dead worker's included (%d)" % want)
    if again:
        f = figures(again[2])
        is_(f["requests"], f["by_worker"], "the per-worker counts still add up to requests")


def test_prometheus(srv):
    """A real Prometheus scrapes every 200 ms while worker 2 is killed."""
    if not Prometheus.installed("a real Prometheus sees no reset across a kill"):
        return
    with Prometheus(srv.admin_port, "200ms") as prom:
        def scrapes():
            r = prom.query('count_over_time(up{job="unclog"}[5m])')
            return int(r[0]["value"][1]) if r else 0

        ok(poll(lambda: scrapes() >= 5, timeout=30, interval=0.2),
           "Prometheus scraped /metrics 5 times")
        victim = srv.stats()["by_worker"]["2"]["pid"]
        for _ in range(20):
            srv.get("/f.txt")
        os.kill(victim, signal.SIGKILL)
        start = scrapes()
        for _ in range(20):
            srv.get("/f.txt")
        ok(poll(lambda: scrapes() >= start + 10, timeout=30, interval=0.2),
           "10 scrapes more after the kill")
        names = prom.api("label/__name__/values") or []
        totals = [n for n in names if re.match(r"unclog_.+(_total|_count|_sum|_bucket)$", n)]
        reset = {}
        for name in totals:
            r = prom.query('sum(resets(%s{job="unclog"}[5m]))' % name)
            reset[name] = r[0]["value"][1] if r else None
        bad = {k: v for k, v in reset.items() if v != "0"}
        ok(len(totals) > 20 and not bad,
           "Prometheus: resets() over the kill is 0 for each of %d totals" % len(totals),
           repr(bad))
        r = prom.query('min_over_time(unclog_workers{job="unclog"}[5m])')
        note("workers at least %r in Prometheus' window" % (r and r[0]["value"][1]))


def main():
    # stats_from lets a connection of the public listener ask /stats of the
    # worker that holds it, between its GETs.
    args = ["--workers", "2", "--threads", "2", "--stats-from", "127.0.0.1", "--stats-detail",
            "full"]
    with Server(files={"f.txt": BODY}, args=args,
                name="two-worker server") as srv:
        ok(poll(lambda: srv.stats().get("workers") == 2), "/stats says workers = 2")
        test_adds_up(srv, 60)
        test_exact_at_once(srv, 200)
        test_top_clients(srv, 12)
        promtool_check(metrics(srv)[2], "promtool check metrics with workers = 2")
        test_restart(srv)
        test_prometheus(srv)


run(main)
