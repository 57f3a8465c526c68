#!/usr/bin/env python3
# GET /stats: JSON with the effective settings, connection and request
# counters and per-job-class threadpool counters. With the file cache off,
# known traffic moves every counter by exactly what it costs: a GET one open
# (which reads a file that fits the partition) and else one read job per
# partition, a HEAD or a 404 one open, a gzip slice one gzip job. HEAD /stats is routed like GET: the same head, no body; other
# methods get 405 with Allow: GET, HEAD.
import json
import math

from harness import (KiB, Server, comparable_headers, exchange, gunzip, is_, ok, random_bytes, run,
                     split_response, text_bytes)

CLASSES = ("open", "read", "gzip")
COUNTERS = ("submitted", "completed", "cancelled", "withdrawn", "in_flight", "queued_us_total",
            "queued_us_max", "running_us_total", "running_us_max")
PARTITION = 4 * KiB
GZIP_PARTITION = 64 * KiB
FILES = {"small.txt": b"small", "mid.bin": random_bytes(100 * KiB, 21), "z.txt": b"zz",
         "text.txt": text_bytes(30 * KiB + 1)}
BODY = text_bytes(200 * KiB + 1)  # compressible: deflate needs no extra job to finish


def is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_shape(st, when):
    conns = st.get("connections", {})
    ok(is_count(conns.get("active")) and is_count(conns.get("accepted")),
       "%s: connections.active and .accepted are counts" % when, repr(conns))
    ok(is_count(st.get("requests")), "%s: requests is a count" % when, repr(st.get("requests")))
    jobs = st.get("jobs", {})
    for cls in CLASSES:
        c = jobs.get(cls)
        if not ok(isinstance(c, dict) and all(is_count(c.get(k)) for k in COUNTERS),
                  "%s: jobs.%s has every counter" % (when, cls), repr(c)):
            continue
        ok(c["completed"] + c["cancelled"] + c["withdrawn"] <= c["submitted"],
           "%s: jobs.%s completed + cancelled + withdrawn <= submitted" % (when, cls), repr(c))
        ok(c["queued_us_max"] <= c["queued_us_total"] and
           c["running_us_max"] <= c["running_us_total"],
           "%s: jobs.%s each max <= its total" % (when, cls), repr(c))


def test_settings(srv):
    resp = srv.get("/stats")
    is_(resp.status, 200, "GET /stats: 200")
    is_(resp.media_type, "application/json", "GET /stats: application/json")
    try:
        st = json.loads(resp.body)
    except ValueError as e:
        ok(False, "GET /stats: valid JSON", "%s; body %r" % (e, resp.body[:500]))
        return
    ok(isinstance(st, dict), "GET /stats: a JSON object")
    is_(st.get("threads"), 3, "threads is 3")
    is_(st.get("partition"), PARTITION, "partition 4k is 4096")
    is_(st.get("gzip_partition"), GZIP_PARTITION, "gzip_partition 64k is 65536")
    is_(st.get("file_cache", {}).get("enabled"), False, "file_cache.enabled is false")
    check_shape(st, "at start")
    ok(st.get("connections", {}).get("active", 0) >= 1, "at start: active counts this request")


