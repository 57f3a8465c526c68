"""The report: CSV files, medians, markdown tables, the environment record, MODE.md.

Rows are dicts holding the CSV columns plus "config", the servers.Config they
were measured on; tables group by that key and print its label.
"""

import csv
import datetime
import json
import os
import re
import resource
import socket
import statistics
import subprocess

from . import TOP
from .servers import Config

TP_FIELDS = ["label", "round", "path", "conns", "requests", "bytes", "duration_us",
             "req_s", "mb_s", "errors", "lat_p50_us", "lat_p99_us", "lat_max_us"]
CLOG_FIELDS = ["label", "kind", "partition", "round", "phase",
               "flood_mb_s", "flood_req_s", "flood_errors",
               "get_p50_ms", "get_p90_ms", "get_p99_ms", "get_p999_ms", "get_max_ms",
               "get_ok", "get_errors", "get_timeouts", "get_lag_max_ms",
               "gzip_p50_ms", "gzip_p90_ms", "gzip_p99_ms", "gzip_p999_ms", "gzip_max_ms",
               "gzip_ok", "gzip_errors", "gzip_timeouts", "gzip_lag_max_ms",
               "evict_passes", "cpu_pressure_pct", "series"]
CLOG_FIGURES = CLOG_FIELDS[5:-1]  # the columns that have medians
THROUGHPUT_TESTS = [("/1k.bin", 1), ("/1k.bin", 10), ("/16m.bin", 1), ("/16m.bin", 10)]


def key_columns(config):
    return {"label": config.label, "kind": config.server, "partition": config.partition}


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def read_csv(path):
    """Rows written by write_csv, with their config key back."""
    with open(path) as f:
        return [dict(row, config=Config.from_label(row["label"])) for row in csv.DictReader(f)]


def med(rows, key):
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return statistics.median(vals) if vals else None


def fmt(v, digits=1):
    if v is None:
        return "–"
    if digits == "auto":
        digits = 2 if v < 10 else 1 if v < 100 else 0
    return f"{v:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def configs_of(rows):
    """The configurations in the order they first appear."""
    return list(dict.fromkeys(r["config"] for r in rows))


def clog_summary(rows):
    """{(config, phase): {figure: median over rounds}}, and the configs in order."""
    summary = {}
    for row in rows:
        summary.setdefault((row["config"], row["phase"]), []).append(row)
    return configs_of(rows), {k: {f: med(sel, f) for f in CLOG_FIGURES}
                              for k, sel in summary.items()}


def inflation(under, alone, key):
    return fmt(ratio(under[key], alone and alone[key]), 1) + "×"


def clog_table(rows, phase):
    configs, s = clog_summary(rows)
    out = []
    for config in configs:
        under, alone = s.get((config, phase)), s.get((config, "alone"))
        if under is None:
            continue
        out.append([config.label, fmt(under["flood_mb_s"], 0)] +
                   [fmt(under[f"get_{q}_ms"], "auto") for q in ("p50", "p99", "max")] +
                   [fmt(alone and alone["get_p99_ms"], "auto"),
                    inflation(under, alone, "get_p99_ms")] +
                   [fmt(under[f"gzip_{q}_ms"], "auto") for q in ("p50", "p99", "max")] +
                   [inflation(under, alone, "gzip_p99_ms")
                    if under["gzip_p99_ms"] is not None else "–"])
    return table(["config", "flood MB/s", "GET p50 ms", "GET p99 ms", "GET max ms",
                  "GET p99 alone", "GET inflation", "gzip p50 ms", "gzip p99 ms",
                  "gzip max ms", "gzip inflation"], out)


def cold_table(rows):
    configs, s = clog_summary(rows)
    out = []
    for config in configs:
        warm, cold, alone = (s.get((config, p)) for p in ("warm", "cold", "alone"))
        if not (warm and cold):
            continue
        out.append([config.label, fmt(warm["flood_mb_s"], 0), fmt(cold["flood_mb_s"], 0),
                    fmt(ratio(cold["flood_mb_s"], warm["flood_mb_s"]), 2),
                    fmt(warm["get_p99_ms"], "auto"), fmt(cold["get_p99_ms"], "auto"),
                    inflation(cold, alone, "get_p99_ms"), fmt(cold["gzip_p99_ms"], "auto")])
    return table(["config", "warm flood MB/s", "cold flood MB/s", "cold/warm",
                  "GET p99 warm ms", "GET p99 cold ms", "GET inflation cold",
                  "gzip p99 cold ms"], out)


def select(rows, config, path, conns=None):
    return [r for r in rows if r["config"] == config and r["path"] == path
            and (conns is None or int(r["conns"]) == conns)]


