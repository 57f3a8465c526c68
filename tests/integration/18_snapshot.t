#!/usr/bin/env python3
# One snapshot, two renderers: /stats and /metrics show the same figures.
# After known traffic (the file cache on and hit, a live setting changed, a
# gzip body, a 404), GET /stats then GET /metrics on one quiet connection.
# Every leaf of /stats has its /metrics counterpart by RULES below, or is in
# STATS_ONLY with the reason; every /metrics family is the counterpart of
# some leaf, or is in METRICS_ONLY with the reason. Their values agree: only
# the /stats answer itself moved between the two fetches (one request, a
# /stats 2xx, its body's bytes), and the uptime grew.
import json
import re
import shutil
import subprocess
from decimal import Decimal
from fnmatch import fnmatchcase

from harness import KiB, Server, is_, ok, poll, random_bytes, run, skip_test, text_bytes

FILES = {"small.txt": b"small", "mid.bin": random_bytes(100 * KiB, 18),
         "text.txt": text_bytes(30 * KiB + 1)}
BODY = text_bytes(100 * KiB + 1)
MS, US = Decimal(1000), Decimal(10 ** 6)


def num(metric, scale=1, **labels):
    return {"metric": metric, "labels": labels, "scale": Decimal(scale)}


def info(metric, text_label, **labels):
    """A string of /stats: the label TEXT_LABEL of a sample of 1."""
    return {"metric": metric, "labels": labels, "text": text_label}


def total(metric):
    """A count of /stats that /metrics leaves to a sum over every series."""
    return {"metric": metric, "labels": None, "scale": Decimal(1)}


