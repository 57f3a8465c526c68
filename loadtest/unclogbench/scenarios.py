"""The scenarios: throughput (1), clogging warm (2) and cold (3), and make bench.

Each configuration gets a fresh server process; configurations are alternated
round after round, the order rotated by one each round (alternate()). The
runners return rows (dicts of CSV columns plus "config") and write the CSVs;
report.py turns them into tables.
"""

import dataclasses
import os
import re
import time

from . import log, report
from .load import (FLOOD, LOAD_CPU, finish_evictor, finish_probe, finish_wrk, prewarm,
                   start_evictor, start_probe, start_wrk)
from .plots import plot
from .procs import Processes, Warnings
from .servers import Config, peers, running, unclog

SWEEP = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m", "4m", "16m", "whole"]

# Each mode's settings. Durations in seconds; rates in requests per second.
# attack_*: scenario 4 (attacks.py): rounds, seconds of victim per phase, peers.
PARTS = ("throughput", "clog", "attacks")  # what --only can pick
MODES = {
    "quick": dict(partitions=["4k", "64k", "1m", "whole"], fair=["auto"], rounds=3, alone=2,
                  flood=3,
                  lead=1, throughput=2, throughput_rounds=1, cold=True, peers=False,
                  rate=200, attack_rounds=1, attack_victim=3, attack_peers=["nginx"],
                  only=list(PARTS)),
    # make loadtest SHORT=1: about a minute; the fifo pair that frames the
    # trade-off, the default beside it, one round, and the hog alone of scenario 4.
    "short": dict(partitions=["64k", "whole"], fair=["auto"], rounds=1, alone=2, flood=2,
                  lead=1, throughput=1, throughput_rounds=1, cold=False, peers=False,
                  rate=200, attack_rounds=1, attack_victim=2, attack_peers=[],
                  attacks=["hog"], only=list(PARTS)),
    "full": dict(partitions=SWEEP, fair=["auto", "64k", "1m", "whole"], rounds=3, alone=3,
                 flood=4, lead=1, throughput=2,
                 throughput_rounds=3, cold=True, peers=True, rate=200, attack_rounds=3,
                 attack_victim=5, attack_peers=["nginx", "lighttpd", "h2o"],
                 only=list(PARTS)),
    "bench": dict(rounds=3, bench=5),
}

# make bench: (title, path, metric, config A, config B); the ratio is A ÷ B. The
# workers row pins nothing: on CPU 0 a second worker has no core of its own.
CACHED = unclog("64k", cache=True, loop=True)  # fixed-size baseline; cache, loop reads on as by default
AUTO = unclog("auto", scheduler="fair")  # unclog's defaults, cache off, sendfile off
AUTO_SF = unclog("auto", scheduler="fair", sendfile=True)  # the same, sendfile auto
NGINX = Config("nginx", "sendfile")
BENCH = [
    ("1 KiB, wrk -c10, req/s (defaults: small-file cache on)", "/1k.bin", "req_s",
     CACHED, NGINX),
    ("1 KiB, wrk -c10, req/s: every read through the pool", "/1k.bin", "req_s",
     unclog("64k"), NGINX),
    ("1 KiB, wrk -c10, req/s: file cache off, reads on the loop (loop_reads, the default)",
     "/1k.bin", "req_s", unclog("64k", loop=True), NGINX),
    ("1 KiB, wrk -c10, req/s: file cache off, reads on the loop, vs h2o", "/1k.bin", "req_s",
     unclog("64k", loop=True), Config("h2o", "defaults")),
    ("16 MiB, wrk -c10, MB/s: whole vs sendfile", "/16m.bin", "mb_s", unclog("whole"), NGINX),
    ("16 MiB, wrk -c10, MB/s: 64k vs aio 2x64k", "/16m.bin", "mb_s",
     unclog("64k"), Config("nginx", "aio 2x64k")),
    ("16 MiB, wrk -c1, MB/s: one client alone, auto (fair) vs aio 1x16m", ("/16m.bin", 1),
     "mb_s", AUTO, Config("nginx", "aio 1x16m")),
    ("16 MiB, wrk -c10, MB/s: auto (fair) vs aio 1x16m", "/16m.bin", "mb_s", AUTO,
     Config("nginx", "aio 1x16m")),
    ("16 MiB, wrk -c10, MB/s: auto (fair) +sendfile vs aio 1x16m", "/16m.bin", "mb_s", AUTO_SF,
     Config("nginx", "aio 1x16m")),
    ("16 MiB, wrk -c10, MB/s: auto (fair) +sendfile vs sendfile", "/16m.bin", "mb_s", AUTO_SF,
     NGINX),
    ("1 KiB, wrk -c10, req/s: workers 2 vs 1 (defaults: cache on), not pinned", "/1k.bin",
     "req_s", dataclasses.replace(CACHED, workers=2, pinned=False),
     dataclasses.replace(CACHED, pinned=False)),
]
THROUGHPUT_SERVERS = ("64k", "whole")  # the unclog partitions scenario 1 measures