def throughput_table(rows):
    out = []
    for config in configs_of(rows):
        out.append([config.label] + [
            fmt(med(select(rows, config, path, conns), "req_s" if path == "/1k.bin" else "mb_s"), 0)
            for path, conns in THROUGHPUT_TESTS])
    return table(["config", "1 KiB -c1 req/s", "1 KiB -c10 req/s",
                  "16 MiB -c1 MB/s", "16 MiB -c10 MB/s"], out)


def bench_table(rows, tests):
    """tests: (title, path, metric, config A, config B); the ratio is A ÷ B."""
    out = []
    for title, target, metric, a, b in tests:
        path, conns = target if isinstance(target, tuple) else (target, 10)
        sel_a, sel_b = select(rows, a, path, conns), select(rows, b, path, conns)
        ma, mb = med(sel_a, metric), med(sel_b, metric)
        per = lambda sel: " / ".join(fmt(float(x[metric]), 0) for x in sel)
        out.append([title, a.label, fmt(ma, 0), b.label, fmt(mb, 0), fmt(ratio(ma, mb), 2),
                    f"{per(sel_a)} vs {per(sel_b)}"])
    return table(["test", "A", "median", "B", "median", "A ÷ B", "per round (A vs B)"],
                 out) + ("\nA ÷ B above 1: A is faster. Not pinned: neither the server nor "
                         "wrk is pinned (other rows: server on CPU 0, wrk on CPU 1).\n")


# ---- 4. the attacks between clients ---------------------------------------------

def attack_summary(rows, figures):
    """{(config, attack, phase): {figure: median}}, and the rounds' rows under "rows"."""
    groups = {}
    for row in rows:
        groups.setdefault((row["config"], row["attack"], row["phase"]), []).append(row)
    return {k: dict({f: med(sel, f) for f in figures}, rows=sel) for k, sel in groups.items()}


def total(sel, key):
    return sum(int(float(r[key])) for r in sel if r.get(key) not in (None, ""))


MB_S_VICTIMS = ("bulk", "paced")  # scenario 4's victims judged by the MB/s they keep


def failed_cell(m, bulk):
    """The victim's failures summed over rounds: "0/300", "300/300 (300 × 503)"."""
    if m is None:
        return "–"
    sel = m["rows"]
    failed, refused = total(sel, "victim_failed"), total(sel, "victim_refused")
    of = f"/{total(sel, 'victim_scheduled')}" if sel[0].get("victim_scheduled") else ""
    return f"{failed}{of}" + (f" ({refused} × 503)" if refused else "")


def victim_value(m, bulk):
    if m is None:
        return None
    if bulk:
        return m["victim_mb_s"]
    return m["victim_p99_ms"] if total(m["rows"], "victim_ok") else None


def attacker_cell(m, attack):
    if m is None or m["attacker_req_s"] is None:
        return "–"
    if attack.victim in MB_S_VICTIMS and not attack.holds:  # stalled: a hold, as reader
        return f"{m['attacker_mb_s']:,.0f} MB/s"
    cell = f"{m['attacker_req_s']:,.0f} req/s"
    if attack.holds:
        cell += (f", {m['attacker_server_closed']:,.0f} closed by the server, "
                 f"{m['attacker_refused']:,.0f} × 503")
    return cell


def attacker_rate(m, attack):
    key = ("attacker_mb_s" if attack.victim in MB_S_VICTIMS and not attack.holds
           else "attacker_req_s")
    return m and m[key]


def baselines(rows, attacks):
    """{(config, victim): (median, n)}: each configuration's victim alone, pooled over
    every round of every attack with that victim (one round's alone phase is a few
    seconds: a noisy machine moves it several times over)."""
    victim_of = {a.name: a.victim for a in attacks}
    pooled = {}
    for row in rows:
        victim = victim_of.get(row["attack"])
        if row["phase"] != "alone" or victim is None:
            continue
        key = "victim_mb_s" if victim in MB_S_VICTIMS else "victim_p99_ms"
        ok = victim in MB_S_VICTIMS or float(row.get("victim_ok") or 0) > 0
        if ok and row.get(key) not in (None, ""):
            pooled.setdefault((row["config"], victim), []).append(float(row[key]))
    return {k: (statistics.median(v), len(v)) for k, v in pooled.items()}


def sources(rows, attack):
    """The table's words for the addresses the attack came from (--attackers)."""
    ns = sorted({int(r.get("attackers") or 1) for r in rows if r["attack"] == attack.name})
    if ns == [1]:
        return "; from 1 address (127.0.0.1)"
    return "; from " + " or ".join(f"{n} addresses (127.0.1.1–{n})" if n > 1 else
                                   "1 address (127.0.0.1)" for n in ns)