def test_counters(srv):
    """Known traffic on one connection, and the exact growth of each counter."""
    st0 = srv.stats()
    rounds, reads, requests = 3, 0, 0
    with srv.conn() as conn:
        for _ in range(rounds):
            for name, data in FILES.items():
                is_(conn.roundtrip("GET", "/" + name).body, data, "GET /%s" % name)
                if len(data) > PARTITION:  # else its open read it
                    reads += math.ceil(len(data) / PARTITION)
                requests += 1
        is_(conn.roundtrip("HEAD", "/small.txt").status, 200, "HEAD /small.txt")
        is_(conn.roundtrip("GET", "/missing.txt").status, 404, "GET /missing.txt")
        gz = conn.roundtrip("GET", "/text.txt", headers={"Accept-Encoding": "gzip"})
        ok(gunzip(gz.body) == FILES["text.txt"], "GET /text.txt gzip-encoded")
        resp = conn.roundtrip("POST", "/gzip", body=BODY)
        ok(gunzip(resp.body) == BODY, "POST /gzip of 200 KiB + 1")
        requests += 4
    st1 = srv.stats()
    check_shape(st1, "after the work")

    opens = rounds * len(FILES) + 3  # every GET, the HEAD, the 404, the gzip-encoded GET
    gzips = math.ceil(len(FILES["text.txt"]) / PARTITION) + math.ceil(len(BODY) / GZIP_PARTITION)
    for cls, n, what in (
            ("open", opens, "%d file requests" % opens),
            ("read", reads, "%d GETs, one per 4k partition of the files over 4k (the HEAD, 404 "
             "and gzip read none)" % (rounds * len(FILES))),
            ("gzip", gzips, "8 slices of a 30 KiB file at partition 4k, 4 of a 200 KiB body at"
             " gzip_partition 64k")):
        before, after = st0["jobs"][cls], st1["jobs"][cls]
        delta = {k: after[k] - before[k] for k in ("submitted", "completed", "cancelled")}
        is_(delta, {"submitted": n, "completed": n, "cancelled": 0},
            "jobs.%s grew by exactly %d: %s" % (cls, n, what))
        is_(after["in_flight"], 0, "jobs.%s: none in flight" % cls)
    # A request counts once its answer is sent: the one that read st0 does too.
    is_(st1["requests"] - st0["requests"], requests + 1,
        "requests grew by the %d sent and the /stats before them" % requests)
    is_(st1["connections"]["accepted"] - st0["connections"]["accepted"], 2,
        "accepted grew by 2: the work's connection and this /stats one")
    is_(st1["file_cache"]["hits"], 0, "no file-cache hit with the cache off")


def test_head_and_methods(srv):
    get, head = srv.get("/stats"), srv.head("/stats")
    is_(head.status, 200, "HEAD /stats: 200, as routed (GET and HEAD)")
    ignore = ("date", "content-length")  # the counters differ between two answers
    is_(comparable_headers(head, ignore), comparable_headers(get, ignore),
        "HEAD /stats: the headers of GET /stats")
    ok(head.header("Content-Length", "").isdigit() and int(head.header("Content-Length")) > 0,
       "HEAD /stats: the Content-Length of the JSON it leaves out", repr(head.headers))
    raw = b"HEAD /stats HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    resp, rest = split_response(*exchange(srv.admin_port, raw))
    is_((resp.status, rest), (200, b""), "HEAD /stats: not a byte after the head")
    with srv.admin_conn() as conn:
        conn.roundtrip("HEAD", "/stats")
        ok(json.loads(conn.roundtrip("GET", "/stats").body)["requests"] > 0,
           "a GET after a HEAD on one connection reads the JSON")
    for method in ("POST", "PUT", "DELETE"):
        resp = srv.request(method, "/stats")
        is_((resp.status, resp.header("Allow")), (405, "GET, HEAD"),
            "%s /stats: 405 with Allow: GET, HEAD" % method)


def main():
    with Server(files=FILES, args=["--loop-reads", "off", "--threads", "3", "--partition", "4k", "--gzip-partition",
                                   "64k", "--file-cache", "off"]) as srv:
        test_settings(srv)
        test_counters(srv)
        test_head_and_methods(srv)
    with Server(files=FILES, args=["--loop-reads", "off", "--partition", "whole", "--gzip-partition", "whole"],
                name="whole server") as srv:
        st = srv.stats()
        is_((st.get("partition"), st["settings"]["partition"]), (0, "whole"),
            "--partition whole: 0 bytes (one type per key), \"whole\" in settings")
        is_((st.get("gzip_partition"), st["settings"]["gzip_partition"]), (0, "whole"),
            "--gzip-partition whole: the same")
        check_shape(st, "whole")


run(main)
