#!/usr/bin/env python3
# GET /stats: JSON with the effective settings, connection and request
# counters and per-job-class threadpool counters that grow with the work.
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import KiB, Server, gunzip, is_, ok, random_bytes, run  # noqa: E402

CLASSES = ("open", "read", "gzip")
COUNTERS = ("submitted", "completed", "cancelled", "in_flight", "queued_us_total",
            "queued_us_max", "running_us_total", "running_us_max")
FILES = {"small.txt": b"small", "mid.bin": random_bytes(100 * KiB, 21), "z.txt": b"zz"}


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
        ok(isinstance(c, dict) and all(is_count(c.get(k)) for k in COUNTERS),
           "%s: jobs.%s has every counter" % (when, cls), repr(c))
        if not isinstance(c, dict) or not all(is_count(c.get(k)) for k in COUNTERS):
            continue
        ok(c["completed"] <= c["submitted"], "%s: jobs.%s completed <= submitted" % (when, cls),
           repr(c))
        ok(c["queued_us_max"] <= c["queued_us_total"] and
           c["running_us_max"] <= c["running_us_total"],
           "%s: jobs.%s each max <= its total" % (when, cls), repr(c))


def test_counters(srv):
    resp = srv.get("/stats")
    is_(resp.status, 200, "GET /stats: 200")
    is_(resp.media_type, "application/json", "GET /stats: application/json")
    try:
        st0 = json.loads(resp.body)
    except ValueError as e:
        ok(False, "GET /stats: valid JSON", "%s; body %r" % (e, resp.body[:500]))
        return
    ok(isinstance(st0, dict), "GET /stats: a JSON object")
    is_(st0.get("threads"), 3, "threads is 3")
    is_(st0.get("partition"), 4096, "partition 4k is 4096")
    is_(st0.get("gzip_partition"), 65536, "gzip_partition 64k is 65536")
    check_shape(st0, "at start")
    ok(st0.get("connections", {}).get("active", 0) >= 1, "at start: active counts this request")

    nfiles = 0
    with srv.conn() as conn:
        for _ in range(3):
            for name, data in FILES.items():
                resp = conn.roundtrip("GET", "/" + name)
                ok(resp.body == data, "GET /%s" % name)
                nfiles += 1
        resp = conn.roundtrip("POST", "/gzip", body=FILES["mid.bin"])
        ok(gunzip(resp.body) == FILES["mid.bin"], "POST /gzip of 100 KiB")
    st1 = srv.stats()
    check_shape(st1, "after the work")

    def delta(cls, key):
        return st1["jobs"][cls][key] - st0["jobs"][cls][key]

    ok(delta("open", "submitted") >= 1 and delta("open", "completed") >= 1,
       "open jobs grew after %d GETs" % nfiles, repr(st1["jobs"]["open"]))
    ok(delta("read", "completed") >= 3 * (100 * KiB // 4096),
       "read jobs grew by at least 3 x 25 (3 x 100 KiB at 4k)", repr(st1["jobs"]["read"]))
    ok(delta("gzip", "submitted") >= 1 and delta("gzip", "completed") >= 1,
       "gzip jobs grew after POST /gzip", repr(st1["jobs"]["gzip"]))
    ok(st1["requests"] - st0["requests"] >= nfiles + 1,
       "requests grew by at least %d" % (nfiles + 1), "%r -> %r" % (st0["requests"],
                                                                   st1["requests"]))
    ok(st1["connections"]["accepted"] - st0["connections"]["accepted"] >= 2,
       "accepted connections grew", "%r -> %r" % (st0["connections"], st1["connections"]))
    ok(st1["jobs"]["read"]["running_us_total"] >= st0["jobs"]["read"]["running_us_total"],
       "read running time does not decrease")
    resp = srv.head("/stats")
    ok(resp.status in (200, 405), "HEAD /stats: 200 or 405", repr(resp))


def main():
    with Server(files=FILES, args=["--threads", "3", "--partition", "4k",
                                   "--gzip-partition", "64k"]) as srv:
        test_counters(srv)
    with Server(files=FILES, args=["--partition", "whole", "--gzip-partition", "whole"],
                name="whole server") as srv:
        st = srv.stats()
        is_(st.get("partition"), "whole", "--partition whole reports \"whole\"")
        is_(st.get("gzip_partition"), "whole", "--gzip-partition whole reports \"whole\"")
        check_shape(st, "whole")


run(main)