@dataclasses.dataclass
class Session:
    """What every runner needs: the mode's settings, processes, warnings, paths."""
    mode: str
    settings: dict
    procs: Processes
    warnings: Warnings
    unclog: str
    probe: str
    rate: float
    out: str
    tmp: str

    def csv(self, name, fields, rows):
        report.write_csv(os.path.join(self.out, name), fields, rows)


def rotate(items, r):
    """Round r starts one configuration later, so no config always goes first."""
    k = r % len(items)
    return items[k:] + items[:k]


def alternate(session, what, prefix, configs, rounds, body):
    """body(server, round) for each configuration in each round, on a fresh server."""
    for r in range(1, rounds + 1):
        for config in rotate(configs, r - 1):
            log(f"  {what} round {r}/{rounds}: {config.label}")
            with running(config, session, f"{prefix}-{config.slug}-r{r}") as server:
                body(server, r)


def cpu_stall_us():
    """Total µs some task waited for a CPU (PSI), or None without /proc/pressure."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(re.search(r"some .*total=(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


# ---- 1. throughput, and make bench ----------------------------------------------

def wrk_rows(session, server, r, tests, seconds):
    """One wrk run per (path, connections) on a running server: its rows."""
    prewarm(["/1k.bin", "/16m.bin"])
    rows = []
    for path, conns in tests:
        res = finish_wrk(start_wrk(session, server.port, path, conns, seconds,
                                   cpu=LOAD_CPU if server.config.pinned else None))
        if res.errors:
            session.warnings.add(f"{server.label}: wrk {path} -c{conns}: {res.errors} errors")
        rows.append({**dataclasses.asdict(res), "config": server.config, "label": server.label,
                     "round": r, "path": path, "conns": conns, "errors": res.errors,
                     "req_s": f"{res.req_s:.1f}", "mb_s": f"{res.mb_s:.1f}"})
        log(f"    {path} -c{conns}: {res.req_s:.0f} req/s, {res.mb_s:.1f} MB/s")
    return rows


def run_throughput(session, configs):
    rows, s = [], session.settings
    alternate(session, "throughput", "tp", configs, s["throughput_rounds"],
              lambda server, r: rows.extend(
                  wrk_rows(session, server, r, report.THROUGHPUT_TESTS, s["throughput"])))
    session.csv(f"{session.mode}-throughput.csv", report.TP_FIELDS, rows)
    return rows


def bench(session):
    """make bench: every configuration of BENCH, each path it is compared on."""
    tests = {}  # config -> [(path, connections)]
    for _, target, _, a, b in BENCH:
        path, conns = target if isinstance(target, tuple) else (target, 10)
        for config in (a, b):
            tests.setdefault(config, [])
            if (path, conns) not in tests[config]:
                tests[config].append((path, conns))
    rows, s = [], session.settings
    alternate(session, "bench", "bench", list(tests), s["rounds"],
              lambda server, r: rows.extend(
                  wrk_rows(session, server, r, tests[server.config], s["bench"])))
    session.csv("bench.csv", report.TP_FIELDS, rows)
    return report.bench_section(rows, BENCH)


# ---- 2 and 3. clogging ---------------------------------------------------------

def probes(session, server, seconds, tag):
    """The GET and (where served) gzip probes side by side for seconds."""
    csv = os.path.join(session.tmp, tag)
    get = start_probe(session, server.port, False, seconds, f"{csv}-get.csv")
    gz = server.gzip and start_probe(session, server.port, True, seconds, f"{csv}-gzip.csv")
    return {"get": finish_probe(get), "gzip": gz and finish_probe(gz)}


def flood_phase(session, server, tag, cold):
    """The probes while wrk floods the 16 MiB files, warm or evicted (cold)."""
    s = session.settings
    total = s["lead"] + s["flood"] + 1
    if not cold:
        prewarm(FLOOD)
    evictor = start_evictor(session, total, FLOOD) if cold else None
    wrk = start_wrk(session, server.port, FLOOD[0], 10, total, paths=FLOOD)
    time.sleep(s["lead"])
    res = probes(session, server, s["flood"], tag)
    res["flood"] = finish_wrk(wrk)
    res["evict"] = finish_evictor(evictor) if evictor else None
    return res


def clog_row(config, r, phase, res, series):
    row = {**report.key_columns(config), "config": config, "round": r, "phase": phase,
           "series": series}
    f = res.get("flood")
    if f:
        row.update(flood_mb_s=f"{f.mb_s:.1f}", flood_req_s=f"{f.req_s:.2f}",
                   flood_errors=f.errors)
    for name in ("get", "gzip"):
        p = res.get(name)
        if p:
            row.update({f"{name}_{q}_ms": getattr(p, f"{q}_ms")
                        for q in ("p50", "p90", "p99", "p999", "max")})
            row.update({f"{name}_ok": p.ok, f"{name}_errors": p.errors,
                        f"{name}_timeouts": p.timeouts, f"{name}_lag_max_ms": p.send_lag_max_ms})
    if res.get("evict"):
        row["evict_passes"] = res["evict"].passes
    return row


def brief(row):
    parts = [f"    {row['phase']:5}"]
    if row.get("flood_mb_s"):
        parts.append(f"flood {row['flood_mb_s']} MB/s")
    parts.append(f"GET p50/p99/max {row['get_p50_ms']}/{row['get_p99_ms']}/{row['get_max_ms']} ms")
    if row.get("gzip_p99_ms") not in (None, ""):
        parts.append(f"gzip p99 {row['gzip_p99_ms']} ms")
    log("  ".join(parts))


def run_clog(session, configs):
    s, rows = session.settings, []
    phases = ["alone", "warm"] + (["cold"] if s["cold"] else [])

    def body(server, r):
        for phase in phases:
            ptag = f"{server.tag}-{phase}"
            stall0, t0 = cpu_stall_us(), time.time()
            if phase == "alone":
                res = probes(session, server, s["alone"], ptag)
            else:
                res = flood_phase(session, server, ptag, phase == "cold")
            rows.append(clog_row(server.config, r, phase, res, f"tmp/{ptag}-get.csv"))
            if stall0 is not None:
                pct = (cpu_stall_us() - stall0) / ((time.time() - t0) * 1e6) * 100
                rows[-1]["cpu_pressure_pct"] = f"{pct:.1f}"
                if phase == "alone" and pct > 20:
                    session.warnings.add(
                        f"{server.label} round {r}: CPU pressure {pct:.0f}% with no "
                        "flood: other work on this machine; expect noisy figures")
            brief(rows[-1])
        if server.config.server == "unclog":
            server.save_stats(os.path.join(session.tmp, f"{server.tag}-stats.json"))

    alternate(session, "clog", "clog", configs, s["rounds"], body)
    session.csv(f"{session.mode}-clog.csv", report.CLOG_FIELDS, rows)
    return rows


def fairness(session):
    """make loadtest / loadtest-full: scenarios 1, 2 and 3 (those --only keeps), the plots."""
    s = session.settings
    if not {"throughput", "clog"} & set(s["only"]):
        return []
    unclogs = [unclog(p) for p in s["partitions"]]
    # The fair gateway beside the fifo sweep: the default (auto) and fixed sizes.
    unclogs += [unclog(p, scheduler="fair") for p in s["fair"]]
    # The default's zero-copy path beside them (sendfile auto; every other row: off).
    if "auto" in s["fair"]:
        unclogs.append(AUTO_SF)
    if session.mode == "full":
        # Each of the two mechanisms alone: the send buffer's bound with the
        # seed's queue, and the fair queue with the kernel's own send buffer.
        unclogs += [unclog("whole", flags=("--send-buffer", "256k")),
                    unclog("auto", scheduler="fair", flags=("--send-buffer", "off"))]
    if session.mode == "full" and "whole" in s["partitions"]:
        # One-shot reads, but small files served from memory: the GET probe
        # leaves the pool, the gzip probe still queues on it.
        unclogs.append(unclog("whole", cache=True))
    others = peers(session.warnings) if s["peers"] else []
    sections = []
    if "throughput" in s["only"]:
        log("throughput (scenario 1)")
        tp = [u for u in unclogs if (u.scheduler, u.partition) == ("fair", "auto")
              or (u.scheduler == "fifo" and u.partition in THROUGHPUT_SERVERS)] or unclogs[:1]
        sections += report.throughput_section(run_throughput(session, tp + others))
    if "clog" not in s["only"]:
        return sections
    log("clogging (scenario 2" + (", and 3: cold" if s["cold"] else "") + ")")
    rows = run_clog(session, unclogs + others)
    sections += report.clog_sections(rows, len(FLOOD), session.rate, s["cold"])
    made = plot(session.mode, session.rate, session.out, rows, session.warnings)
    return sections + report.plots_section(made)
