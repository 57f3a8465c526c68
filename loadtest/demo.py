#!/usr/bin/env python3
"""make demo: the clogged threadpool, live, for a talk (docs/talk.md).

Starts unclog with --admin on in the clogged state (partition whole,
scheduler fifo, small-file cache off) on a demo docroot, a flood of big
downloads (wrk, or build/probe --flood without it) and the constant-rate
probe on a 1 KiB file. Once a second it prints the probe's p50/p99 over that
second, the server's own small-request p99 (/stats) and the flood's MB/s, so
the room sees the numbers with or without the dashboard. Ctrl-C stops
everything it started, by PID, and exits 0.

    python3 loadtest/demo.py                 # until Ctrl-C
    python3 loadtest/demo.py --duration 30   # stops by itself
    python3 loadtest/demo.py --script        # the talk's four phases, then a table
    python3 loadtest/demo.py --act attack    # the second act, then its table

--act attack is the talk's second act, fairness between clients: unclog
with its defaults but max_connections 256 (restart only, so a server of its
own), the victim's constant-rate probe (new connection per GET of a 96 KiB
file) from 127.0.0.2, and an attacker from 127.0.0.3 that runs in turn a
connection hog, a flood over 20,000 distinct 8 KiB files and a POST /gzip
flood, each under scheduler fifo (the damage) and then fair (the default),
switched live through /settings; --phase seconds a step (default 10: about
80 s in all), a line a second (victim p50/p99 and errors, the attacker's
req/s, the top row of /stats top_clients), then a table and attack.json in
--dir. It is always scripted: --script and --duration change nothing.
--attacks picks the steps, among those three and the slow shapes of
loadtest/unclogbench/slow.py: head (a request head trickled a header line
every 2 s), body (a POST /gzip body trickled a byte every 2 s) and reader
(a 16 MiB GET read 512 bytes every 2 s through a tiny receive buffer), each
on --hog connections reopened when closed; e.g. --attacks reader.

As in make loadtest, with two CPUs or more the server runs on CPU 0 and the
load on CPU 1 (the probe on CPU 2 when there is one, away from the flood).
Python 3 standard library only.
"""

import argparse
import json
import os
import queue
import re
import shutil
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error

from unclogbench import HERE, PKG, TEMPLATES, TOP, MiB, log
from unclogbench.load import LOAD_CPU
from unclogbench.procs import Processes
from unclogbench.servers import free_port, http, tail

FILES = 8  # distinct big files: wrk takes them in turn (wrk.lua)
SMALL = "/small.bin"  # the probe's 1 KiB file
PROBE_CPU = 2 if (os.cpu_count() or 1) >= 3 else LOAD_CPU
SETTLE = 2.0  # seconds at the start of a --script phase left out of its figures
STEP = 0.25  # seconds: the windows in which --script times a switch
FOREVER = 86000  # seconds: the probe's duration without --duration (its limit is a day)
# --script: (name, the POST /settings body that starts the phase)
PHASES = [("whole + fifo", None), ("64k", "partition=64k"), ("whole", "partition=whole"),
          ("fair + auto", "scheduler=fair&partition=auto")]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8080,
                    help="default 8080, or a free one if taken (0: a free one)")
    ap.add_argument("--connections", type=int, default=16, help="flood connections (default 16)")
    ap.add_argument("--flood-size", default="16m", help="size of each big file (default 16m)")
    ap.add_argument("--rate", type=float, default=100, help="probe requests/s (default 100)")
    ap.add_argument("--duration", type=float, help="stop by itself after this many seconds")
    ap.add_argument("--script", action="store_true",
                    help="whole+fifo, 64k, whole, fair+auto, each --phase seconds, then the "
                    "tables (--duration is ignored)")
    ap.add_argument("--phase", type=float, default=10,
                    help="--script and --act attack: seconds per phase (default 10)")
    ap.add_argument("--act", choices=("clog", "attack"), default="clog",
                    help="clog (default): the clogged pool; attack: one client against another, "
                    "three attacks × fifo and fair, then the table")
    ap.add_argument("--attack-files", type=int, default=20000,
                    help="--act attack: distinct 8 KiB files the small-file flood takes "
                    "(default 20000, made once in --dir/many)")
    ap.add_argument("--max-connections", type=int, default=256,
                    help="--act attack: the server's max_connections (default 256)")
    ap.add_argument("--hog", type=int, default=512,
                    help="--act attack: connections the hog (and a slow attacker) tries to "
                    "hold (default 512)")
    ap.add_argument("--attacks", default="hog,files,gzip",
                    help="--act attack: the steps, comma-separated, among " + ",".join(ATTACKS)
                    + " (default hog,files,gzip)")
    ap.add_argument("--emulate-disk", help="start with emulate_disk, e.g. 8ms,120m")
    ap.add_argument("--workers", default="1",
                    help="the server's workers, N or auto (default 1): the switches, /stats "
                    "and the dashboard answer for all of them")
    ap.add_argument("--no-wrk", action="store_true", help="flood with build/probe --flood")
    ap.add_argument("--dir", default=os.path.join(TOP, "build", "demo"), help="demo docroot")
    ap.add_argument("--unclog", default=os.path.join(TOP, "build", "unclog"))
    ap.add_argument("--probe", default=os.path.join(TOP, "build", "probe"))
    args = ap.parse_args(argv)
    m = re.fullmatch(r"(\d+)([km]?)", args.flood_size.lower())
    if not m or int(m[1]) == 0:
        ap.error("--flood-size: a size such as 16m, 512k or 65536")
    args.flood_bytes = int(m[1]) * {"": 1, "k": 1024, "m": MiB}[m[2]]
    args.attacks = args.attacks.split(",")
    unknown = set(args.attacks) - set(ATTACKS)
    if unknown:
        ap.error(f"--attacks: unknown {','.join(sorted(unknown))}; attacks: {','.join(ATTACKS)}")
    return args