# (/stats path, with * for one member: counterpart in /metrics, given the
# members * stood for).
RULES = [
    ("version", lambda: info("unclog_build_info", "version")),
    ("worker", lambda: num("unclog_worker")),
    ("threads", lambda: num("unclog_threads")),
    ("partition", lambda: num("unclog_partition_bytes")),
    ("partition_min", lambda: num("unclog_partition_min_bytes")),
    ("partition_max", lambda: num("unclog_partition_max_bytes")),
    ("gzip_partition", lambda: num("unclog_gzip_partition_bytes")),
    ("emulate_disk", lambda: info("unclog_setting_info", "value", key="emulate_disk")),
    ("admin", lambda: num("unclog_admin_enabled")),
    ("settings_changed_ms.*", lambda k: num("unclog_setting_changed_uptime_seconds", MS, key=k)),
    ("settings.*", lambda k: info("unclog_setting_info", "value", key=k)),
    ("bytes_sent", lambda: num("unclog_http_response_body_bytes_total")),
    ("buffered_bytes", lambda: num("unclog_streamed_buffered_bytes_total")),
    ("sendfile.bytes", lambda: num("unclog_sendfile_bytes_total")),
    ("sendfile.responses", lambda: num("unclog_sendfile_responses_total")),
    ("sendfile.pieces", lambda: num("unclog_sendfile_pieces_total")),
    ("sendfile.waits", lambda: num("unclog_sendfile_waits_total")),
    ("sendfile.waiting", lambda: num("unclog_sendfile_waiting")),
    ("sendfile.emulated", lambda: num("unclog_sendfile_emulated_total")),
    ("sendfile.truncated", lambda: num("unclog_sendfile_truncated_total")),
    ("latency.small_max_bytes", lambda: num("unclog_http_small_response_max_bytes")),
    ("uptime_ms", lambda: num("unclog_uptime_seconds", MS)),
    ("connections.active", lambda: num("unclog_connections_active")),
    ("connections.accepted", lambda: num("unclog_connections_accepted_total")),
    ("connections.refused", lambda: total("unclog_connections_refused_total")),
    ("connections.refused_by_reason.*",
     lambda r: num("unclog_connections_refused_total", reason=r)),
    ("connections.evicted", lambda: total("unclog_connections_evicted_total")),
    ("connections.evicted_by_reason.*",
     lambda r: num("unclog_connections_evicted_total", reason=r)),
    ("connections.by_class.*",
     lambda r: num("unclog_connections_by_class", **{"class": r})),
    ("connections.evicted_by_class.*",
     lambda r: num("unclog_connections_evicted_by_class_total", **{"class": r})),
    ("connections.top_clients.*.connections",
     lambda k: num("unclog_top_client_connections", rank=k)),
    ("connections.top_clients.*.idle",
     lambda k: num("unclog_top_client_idle_connections", rank=k)),
    ("connections.top_clients.*.addresses",
     lambda k: num("unclog_top_client_addresses", rank=k)),
    ("connections.top_window_ms", lambda: num("unclog_top_clients_window_seconds", MS)),
    ("connections.top_clients.*.pool_us",
     lambda k: num("unclog_top_client_pool_seconds", US, rank=k)),
    ("connections.top_clients.*.pool_permille",
     lambda k: num("unclog_top_client_pool_ratio", MS, rank=k)),
    ("connections.top_clients.*.bytes", lambda k: num("unclog_top_client_sent_bytes", rank=k)),
    ("connections.top_clients.*.memory_held",
     lambda k: num("unclog_top_client_memory_held_bytes", rank=k)),
    ("connections.top_clients.*.refused",
     lambda k: num("unclog_top_client_refused_connections", rank=k)),
    ("connections.top_clients.*.evicted",
     lambda k: num("unclog_top_client_evicted_connections", rank=k)),
    ("connections.max", lambda: num("unclog_connections_max")),
    ("connections.proxy_protocol.clients", lambda: num("unclog_proxy_headers_clients_total")),
    ("connections.proxy_protocol.local", lambda: num("unclog_proxy_headers_local_total")),
    ("connections.proxy_protocol.refused.*",
     lambda r: num("unclog_proxy_refused_total", reason=r)),
    ("memory.budget", lambda: num("unclog_buffer_memory_budget_bytes")),
    ("memory.held", lambda: num("unclog_buffer_memory_held_bytes")),
    ("memory.peak", lambda: num("unclog_buffer_memory_peak_bytes")),
    ("memory.kept", lambda: num("unclog_buffer_memory_kept_bytes")),
    ("zlib.streams", lambda: num("unclog_zlib_streams_total")),
    ("zlib.reused", lambda: num("unclog_zlib_states_reused_total")),
    ("zlib.allocs", lambda: num("unclog_zlib_state_allocs_total")),
    ("zlib.freed", lambda: num("unclog_zlib_states_freed_total")),
    ("zlib.idle", lambda: num("unclog_zlib_states_idle")),
    ("memory.waiting", lambda: num("unclog_buffer_memory_waiters")),
    ("memory.waits", lambda: num("unclog_buffer_memory_waits_total")),
    ("memory.waited_ms_total", lambda: num("unclog_buffer_memory_wait_seconds_total", MS)),
    ("memory.given_back", lambda: num("unclog_buffer_memory_given_back_total")),
    ("memory.given_back_bytes", lambda: num("unclog_buffer_memory_given_back_bytes_total")),
    ("memory.reread_bytes", lambda: num("unclog_buffer_memory_reread_bytes_total")),
    ("memory.fills_withdrawn", lambda: num("unclog_buffer_memory_fills_withdrawn_total")),
    ("send.turn_bytes", lambda: num("unclog_send_turn_bytes")),
    ("send.at_once", lambda: num("unclog_send_writes_at_once_total")),
    ("send.whole_at_once", lambda: num("unclog_send_whole_at_once_total")),
    ("send.deferred", lambda: num("unclog_send_writes_deferred_total")),
    ("send.contended", lambda: num("unclog_send_writes_contended_total")),
    ("send.turns", lambda: num("unclog_send_turns_total")),
    ("send.waiting_clients", lambda: num("unclog_send_waiting_clients")),
    ("send.waiting_clients_max", lambda: num("unclog_send_waiting_clients_max")),
    ("send.lag_max", lambda: num("unclog_send_lag_max_bytes")),
    ("loop_reads.on", lambda: num("unclog_loop_reads_on")),
    ("loop_reads.served", lambda: num("unclog_loop_reads_total")),
    ("loop_reads.bytes", lambda: num("unclog_loop_read_bytes_total")),
    ("loop_reads.opens_shared", lambda: num("unclog_loop_read_opens_shared_total")),
    ("loop_reads.bodies_shared", lambda: num("unclog_loop_read_bodies_shared_total")),
    ("loop_reads.fallbacks.*.count",
     lambda r: num("unclog_loop_read_fallbacks_total", reason=r)),
    ("turns.share_us", lambda: num("unclog_turn_share_seconds", US)),
    ("turns.at_once", lambda: num("unclog_turn_requests_at_once_total")),
    ("turns.deferred", lambda: num("unclog_turn_requests_deferred_total")),
    ("turns.turns", lambda: num("unclog_turn_turns_waited_total")),
    ("turns.waiting", lambda: num("unclog_turn_waiting_connections")),
    ("file_cache.enabled", lambda: num("unclog_file_cache_enabled")),
    ("file_cache.entries", lambda: num("unclog_file_cache_entries")),
    ("file_cache.bytes", lambda: num("unclog_file_cache_bytes")),
    ("file_cache.hits", lambda: num("unclog_file_cache_hits_total")),
    ("file_cache.misses", lambda: num("unclog_file_cache_misses_total")),
    ("requests", lambda: total("unclog_http_responses_total")),
    ("responses.*.*", lambda r, c: num("unclog_http_responses_total", route=r, code=c)),
    ("scheduler.mode", lambda: info("unclog_setting_info", "value", key="scheduler")),
    ("scheduler.short_max_bytes", lambda: num("unclog_scheduler_short_max_bytes")),
    ("scheduler.bulk_max", lambda: num("unclog_scheduler_bulk_jobs_max")),
    ("scheduler.bulk_cpu_permille", lambda: num("unclog_scheduler_bulk_cpu_ratio", MS)),
    ("scheduler.running", lambda: num("unclog_scheduler_jobs_running")),
    ("scheduler.running_bulk", lambda: num("unclog_scheduler_bulk_jobs_running")),
    ("scheduler.cpu_max", lambda: num("unclog_scheduler_cpu_jobs_max")),
    ("scheduler.running_cpu", lambda: num("unclog_scheduler_cpu_jobs_running")),
    ("scheduler.cpu_passed", lambda: num("unclog_scheduler_cpu_passed_total")),
    ("scheduler.waiting_short", lambda: num("unclog_scheduler_jobs_waiting", kind="short")),
    ("scheduler.waiting_bulk", lambda: num("unclog_scheduler_jobs_waiting", kind="bulk")),
    ("scheduler.short_started",
     lambda: num("unclog_scheduler_jobs_started_total", kind="short")),
    ("scheduler.bulk_started", lambda: num("unclog_scheduler_jobs_started_total", kind="bulk")),
    ("scheduler.bulk_over_short", lambda: num("unclog_scheduler_bulk_over_short_total")),
    ("scheduler.streak_breaks", lambda: num("unclog_scheduler_streak_breaks_total")),
    ("jobs.*.submitted", lambda c: num("unclog_jobs_submitted_total", **{"class": c})),
    ("jobs.*.completed", lambda c: num("unclog_jobs_completed_total", **{"class": c})),
    ("jobs.*.cancelled", lambda c: num("unclog_jobs_cancelled_total", **{"class": c})),
    ("jobs.*.withdrawn", lambda c: num("unclog_jobs_withdrawn_total", **{"class": c})),
    ("jobs.*.in_flight", lambda c: num("unclog_jobs_in_flight", **{"class": c})),
    ("jobs.*.cost_bytes", lambda c: num("unclog_job_cost_bytes_total", **{"class": c})),
    ("jobs.*.gave_way", lambda c: num("unclog_jobs_gave_way_total", **{"class": c})),
    ("jobs.*.queued_us_total",
     lambda c: num("unclog_job_queue_wait_seconds_sum", US, **{"class": c})),
    ("jobs.*.queued_us_max",
     lambda c: num("unclog_job_queue_wait_max_seconds", US, **{"class": c})),
    ("jobs.*.running_us_total", lambda c: num("unclog_job_run_seconds_sum", US, **{"class": c})),
    ("jobs.*.running_us_max", lambda c: num("unclog_job_run_max_seconds", US, **{"class": c})),
]