def attack_table(rows, attacks, victims, figures):
    """One line per attack and configuration: the victim attacked (the figure that
    counts), its baseline alone, their ratio, the failures, the attacker."""
    s, configs, out = attack_summary(rows, figures), configs_of(rows), []
    base_of = baselines(rows, attacks)
    fifo = [c for c in configs if c.server == "unclog" and c.scheduler == "fifo"]
    for attack in attacks:
        if not any(name == attack.name for _, name, _ in s):
            continue  # left out with --attacks
        bulk = attack.victim in MB_S_VICTIMS
        base = fifo and attacker_rate(s.get((fifo[0], attack.name, "attacked")), attack)
        # Baselines of the configurations that differ more than 2×: their ratios
        # do not compare, their attacked figures do.
        own = [base_of[(c, attack.victim)][0] for c in configs if (c, attack.victim) in base_of]
        apart = len(own) > 1 and min(own) > 0 and max(own) / min(own) > 2
        for i, config in enumerate(configs):
            alone, under = (s.get((config, attack.name, ph)) for ph in ("alone", "attacked"))
            # the attack and the victim's figure once, on the group's first line
            what = [attack.title + sources(rows, attack) if i == 0 else "",
                    victims[attack.victim][1] if i == 0 else "",
                    config.label]
            if alone is None and under is None:
                if "no door" in config.balancer:  # only for attacks that hold connections
                    continue
                out.append(what + ["–"] * 4 + [f"no /gzip on {config.server}"
                                               if attack.gzip else "not run", "–"])
                continue
            a, n = base_of.get((config, attack.victim), (None, 0))
            u = victim_value(under, bulk)
            r = ratio(u, a)
            share = "–" if r is None else fmt(r * 100, 0) + " %" if bulk else fmt(r, 1) + "×"
            digits = 0 if bulk else "auto"
            alone_cell = (f"{fmt(a, digits)} ({n})" + (" †" if apart else "")
                          if a is not None else "all failed")
            out.append(what + [f"**{fmt(u, digits)}**" if u is not None else "all failed",
                               alone_cell, share,
                               f"{failed_cell(alone, bulk)} · {failed_cell(under, bulk)}",
                               attacker_cell(under, attack),
                               fmt(ratio(attacker_rate(under, attack), base), 2)])
    return table(["attack", "victim's figure", "config", "attacked", "alone (phases)",
                  "attacked ÷ alone", "victim failed: alone · attacked", "attacker",
                  "attacker ÷ fifo"], out)


def attacks_section(rows, attacks, victims, figures, rounds, seconds, plots):
    intro = ("## 4. Attacks between clients\n\n"
             "One client attacks from 127.0.0.1 (with `--attackers N`, from N addresses "
             "127.0.1.1 … 127.0.1.N, each with 1/N of the attack's connections: the "
             "attack column says which) while another, the victim, runs `build/probe "
             "--from 127.0.0.2`; both connect to 127.0.0.1, the server pinned as above. Each "
             "attack gets a fresh server: the victim alone, then the attacker and, after its "
             f"lead, the victim again; {seconds:g} s of victim per phase, medians over "
             f"{rounds} round(s). Latency runs from the scheduled send time; a request that "
             "failed (503, reset, refused connection, timeout) is counted in the failed "
             "column (summed over rounds), not in the p99. **attacked** is the figure that "
             "counts: the victim's p99 (or MB/s) under the attack, the median of its rounds. "
             "alone is the configuration's baseline, the median of every alone phase with "
             "that victim over every round and attack (how many, in brackets); † marks a "
             "group whose configurations' baselines differ more than 2×: there compare the "
             "attacked column, not the ratios. attacked ÷ alone is the victim's "
             "p99 inflation, or for bulk the share of its MB/s it keeps (the paced victim: "
             "of the MB/s it asks for, counting only bytes that came within its schedule); attacker ÷ fifo is "
             "the attacker's rate against its rate on the `unclog 64k +cache` row "
             "(scheduler fifo, the seed's queue, every read on the pool). `unclog auto fair "
             "+cache +loop` is the default configuration (access log off; +loop: "
             "loop_reads on). The peers run with their own defaults "
             "(limits in loadtest/README.md).\n")
    return [intro, attack_table(rows, attacks, victims, figures)] + [
        f"![{os.path.basename(p)}]({os.path.basename(p)})\n" for p in plots]


# ---- sections of MODE.md -------------------------------------------------------