# ---- the docroot -------------------------------------------------------------------

def write_random(path, size):
    """A file of random (incompressible) bytes, unless it is there with that size."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    with open(path + ".tmp", "wb") as f:
        for left in range(size, 0, -MiB):
            f.write(os.urandom(min(left, MiB)))
    os.replace(path + ".tmp", path)


def make_docroot(root, flood_bytes):
    """static/ (the dashboard) copied, not linked: links out of the root are refused."""
    os.makedirs(os.path.join(root, "flood"), exist_ok=True)
    static = os.path.join(TOP, "static")
    for name in os.listdir(static):
        if os.path.isfile(os.path.join(static, name)):
            shutil.copy2(os.path.join(static, name), os.path.join(root, name))
    write_random(root + SMALL, 1024)
    paths = [f"/flood/big-{i:02d}.bin" for i in range(FILES)]
    for p in paths:
        write_random(root + p, flood_bytes)
        with open(root + p, "rb") as f:  # warm the page cache
            while f.read(4 * MiB):
                pass
    return paths


# ---- the processes -------------------------------------------------------------------

def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# The clogged state of the first act; the attack act starts from the defaults.
# sendfile off: the seed's path, every body read into buffers on the pool
# (with sendfile a whole file would no longer hold a thread while it is sent).
CLOGGED = ["--partition", "whole", "--scheduler", "fifo", "--file-cache", "off",
           "--sendfile", "off"]


def start_server(procs, args, logpath, settings=CLOGGED):
    """unclog with these settings; returns (process, port) once it listens."""
    port = args.port if port_free(args.port) else free_port()
    if args.port and port != args.port:
        log(f"WARNING: port {args.port} is taken (another server?); the demo uses {port}. "
            f"A tab or bookmark on :{args.port} shows that other server, not this one "
            "(--port N picks another).")
    cmd = [args.unclog, "-c", os.path.join(TEMPLATES, "unclog.conf"),
           "--listen", f"127.0.0.1:{port}", "--root", args.dir, "--admin", "on",
           "--access-log", "off", "--threads", "4", "--workers", args.workers,
           "--loop-reads", "off", *settings,  # every read meets the pool on stage
           *(["--emulate-disk", args.emulate_disk] if args.emulate_disk else [])]
    with open(logpath, "w") as logf:
        # A session of its own: the terminal's Ctrl-C reaches the demo alone,
        # which then stops everything in order, by PID.
        proc = procs.spawn(cmd, cpu=0, stdout=logf, stderr=logf, start_new_session=True)
    deadline = time.time() + 10
    while time.time() < deadline and proc.poll() is None:
        with open(logpath, errors="replace") as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/.*, admin http://127\.0\.0\.1:(\d+)/",
                          f.read())
        if m:
            ADMIN[int(m[1])] = int(m[2])
            return proc, int(m[1])
        time.sleep(0.02)
    sys.exit(f"unclog did not start; {logpath}:\n{tail(logpath)}")


def start_flood(procs, args, port, paths, seconds):
    """wrk over the big files in turn, or build/probe --flood on the first; (process, name)."""
    if shutil.which("wrk") and not args.no_wrk:
        name, env = "wrk", dict(os.environ, UNCLOG_PATHS=",".join(paths))
        cmd = ["wrk", "-t1", f"-c{args.connections}", f"-d{int(seconds) + 5}s", "--timeout",
               "30s", "-s", os.path.join(HERE, "wrk.lua"), f"http://127.0.0.1:{port}{paths[0]}"]
    else:
        name, env = "probe --flood", None
        cmd = [args.probe, "--port", str(port), "--flood", str(args.connections),
               "--get", paths[0], "--duration", str(seconds + 5)]
    proc = procs.spawn(cmd, cpu=LOAD_CPU, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, name


def start_probe(procs, args, port, seconds, csv):
    """build/probe on the small file, a JSON line a second; its lines go to a queue."""
    cmd = [args.probe, "--port", str(port), "--get", SMALL, "--rate", str(args.rate),
           "--duration", str(seconds), "--timeout", "10", "--every", "1",
           *(["--csv", csv] if csv else [])]
    proc = procs.spawn(cmd, cpu=PROBE_CPU, stdout=subprocess.PIPE, text=True,
                       start_new_session=True)
    return proc, json_lines(proc)


def json_lines(proc):
    """A queue of the JSON lines proc prints, read by a thread; None once it ends."""
    lines = queue.Queue()

    def read():
        for line in proc.stdout:
            if line.startswith("{"):
                lines.put(json.loads(line))
        lines.put(None)
    threading.Thread(target=read, daemon=True).start()
    return lines


# ---- what it shows -------------------------------------------------------------------

# The admin door (admin_listen) of the server on each public port, from its
# startup line: /stats, /settings and the dashboard answer there only.
ADMIN = {}


def admin(port):
    return ADMIN.get(port, port)


def get_stats(port, tries=1):
    """GET /stats (on the admin door), or None; a 503 (a hog holds every
    connection) is tried again."""
    for i in range(tries):
        try:
            return json.loads(http(admin(port), "/stats", timeout=2)[1])
        except Exception:  # a busy or stopping server: that second shows dashes
            if i + 1 < tries:
                time.sleep(0.2)
    return None


def post_settings(port, body):
    """POST /settings (on the admin door); returns (status, seconds it took)."""
    start = time.monotonic()
    try:
        status = http(admin(port), "/settings", body=body.encode(), timeout=10)[0]
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError as e:
        status = str(e)
    return status, time.monotonic() - start


def ms(x):
    """3 significant figures or so: 0.42, 12.3, 214."""
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def second_of(ticker, t):
    """The whole second since TICKER's start that a window ending at T is
    labelled with: the nearest, but always after the last one printed. Window
    ends come about a second apart, a few ms less when the probe's timer fired
    late once and on time the next, so rounding alone can print one twice."""
    sec = max(round(t - ticker.start), ticker.last_second + 1)
    ticker.last_second = sec
    return sec


class Ticker:
    """One line a second from the probe's window and the server's /stats."""

    HEADER = "   time  setting      probe p50 ms  p99 ms   server small p99 ms   flood MB/s"
    ROW = "{:>5.0f} s  {:<12} {:>12} {:>7} {:>21} {:>12}{}"

    def __init__(self, port, start):
        self.port, self.start, self.last_second = port, start, -1
        stats = get_stats(port)  # the first line's MB/s count from here
        self.last = (time.monotonic(), stats["bytes_sent"]) \
            if stats and "bytes_sent" in stats else None  # (monotonic, bytes_sent)
        self.samples = []  # (monotonic, probe line, small p99 ms, bytes_sent)

    def line(self, win):
        now = time.monotonic()
        stats = get_stats(self.port)
        setting = small = mb_s = sent = None
        if stats:
            setting = f"{stats['settings']['partition']} {stats['scheduler']['mode']}"
            small = stats.get("latency", {}).get("small", {}).get("p99_us")
            small = small / 1000 if small is not None else None
            sent = stats.get("bytes_sent")
            if sent is not None and self.last:
                mb_s = (sent - self.last[1]) / (now - self.last[0]) / 1e6
            self.last = (now, sent) if sent is not None else None
        self.samples.append((now, win, small, sent))
        probe = (ms(win["p50_ms"]), ms(win["p99_ms"])) if win["ok"] else ("–", "–")
        errs = f"  ({win['errors']} errors, {win['timeouts']} timeouts)" \
            if win["errors"] or win["timeouts"] else ""
        # The window's own end (the probe's monotonic clock, as time.monotonic's):
        # a line read late still says its second.
        log(self.ROW.format(second_of(self, win["t"]), setting or "–", *probe, ms(small),
                            f"{mb_s:,.0f}" if mb_s is not None else "–", errs))


# ---- --script: the figures --------------------------------------------------------------

def pct(values, p):
    """Nearest-rank percentile, as the probe computes it."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v), max(1, -(-len(v) * p // 100))) - 1]