# The last second's figures: the window may move, and the /stats answer's
# own bytes count, between the two fetches. Their counterparts must exist;
# their values are not compared.
WINDOWED = ["connections.top_window_ms", "connections.top_clients.*.pool_us",
            "connections.top_clients.*.pool_permille", "connections.top_clients.*.bytes"]

# What /stats has and /metrics deliberately has not.
STATS_ONLY = [
    ("pid", "it names the process and measures nothing: Prometheus names its target by "
            "address, and unclog_worker tells workers apart"),
    ("latency.*.requests", "the recent window (about 1 s): Prometheus takes rates and "
                           "quantiles from unclog_http_request_duration_seconds"),
    ("latency.*.p50_us", "the recent window, as latency.*.requests"),
    ("latency.*.p99_us", "the recent window, as latency.*.requests"),
    ("latency.*.max_us", "the recent window, as latency.*.requests"),
    ("connections.top_clients.*.client",
     "a client's address: as a label, every address that ever reached the top would stay a "
     "series of its own; /metrics ranks the top clients without naming them"),
    ("jobs.*.recent.*", "the recent window: Prometheus takes rates and quantiles from "
                        "unclog_job_queue_wait_seconds and unclog_job_run_seconds"),
]

# /metrics families no /stats leaf stands for, and why.
METRICS_ONLY = {
    "unclog_http_request_duration_seconds": "the cumulative histogram of request latency; "
                                            "/stats shows its recent window (latency.small, "
                                            "latency.large)",
}

SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """({(name, sorted label pairs): Decimal}, {family: type})."""
    samples, families = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = kind
            continue
        m = SAMPLE_RE.match(line)
        if m:
            labels = tuple(sorted(LABEL_RE.findall(m.group(2) or "")))
            samples[(m.group(1), labels)] = Decimal(m.group(3).replace("+Inf", "Infinity"))
    return samples, families


def leaves(obj, path=()):
    """Every (path, value) of a JSON object's leaves."""
    for k, v in obj.items():
        if isinstance(v, dict):
            yield from leaves(v, path + (k,))
        else:
            yield path + (k,), v


def match(pattern, path):
    """The members * stood for when PATH matches PATTERN, else None."""
    parts = pattern.split(".")
    if len(parts) != len(path) or not all(fnmatchcase(p, q) for p, q in zip(path, parts)):
        return None
    return [p for p, q in zip(path, parts) if q == "*"]


def family_of(name, families):
    for suffix in ("_sum", "_count", "_bucket"):
        if name.endswith(suffix) and families.get(name[:-len(suffix)]) == "histogram":
            return name[:-len(suffix)]
    return name


def moved(path, stats_len):
    """How far a /stats counter moved before /metrics read it: the /stats answer
    itself counts as a request, a 2xx of its route, its body's bytes, a
    write the sender let go at once and an answer written whole, and the
    /metrics request as a request parsed at once."""
    if path in (("requests",), ("responses", "/stats", "2xx"), ("turns", "at_once"),
                ("send", "at_once"), ("send", "whole_at_once")):
        return 1
    return stats_len if path == ("bytes_sent",) else 0


def counterpart(path, value, samples, stats_len):
    """(the /metrics value found, the value /stats implies, the family) for
    one leaf, or None when no rule covers it."""
    for pattern, rule in RULES:
        args = match(pattern, path)
        if args is None:
            continue
        r = rule(*args)
        metric = r["metric"]
        if "text" in r:
            labels = tuple(sorted(dict(r["labels"], **{r["text"]: value}).items()))
            return samples.get((metric, labels)), Decimal(1), metric
        if r["labels"] is None:
            got = sum(v for (n, _), v in samples.items() if n == metric)
        else:
            got = samples.get((metric, tuple(sorted(r["labels"].items()))))
        if isinstance(value, str):  # a size setting spelled whole or auto
            value = 0
        want = (Decimal(int(value)) + moved(path, stats_len)) / r["scale"]
        return got, want, metric
    return None


def stats_only(path):
    return next((why for pattern, why in STATS_ONLY if match(pattern, path) is not None), None)


