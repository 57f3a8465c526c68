#!/usr/bin/env python3
# workers = 2, admin on: one control plane. A POST /settings is answered
# once both workers have applied it (200, both listed), and then every
# worker answers the new value in /settings and /stats, with the same
# changed_ms (the server's epoch is the master's start). A worker that does
# not apply in time is named (202, "pending"), and applies once it runs
# again. A SIGKILLed worker's replacement runs the live value, not the
# file's. SIGHUP with an edited file reaches both and moves the generation
# once, and a worker forked after it starts from the reloaded file. The
# dashboard's history is the server's: the replacement answers the samples
# taken before it started, and each change is marked once.
# Counters and values, not timings.
import json
import os
import signal

from harness import KiB, Conn, Server, is_, ok, poll, run

CONNECTIONS = 400
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def settings(srv, form=None):
    """GET, or POST FORM to, /settings on a new connection: (status, JSON)."""
    with srv.admin_conn() as c:
        if form is None:
            r = c.roundtrip("GET", "/settings")
        else:
            r = c.roundtrip("POST", "/settings", body=form.encode(), headers=FORM)
    return r.status, json.loads(r.body)


def survey(fetch, want=(1, 2)):
    """FETCH() (a dict with "worker") over new connections until every
    worker in WANT answered: {worker: its last answer}."""
    seen = {}
    for _ in range(CONNECTIONS):
        answer = fetch()
        seen[answer["worker"]] = answer
        if set(seen) >= set(want):
            break
    return seen


def by_worker(srv):
    """{worker: (partition, when it changed)} from /settings and /stats."""
    st = survey(lambda: settings(srv)[1])
    stats = survey(srv.stats)
    return ({w: (s["partition"], s["changed_ms"].get("partition")) for w, s in st.items()},
            {w: (s["partition"], s["settings_changed_ms"].get("partition"))
             for w, s in stats.items()})


def post_reaches_both(srv):
    status, s = settings(srv, "partition=4k")
    is_((status, s["partition"], s["applied"], s["pending"]), (200, "4k", [1, 2], []),
        "POST partition=4k is answered once both workers applied it")
    gen = s["generation"]
    st, stats = by_worker(srv)
    when = s["changed_ms"]["partition"]
    is_(st, {1: ("4k", when), 2: ("4k", when)},
        "each worker's /settings says 4k, changed at the same server uptime")
    is_(stats, {1: (4 * KiB, when), 2: (4 * KiB, when)},
        "each worker's /stats says 4096, with the same settings_changed_ms")
    return gen, when


def pending_worker(srv, gen):
    """A stopped worker cannot apply: the POST answers 202 naming it; once
    it runs again it applies the change by itself."""
    pids = survey(srv.stats)
    os.kill(pids[2]["pid"], signal.SIGSTOP)
    try:
        status, s = settings(srv, "gzip_partition=16k")
    finally:
        os.kill(pids[2]["pid"], signal.SIGCONT)
    is_((status, s["worker"], s["applied"], s["pending"], s["generation"]),
        (202, 1, [1], [2], gen + 1),
        "a worker that cannot apply in time: 202, it is named as pending")
    ok(poll(lambda: settings(srv)[1]["pending"] == []), "once it runs, it applies the change")
    st = survey(lambda: settings(srv)[1])
    is_({w: (s["gzip_partition"], s["generation"]) for w, s in st.items()},
        {1: ("16k", gen + 1), 2: ("16k", gen + 1)}, "both run it, at the same generation")
    return gen + 1


def replacement_adopts(srv, when):
    before = survey(srv.stats)[1]
    os.kill(before["pid"], signal.SIGKILL)
    ok(poll(lambda: survey(srv.stats).get(1, {}).get("pid") not in (None, before["pid"])),
       "the master forks a replacement for a SIGKILLed worker")
    st, stats = by_worker(srv)
    is_((st[1], stats[1]), (("4k", when), (4 * KiB, when)),
        "the replacement runs the live partition (4k), not the file's (auto)")
    after = survey(srv.stats)[1]
    history_survives(srv, when, before["uptime_ms"])
    ok(after["pid"] != before["pid"] and after["uptime_ms"] > before["uptime_ms"],
       "its uptime is the server's, counted from the master's start",
       "before %r, after %r" % ((before["pid"], before["uptime_ms"]),
                                (after["pid"], after["uptime_ms"])))


def history_of(srv):
    """(worker, its /stats/history) on one new connection."""
    with srv.admin_conn() as c:
        worker = json.loads(c.roundtrip("GET", "/stats").body)["worker"]
        return worker, json.loads(c.roundtrip("GET", "/stats/history").body)


def history_survives(srv, when, started_ms):
    """Worker 1 is a replacement that started at STARTED_MS (uptime)."""
    seen = survey(lambda: (lambda w, h: dict(h, worker=w))(*history_of(srv)))
    h = seen[1]
    is_([(m["key"], m["value"], m["t_ms"]) for m in h["markers"] if m["key"] == "partition"],
        [("partition", "4k", when)], "the history marks partition=4k once, at its change")
    ok(h["samples"]["t_ms"] and h["samples"]["t_ms"][0] < started_ms,
       "the replacement answers the samples taken before it started",
       "first sample %r, started %d" % (h["samples"]["t_ms"][:1], started_ms))
    is_(h["markers"], seen[2]["markers"], "both workers answer the same markers")


def reload_once(srv, gen):
    with open(srv.conf_path, "a") as f:
        f.write("partition = 16k\npartition_min = 32k\n")
    srv.send_signal(signal.SIGHUP)
    ok(poll(lambda: srv.stderr().count("reloaded the configuration") >= 2),
       "SIGHUP reaches both workers")
    st = survey(lambda: settings(srv)[1])
    is_({w: (s["partition"], s["generation"]) for w, s in st.items()},
        {1: ("16k", gen + 1), 2: ("16k", gen + 1)},
        "both run the file's 16k, and the generation moved once for two reloads")
    # partition_min is a reload key, not a live one: the control plane does
    # not carry it, the master's own reload does.
    victim = survey(srv.stats)[2]["pid"]
    os.kill(victim, signal.SIGKILL)
    ok(poll(lambda: survey(srv.stats).get(2, {}).get("pid") not in (None, victim)),
       "the master forks a replacement for worker 2")
    stats = survey(srv.stats)
    is_({w: (s["partition"], s["partition_min"]) for w, s in stats.items()},
        {1: (16 * KiB, 32 * KiB), 2: (16 * KiB, 32 * KiB)},
        "a worker forked after the reload starts from the reloaded file (partition_min 32k)")


def main():
    with Server(files={"x.txt": b"x"}, args=["--workers", "2", "--threads", "2", "--admin", "on"],
                name="two-worker server") as srv:
        # The first worker's startup line may come before the second runs.
        s = poll(lambda: (lambda s: s if s["applied"] == [1, 2] else None)(settings(srv)[1]))
        is_((s and s["partition"], s and s["pending"]), ("auto", []),
            "GET /settings with workers lists both workers as running its generation")
        gen, when = post_reaches_both(srv)
        gen = pending_worker(srv, gen)
        replacement_adopts(srv, when)
        reload_once(srv, gen)


run(main)