def read_probe_csv(path, start_s):
    """[(absolute scheduled monotonic time, latency ms)] of answered or timed-out requests."""
    return [(t, lat) for t, lat, outcome, _ in read_victim_csv(path, start_s)
            if outcome in ("ok", "timeout")]


def script_report(phases, reqs, ticker, end):
    """The table per phase and, for each switch, how long the probe's p99 took to move 10x."""
    bounds = [t for _, t in phases] + [end]
    settle = min(SETTLE, (end - bounds[0]) / len(phases) / 4)
    rows, p99s = [], []
    log(f"\nPhases (figures leave out each phase's first {settle:g} s):\n")
    log("| phase | probe p50 ms | probe p99 ms | server small p99 ms | flood MB/s |")
    log("|---|---|---|---|---|")
    for i, (name, _) in enumerate(phases):
        lo, hi = bounds[i] + settle, bounds[i + 1]
        lat = [l for t, l in reqs if lo <= t < hi]
        small = [s for t, _, s, _ in ticker.samples if lo <= t < hi and s is not None]
        sent = [(t, b) for t, _, _, b in ticker.samples if lo <= t < hi and b is not None]
        mb_s = (sent[-1][1] - sent[0][1]) / (sent[-1][0] - sent[0][0]) / 1e6 \
            if len(sent) >= 2 else None
        p99s.append(pct(lat, 99))
        rows.append(f"| {name} | {ms(pct(lat, 50))} | {ms(p99s[-1])} | "
                    f"{ms(statistics.median(small)) if small else '–'} | "
                    f"{f'{mb_s:,.0f}' if mb_s is not None else '–'} |")
    log("\n".join(rows))
    log(f"\nSwitches: the first {STEP:g} s after the POST whose probe p99 (requests sent in it)"
        f"\nhas moved 10× from the phase before, or is within 2× of the phase after:\n")
    log("| switch | p99 before → after ms | moved 10× within | within 2× of after |")
    log("|---|---|---|---|")
    for i in range(1, len(phases)):
        before, after, t0 = p99s[i - 1], p99s[i], phases[i][1]
        if not (before and after):
            continue
        up = after > before
        windows = [pct([l for t, l in reqs if t0 + k * STEP <= t < t0 + (k + 1) * STEP], 99)
                   for k in range(int((bounds[i + 1] - t0) / STEP))]

        def first(reached):
            k = next((k for k, w in enumerate(windows) if w is not None and reached(w)), None)
            return "not in the phase" if k is None else f"{(k + 1) * STEP:.2f} s"
        apart = max(before, after) / min(before, after)
        moved = first(lambda w: w >= 10 * before if up else w <= before / 10) \
            if apart >= 10 else f"– ({apart:.1f}× apart)"
        level = first(lambda w: w >= after / 2 if up else w <= after * 2)
        log(f"| {phases[i - 1][0]} → {phases[i][0]} | {ms(before)} → {ms(after)} | {moved} | "
            f"{level} |")