def traffic(srv):
    """Known work: cache fills and hits, a miss too big for it, a HEAD, a 404,
    a gzip body, a gzip-encoded file and a live setting changed."""
    with srv.conn() as conn:
        for _ in range(2):
            for name, data in FILES.items():
                is_(conn.roundtrip("GET", "/" + name).body, data, "GET /%s" % name)
        is_(conn.roundtrip("HEAD", "/small.txt").status, 200, "HEAD /small.txt")
        is_(conn.roundtrip("GET", "/missing.txt").status, 404, "GET /missing.txt")
        r = conn.roundtrip("GET", "/text.txt", headers={"Accept-Encoding": "gzip"})
        is_(r.status, 200, "GET /text.txt, gzip-encoded")
        is_(conn.roundtrip("POST", "/gzip", body=BODY).status, 200, "POST /gzip of 100 KiB + 1")
    with srv.admin_conn() as conn:
        r = conn.roundtrip("POST", "/settings", body=b"partition=64k",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
        is_(r.status, 200, "POST /settings partition=64k")


def quiet_pair(srv):
    """/stats then /metrics on one connection, once it is the only one open
    and no job is in flight: nothing but these two answers runs between."""
    with srv.admin_conn() as conn:
        def quiet():
            r = conn.roundtrip("GET", "/stats")
            st = json.loads(r.body)
            return (st["connections"]["active"] == 1 and
                    all(j["in_flight"] == 0 for j in st["jobs"].values()))
        ok(poll(quiet), "the server is quiet: one connection, no job in flight")
        st = conn.roundtrip("GET", "/stats")
        m = conn.roundtrip("GET", "/metrics")
    return st, m


def main():
    args = ["--loop-reads", "off", "--threads", "3", "--partition", "4k", "--file-cache", "on",
            "--admin", "on"]
    with Server(files=FILES, args=args) as srv:
        traffic(srv)
        st_resp, m_resp = quiet_pair(srv)
    is_((st_resp.status, m_resp.status), (200, 200), "GET /stats and GET /metrics: 200")
    st = json.loads(st_resp.body)
    samples, families = parse_metrics(m_resp.body.decode())
    ok(st["file_cache"]["hits"] > 0 and st["jobs"]["read"]["completed"] > 0 and
       "partition" in st["settings_changed_ms"],
       "the traffic shows: file-cache hits, reads, a setting changed", repr(st["file_cache"]))

    unmatched, wrong, used = [], [], set()
    for path, value in leaves(st):
        name = ".".join(path)
        found = counterpart(path, value, samples, len(st_resp.body))
        if found is None:
            if stats_only(path) is None:
                unmatched.append(name)
            continue
        got, want, metric = found
        used.add(metric)
        if any(match(p, path) is not None for p in WINDOWED):
            ok(got is not None, "%s: %s has its sample (the last second's, not compared)"
               % (name, metric))
        elif path == ("uptime_ms",):
            ok(got is not None and got >= want, "uptime_seconds (%s) >= /stats' uptime_ms (%s)"
               % (got, want))
        elif got != want:
            wrong.append("%s = %r: /metrics %s, expected %s" % (name, value, got, want))
    is_(unmatched, [], "every leaf of /stats has its /metrics counterpart (or is in STATS_ONLY)")
    is_(wrong, [], "and every counterpart has its value: only the /stats answer moved between")

    fams = {family_of(n, families) for (n, _) in samples} | set(families)
    alone = sorted(f for f in fams if family_of(f, families) not in
                   {family_of(u, families) for u in used} and f not in METRICS_ONLY)
    is_(alone, [], "every /metrics family stands for some /stats leaf (or is in METRICS_ONLY)")
    for pattern, why in STATS_ONLY:
        ok(any(match(pattern, p) is not None for p, _ in leaves(st)), "/stats only: %s (%s)" % (pattern, why))
    for fam, why in METRICS_ONLY.items():
        ok(fam in families, "/metrics only: %s (%s)" % (fam, why))
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_test("promtool check metrics", "promtool is not installed")
    else:
        p = subprocess.run([promtool, "check", "metrics"], input=m_resp.body,
                           capture_output=True, timeout=30)
        is_((p.returncode, (p.stdout + p.stderr).decode().strip()), (0, ""),
            "promtool check metrics: the file cache's and a changed setting's families pass")


run(main)