def throughput_section(rows):
    return ["## 1. Throughput (wrk, warm cache)\n",
            "1 KiB in requests/s, 16 MiB in MB/s (10^6 bytes/s).\n", throughput_table(rows)]


def clog_sections(rows, flood_files, rate, cold):
    out = ["## 2. Clogging (warm page cache)\n",
           f"Flood: wrk, 10 connections looping GET over {flood_files} distinct "
           f"16 MiB files. Probes: GET /1k.bin and POST /gzip (1 KiB body), "
           f"{rate:g} req/s each, latency from the scheduled send time. "
           "Inflation = probe p99 under the flood ÷ probe p99 with no flood "
           "(medians). unclog rows set partition = gzip_partition = the value shown.\n",
           clog_table(rows, "warm")]
    if cold:
        out += ["## 3. Cold: the same flood, its files evicted from the page cache\n",
                "posix_fadvise(POSIX_FADV_DONTNEED) on the flood's files every 50 ms "
                "during the run (`loadtest/unclogbench/evict.py`).\n",
                cold_table(rows), "\nThe cold run's probe figures in full:\n\n",
                clog_table(rows, "cold")]
    return out


def plots_section(paths):
    if not paths:
        return []
    return ["## Plots\n"] + [f"![{os.path.basename(p)}]({os.path.basename(p)})\n" for p in paths]


def bench_section(rows, tests):
    return ["## Bench: unclog vs nginx, and unclog workers 2 vs 1\n", bench_table(rows, tests)]


def document(mode, info, sections, warnings, seconds):
    """MODE.md as a list of parts joined by newlines; the 4 first are the header."""
    parts = [f"# unclog load test: {mode}\n",
             "Medians over rounds; configurations alternated round by round. "
             "See loadtest/README.md for what each column means.\n",
             "## Environment\n",
             table(["what", "value"], [[k, str(v).replace("|", "/")] for k, v in info.items()])]
    parts += sections
    if warnings:
        parts += ["## Warnings\n"] + [f"- {w}\n" for w in warnings]
    parts.append(f"\n_Run took {seconds:.0f} s._\n")
    return parts


# ---- environment record ---------------------------------------------------------

def cmd_out(cmd):
    """The first line a command prints, or "not found"."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    text = (r.stdout + r.stderr).strip()
    return text.splitlines()[0] if text else ""


def first_match(path, pattern, default=""):
    try:
        with open(path) as f:
            m = re.search(pattern, f.read(), re.M)
    except OSError:
        return default
    return m.group(1) if m else default


def environment(session, nice, settings):
    gov = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    mem_kib = first_match("/proc/meminfo", r"^MemTotal:\s*(\d+)", "0")
    cpu = first_match("/proc/cpuinfo", r"^model name\s*:\s*(.*)$", "unknown")
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpu": f"{cpu} × {os.cpu_count()}",
        "memory": f"{int(mem_kib) // 1024} MiB",
        "os": first_match("/etc/os-release", r'^PRETTY_NAME="?(.*?)"?$'),
        "kernel": os.uname().release,
        "cpu governor": first_match(gov, r"^(.*)$", "n/a").strip(),
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "pinning": "server on CPU 0, wrk/probe/evictor on CPU 1" if session.procs.can_pin
        else "none (1 CPU)",
        "priority": f"nice {nice} for every process started",
        "unclog": cmd_out([session.unclog, "--version"]),
        "unclog commit": cmd_out(["git", "-C", TOP, "describe", "--always", "--dirty"]),
        "libuv": cmd_out(["pkg-config", "--modversion", "libuv"]),
        "zlib": cmd_out(["pkg-config", "--modversion", "zlib"]),
        "llhttp": cmd_out(["dpkg-query", "-W", "-f=${Version}", "node-llhttp"]),
        "cc": cmd_out(["cc", "--version"]),
        "wrk": cmd_out(["wrk", "-v"]),
        "nginx": cmd_out(["nginx", "-v"]),
        "node": cmd_out(["node", "--version"]),
        "lighttpd": cmd_out(["lighttpd", "-v"]),
        "h2o": cmd_out(["h2o", "--version"]),
        "open files (RLIMIT_NOFILE soft/hard)": "/".join(
            str(v) for v in resource.getrlimit(resource.RLIMIT_NOFILE)),
        "gnuplot": cmd_out(["gnuplot", "--version"]),
        "settings": json.dumps(settings) + "; unclog --threads 4" +
        ("" if session.mode == "bench" else
         f"; probe rate {session.rate:g}/s each (GET 1 KiB, POST /gzip 1 KiB)"),
    }