# ---- --act attack: one client against another --------------------------------------

VICTIM = "/victim.bin"  # 96 KiB: larger than the small-file cache keeps (64k)
VICTIM_FROM, ATTACKER_FROM = "127.0.0.2", "127.0.0.3"  # the demo's own requests: 127.0.0.1
GAP = 1.0  # seconds between two steps: the attacker exits and its connections close
HOG_INTERVAL = 3  # seconds between a held connection's GETs
SCHEDULERS = ("fifo", "fair")  # the damage, then the default
SHORT = {"connections": "conns"}  # top_clients field names on the screen


ATTACK_NAMES = {"hog": "a connection hog", "files": "a small-file flood",
                "gzip": "a /gzip flood", "head": "a trickled head", "body": "a trickled body",
                "reader": "a slow reader"}
ATTACKS = tuple(ATTACK_NAMES)
SLOW_FILE = "/slow.bin"  # the slow reader's 16 MiB


def slow(args, shape, path):
    """slow.py's command: --hog connections of SHAPE on PATH, a step every 2 s."""
    return [sys.executable, os.path.join(PKG, "slow.py"), "--shape", shape,
            "--conns", str(args.hog), "--path", path, "--interval", "2"]


def attacks(args):
    """(name, what the screen says, the attacker's command after the probe, or slow.py's),
    the ones --attacks names, in the act's order."""
    every = [
        ("hog", f"{args.hog} keep-alive connections, one GET each every 3 s, against "
         f"max_connections {args.max_connections}: the hog is refused (503) and its idle "
         "connections evicted, the victim keeps getting 200",
         ["--hog", str(args.hog), "--hog-interval", str(HOG_INTERVAL), "--get", SMALL]),
        ("files", f"64 connections over {args.attack_files:,} distinct 8 KiB files, each an "
         "open and a read on the pool", ["--flood", "64", "--get", "/many/*.bin", "--files",
                                         str(args.attack_files)]),
        ("gzip", "32 connections POSTing 64 KiB bodies to /gzip: deflate on the pool",
         ["--flood", "32", "--gzip", "--body-size", "65536"]),
        ("head", f"{args.hog} connections trickling a GET's head, a header line every 2 s, "
         "each reopened when closed", slow(args, "head", SMALL)),
        ("body", f"{args.hog} connections POSTing Content-Length: 16 MiB to /gzip, a byte "
         "every 2 s, each reopened when closed", slow(args, "body", "/gzip")),
        ("reader", f"{args.hog} connections reading {SLOW_FILE} (16 MiB) 512 bytes every 2 s "
         "through a tiny receive buffer, each reopened when closed",
         slow(args, "read", SLOW_FILE)),
    ]
    return [a for name in args.attacks for a in every if a[0] == name]


def make_attack_root(root, files, reader):
    """The hog's 1 KiB file, the victim's 96 KiB one, many/0.bin .. many/FILES-1.bin, and
    for the slow READER its 16 MiB."""
    os.makedirs(os.path.join(root, "many"), exist_ok=True)
    write_random(root + SMALL, 1024)
    write_random(root + VICTIM, 96 * 1024)
    if reader:
        write_random(root + SLOW_FILE, 16 * MiB)
    block = os.urandom(8192)
    for i in range(files):
        path = os.path.join(root, "many", f"{i}.bin")
        if not os.path.exists(path):
            with open(path + ".tmp", "wb") as f:
                f.write(block)
            os.replace(path + ".tmp", path)


def start_victim(procs, args, port, seconds, csv):
    """The victim: a new connection per GET of the 96 KiB file, --rate a second, a line a second."""
    cmd = [args.probe, "--port", str(port), "--from", VICTIM_FROM, "--get", VICTIM, "--close",
           "--rate", str(args.rate), "--duration", f"{seconds:g}", "--timeout", "10",
           "--every", "1", "--csv", csv]
    proc = procs.spawn(cmd, cpu=PROBE_CPU, stdout=subprocess.PIPE, text=True,
                       start_new_session=True)
    return proc, json_lines(proc)


def start_attacker(procs, args, port, argv, seconds):
    """One attack from ATTACKER_FROM; it ends by itself after SECONDS with its summary."""
    tool = argv if argv[0] == sys.executable else [args.probe, *argv]
    cmd = [*tool, "--port", str(port), "--from", ATTACKER_FROM,
           "--duration", f"{seconds:g}", "--every", "1"]
    proc = procs.spawn(cmd, cpu=LOAD_CPU, stdout=subprocess.PIPE, text=True,
                       start_new_session=True)
    return proc, json_lines(proc)


def top_clients(stats):
    """/stats connections.top_clients as a list of rows, the top first."""
    rows = (stats or {}).get("connections", {}).get("top_clients") or []
    if isinstance(rows, dict):  # {"1": row, "2": row, ...}
        rows = [rows[k] for k in sorted(rows, key=lambda k: int(k) if k.isdigit() else 0)]
    return [r for r in rows if isinstance(r, dict)]


def number(v):
    return f"{v:,}" if isinstance(v, int) else ms(v) if isinstance(v, float) else str(v)


# The top_clients fields the screen shows, in this order (the rest are in /stats).
ROW_FIELDS = ("connections", "refused", "evicted")


def client_row(row):
    """One top_clients row for the screen: '127.0.0.3 conns 255, refused 9, evicted 40'."""
    if not row:
        return "–"
    fields = ", ".join(f"{SHORT.get(k, k)} {number(row[k])}" for k in ROW_FIELDS if k in row)
    return f"{row.get('client', '?')} {fields}"


class Step:
    """One attack under one scheduler: its times and what was seen of it."""

    def __init__(self, attack, scheduler):
        self.attack, self.scheduler = attack, scheduler
        self.name = f"{attack[0]} · {scheduler}"
        # The hog's fresh connections cannot be evicted until they have sent a
        # request: up to HOG_INTERVAL + 1 s before the figures start. A slow
        # attacker opens its connections within a step of 2 s.
        self.warm = {"hog": HOG_INTERVAL + 1.0, "head": 2.0, "body": 2.0,
                     "reader": 2.0}.get(attack[0], 0.0)
        self.end = None  # monotonic: when its victim ended
        self.before = self.after = None  # /stats
        self.top = None  # the attacker's top_clients row, last seen while it ran
        self.attacker = None  # its summary
        self.windows = []  # its lines a second
        self.victim = self.csv = None  # the victim's summary and its CSV for this step


class AttackTicker:
    """A line a second: the victim's window, the attacker's last window, the top client."""

    HEADER = ("   time  step           victim p50 ms  p99 ms errors  attacker req/s  "
              "top client (/stats)")
    ROW = "{:>5.0f} s  {:<13} {:>14} {:>7} {:>6} {:>15}  {}"

    def __init__(self, port, start):
        self.port, self.start, self.last_second = port, start, -1

    def line(self, step, win):
        stats = get_stats(self.port)
        rows = top_clients(stats)
        if step is not None and step.end is None:
            mine = [r for r in rows if r.get("client") == ATTACKER_FROM]
            step.top = mine[0] if mine else step.top
        last = step.windows[-1] if step and step.windows and step.end is None else None
        rate = f"{last['ok'] / last['window_s']:,.0f}" if last and last["window_s"] > 0 else "–"
        probe = (ms(win["p50_ms"]), ms(win["p99_ms"])) if win["ok"] else ("–", "–")
        log(self.ROW.format(second_of(self, win["t"]), step.name if step else "–", *probe,
                            win["errors"] + win["timeouts"], rate,
                            client_row(rows[0] if rows else None)))


def read_victim_csv(path, start_s):
    """[(absolute scheduled monotonic time, latency ms, outcome, status)], every request."""
    out = []
    with open(path) as f:
        next(f)
        for row in f:
            sched, lat, outcome, status = row.strip().split(",")
            out.append((start_s + float(sched), float(lat), outcome, int(status)))
    return out


def delta(step, *keys):
    """A /stats counter's growth over the step (None when a side is missing)."""
    def get(stats):
        for k in keys:
            stats = stats.get(k) if isinstance(stats, dict) else None
        return stats
    a, b = get(step.before), get(step.after)
    return b - a if isinstance(a, int) and isinstance(b, int) else None


def step_figures(step, settle):
    """What the table and attack.json say of one step."""
    mine = []
    if step.victim is not None:
        start = step.victim["start_s"]
        mine = [r for r in read_victim_csv(step.csv, start) if r[0] >= start + settle]
    lat = [l for _, l, outcome, _ in mine if outcome in ("ok", "timeout")]
    att = step.attacker or {}
    if not att and step.windows:  # stopped before its summary: its lines a second
        secs = sum(w["window_s"] for w in step.windows)
        att = {"req_s": sum(w["ok"] for w in step.windows) / secs if secs else 0.0}
    return {"attack": step.attack[0], "scheduler": step.scheduler,
            "victim": {"requests": len(mine), "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
                       "ok": sum(1 for r in mine if r[2] == "ok"),
                       "errors": sum(1 for r in mine if r[2] != "ok"),
                       "refused": sum(1 for r in mine if r[3] == 503)},
            "attacker": att, "top_client": step.top,
            "server": {"refused": delta(step, "connections", "refused"),
                       "refused_top_client": delta(step, "connections", "refused_by_reason",
                                                   "top_client"),
                       "evicted": delta(step, "connections", "evicted")}}


def attack_report(rows, settle, path):
    """The table (attack × scheduler), attack.json, the load average."""
    log(f"\nThe attack act (victim {VICTIM_FROM}, attacker {ATTACKER_FROM}; each step's "
        f"first {settle:g} s left out; times in ms):\n")
    log("| attack | scheduler | victim p50 | victim p99 | victim errors | victim 503 | "
        "attacker req/s | attacker 503 | evicted |")
    log("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        v, a, srv = r["victim"], r["attacker"], r["server"]
        log(f"| {r['attack']} | {r['scheduler']} | {ms(v['p50_ms'])} | {ms(v['p99_ms'])} | "
            f"{v['errors']} of {v['requests']} | {v['refused']} | "
            f"{a.get('req_s', 0):,.0f} | {number(a.get('refused', '–'))} | "
            f"{number(srv['evicted'] if srv['evicted'] is not None else '–')} |")
    load = os.getloadavg()
    log(f"\nLoad average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; the figures: {path}")
    with open(path, "w") as f:
        json.dump({"steps": rows, "loadavg": load}, f, indent=1)


def finish_step(procs, step, attacker, lines, port, until):
    """Waits for the attacker's summary (stops it by PID if late) and reads /stats."""
    try:
        attacker.wait(timeout=max(0.0, until - time.monotonic()) + 5)
    except subprocess.TimeoutExpired:
        pass
    procs.stop(attacker, grace=1)  # by PID if it is late; untracked either way
    try:
        while (item := lines.get(timeout=5)) is not None:
            if "t" in item:
                step.windows.append(item)
            else:
                step.attacker = item
    except queue.Empty:
        pass
    drain(port)
    step.after = get_stats(port, tries=15)


def drain(port, bound=10.0):
    """Until the server holds none of the attacker's connections (at most BOUND s): the
    next step must not find the last one's, still closing, in its way."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        rows = top_clients(get_stats(port))
        if rows and not any(r.get("client") == ATTACKER_FROM and r.get("connections", 0) > 0
                            for r in rows):
            return
        time.sleep(0.1)


def follow(ctx, until, step=None, attacker_lines=None):
    """Prints the victim's lines until monotonic time until; False once the victim ended."""
    while time.monotonic() < until and not ctx["ended"]:
        if ctx["server"].poll() is not None:
            sys.exit(f"unclog exited ({ctx['server'].returncode}):\n{tail(ctx['log'])}")
        while attacker_lines is not None and not attacker_lines.empty():
            item = attacker_lines.get()
            if item is None:
                attacker_lines = None
            elif "t" in item:
                step.windows.append(item)
            else:
                step.attacker = item
        try:
            item = ctx["lines"].get(timeout=max(0.01, min(1.0, until - time.monotonic())))
        except queue.Empty:
            continue
        if item is None:
            ctx["ended"] = True
        elif "t" not in item:
            ctx["final"] = item
        elif item["window_s"] >= 0.5:
            ctx["ticker"].line(step, item)
    return not ctx["ended"]


def warm_up(ctx, args, step, port):
    """Until the hog holds the server (half the connections, a quarter idle), or step.warm s
    (a slow attacker's too); what the screen says of it."""
    deadline = time.monotonic() + step.warm
    row = None
    while time.monotonic() < deadline and ctx["server"].poll() is None:
        time.sleep(0.25)
        mine = [r for r in top_clients(get_stats(port)) if r.get("client") == ATTACKER_FROM]
        row = mine[0] if mine else row
        if row and row.get("connections", 0) >= args.max_connections // 2 \
                and row.get("idle", 0) >= args.max_connections // 4:
            break
    who = "the hog" if step.attack[0] == "hog" else "the attacker"
    return f"{who} holds {client_row(row)}; " if step.warm else ""


ATTACK_SAY = """\
  the victim ({victim}): {rate:g} GET/s of a 96 KiB file, a new connection each
  the attacker ({attacker}): {attacks},
  each under scheduler fifo (the damage), then fair (the default: no damage)
  the dashboard shows the victim's p99 and the attacker at the top of the client table
"""


def run_attack(args, procs):
    """The attack act: each attack under each scheduler, then the table."""
    log(f"demo docroot {os.path.relpath(args.dir)}: {args.attack_files:,} files of 8 KiB in "
        f"many/, {VICTIM} of 96 KiB, {SMALL} of 1 KiB")
    make_attack_root(args.dir, args.attack_files, "reader" in args.attacks)
    logpath = os.path.join(args.dir, "unclog.log")
    server, port = start_server(procs, args, logpath, [
        "--max-connections", str(args.max_connections), "--scheduler", SCHEDULERS[0]])
    steps = [Step(a, sched) for a in attacks(args) for sched in SCHEDULERS]
    banner(port, [("unclog", server.pid)],
           ATTACK_SAY.format(victim=VICTIM_FROM, rate=args.rate, attacker=ATTACKER_FROM,
                             attacks=", ".join(ATTACK_NAMES[a] for a in args.attacks)),
           AttackTicker.HEADER)
    ctx = {"server": server, "log": logpath, "ticker": AttackTicker(port, time.monotonic())}
    try:
        for i, step in enumerate(steps):
            attack_step(procs, args, port, ctx, step, os.path.join(args.dir, f"victim-{i}.csv"))
            time.sleep(GAP)
    finally:
        rc, orphans = procs.stop(server)
        log(f"stopped: the probes and unclog (exit status {rc})")
    settle = min(SETTLE, args.phase / 4)
    attack_report([step_figures(s, settle) for s in steps], settle,
                  os.path.join(args.dir, "attack.json"))
    return 0 if rc == 0 and not orphans else 1


def attack_step(procs, args, port, ctx, step, csv):
    """One step: the scheduler set, the attacker (the hog settles in first), the victim's
    --phase seconds; each probe ends by itself, so a late step is only late."""
    status, _ = post_settings(port, f"scheduler={step.scheduler}")
    step.before = get_stats(port, tries=15)
    seconds = step.warm + args.phase + GAP  # the attacker outlasts the victim
    attacker, alines = start_attacker(procs, args, port, step.attack[2], seconds)
    until = time.monotonic() + seconds
    log(f"--- {step.name} (attacker pid {attacker.pid}; POST /settings "
        f"scheduler={step.scheduler}: {status}) ---")
    log(textwrap.fill(step.attack[1], width=100, initial_indent="    ",
                      subsequent_indent="    "))
    held = warm_up(ctx, args, step, port)
    victim, ctx["lines"] = start_victim(procs, args, port, args.phase, csv)
    ctx.update(final=None, ended=False)
    log(f"--- {held}the victim starts (pid {victim.pid}) ---")
    follow(ctx, time.monotonic() + args.phase + 15, step, alines)  # until the victim ends
    procs.stop(victim, grace=1)
    step.end, step.victim, step.csv = time.monotonic(), ctx["final"], csv
    finish_step(procs, step, attacker, alines, port, until)


# ---- the run -------------------------------------------------------------------

def banner(port, pids, say, header):
    """What was started, the dashboard's URL, what the act shows (SAY), the lines' HEADER."""
    log(f"started: {', '.join(f'{name} pid {pid}' for name, pid in pids)}")
    log(f"\nDashboard: http://127.0.0.1:{admin(port)}/.unclog/dashboard\n{say}Ctrl-C stops "
        "everything.\n")
    log(header)


CLOG_SAY = """\
  now    partition whole, scheduler fifo: small requests queue behind whole-file reads
  then   set partition to 64k: the small-request p99 falls, and so do the MB/s
  then   click defaults (fair + auto: scheduler fair, partition auto, one switch):
         p99 stays low, the MB/s come back
  (or from a shell: curl -d partition=64k http://127.0.0.1:{port}/settings)
"""


def run(args, procs):
    """The clogged pool: the flood and the probe, the settings switched by hand or --script."""
    log(f"demo docroot {os.path.relpath(args.dir)}: {FILES} files of {args.flood_size}, "
        f"{SMALL} of 1 KiB, the dashboard")
    paths = make_docroot(args.dir, args.flood_bytes)
    logpath = os.path.join(args.dir, "unclog.log")
    server, port = start_server(procs, args, logpath)
    seconds = len(PHASES) * args.phase if args.script else args.duration or FOREVER
    flood, flood_name = start_flood(procs, args, port, paths, seconds)
    csv = os.path.join(args.dir, "script-probe.csv") if args.script else None
    probe, lines = start_probe(procs, args, port, seconds, csv)
    start = time.monotonic()
    banner(port, [("unclog", server.pid), (flood_name, flood.pid), ("probe", probe.pid)],
           CLOG_SAY.format(port=admin(port)), Ticker.HEADER)
    ticker = Ticker(port, start)
    phases = [(PHASES[0][0], start)]  # (name, monotonic time it began)
    final = None
    try:
        while True:
            if server.poll() is not None:
                sys.exit(f"unclog exited ({server.returncode}):\n{tail(logpath)}")
            if flood.poll() is not None:
                sys.exit(f"the flood ({flood_name}) exited early ({flood.returncode})")
            due = start + len(phases) * args.phase \
                if args.script and len(phases) < len(PHASES) else None
            if due is not None and time.monotonic() >= due:
                name, body = PHASES[len(phases)]
                phases.append((name, time.monotonic()))
                status, took = post_settings(port, body)
                log(f"--- POST /settings {body}: {status} in {took * 1000:.1f} ms ---")
                continue
            try:
                item = lines.get(timeout=min(1.0, due - time.monotonic()) if due else 1.0)
            except queue.Empty:
                continue
            if item is None:  # the probe has ended
                if final is None:
                    sys.exit(f"the probe failed ({probe.wait()})")
                break
            if "t" not in item:
                final = item  # its summary
            elif item["window_s"] >= 0.5:  # not the last, partial second
                ticker.line(item)
    finally:
        # The load first, so that the server's graceful stop has nothing left to finish.
        for proc in (probe, flood):
            procs.stop(proc, grace=2)
        rc, orphans = procs.stop(server)
        log(f"stopped: probe, {flood_name} and unclog (exit status {rc})")
    if args.script and final:
        script_report(phases, read_probe_csv(csv, final["start_s"]), ticker,
                      final["start_s"] + final["duration"])
        log(f"\nThe probe: {final['ok']} answers, {final['errors']} errors, {final['timeouts']} "
            f"timeouts; its own send lag (scheduled time to write, CPU {PROBE_CPU}) mean "
            f"{ms(final['send_lag_mean_ms'])} ms, max {ms(final['send_lag_max_ms'])} ms.")
    return 0 if rc == 0 and not orphans else 1


def busy_cpus(seconds=1.0):
    """The share of this machine's CPU time (0..1) that was not idle over SECONDS,
    from /proc/stat, before the demo starts anything; None where unknown."""
    def times():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + (v[4] if len(v) > 4 else 0)  # all, idle + iowait
    try:
        all0, idle0 = times()
        time.sleep(seconds)
        all1, idle1 = times()
    except (OSError, ValueError, IndexError):
        return None
    return 1 - (idle1 - idle0) / (all1 - all0) if all1 > all0 else None


def warn_if_busy():
    """The figures on the screen assume a quiet machine: say so when it is not."""
    busy = busy_cpus()
    if busy is not None and busy > 0.25:
        log(f"WARNING: the machine is busy before the demo starts ({busy:.0%} of its CPU time "
            "in use): other work will share the server's CPU and the figures will jump. "
            "Stop it (a browser build, a test run, an indexer) for a talk.")


def main(argv=None):
    args = parse_args(argv)
    warn_if_busy()
    if not all(os.access(x, os.X_OK) for x in (args.unclog, args.probe)):
        sys.exit("build/unclog or build/probe missing: run make build/unclog build/probe")
    try:
        with Processes() as procs:
            return (run_attack if args.act == "attack" else run)(args, procs)
    except SystemExit as e:  # Processes turns SIGINT/SIGTERM/SIGHUP into 128 + signal
        if e.code in (130, 143):
            return 0
        raise


if __name__ == "__main__":
    sys.exit(main())
