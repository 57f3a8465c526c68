#!/usr/bin/env python3
"""unclog's threadpool-fairness experiment, end to end (see loadtest/README.md).

    python3 loadtest/run.py quick   # make loadtest:      a few partitions, ~3 min
    python3 loadtest/run.py full    # make loadtest-full: the whole sweep + peers, ~20 min
    python3 loadtest/run.py bench   # make bench:         unclog vs nginx speed check

Every server it starts is pinned to CPU 0 and every load generator (wrk, the
probe, the page-cache evictor) to CPU 1 when there are two CPUs (but for bench's
workers row, which pins nothing); configurations
are alternated round after round and the tables report medians. Everything it
starts is stopped by PID, also on Ctrl-C and on errors. Python 3 standard
library only.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
FIXTURES = os.path.join(HERE, "fixtures")
FLOOD_FILES = 10
MiB = 1 << 20
SWEEP = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m", "4m", "16m", "whole"]

# Each mode's settings. Durations in seconds; rates in requests per second.
MODES = {
    "quick": dict(partitions=["4k", "64k", "1m", "whole"], rounds=3, alone=2, flood=3,
                  lead=1, throughput=2, throughput_rounds=1, cold=True, peers=False,
                  rate=200),
    "full": dict(partitions=SWEEP, rounds=3, alone=3, flood=4, lead=1, throughput=2,
                 throughput_rounds=3, cold=True, peers=True, rate=200),
    "bench": dict(rounds=3, bench=5),
}

CHILDREN = {}   # pid -> Popen of everything we started and have not reaped
WARNINGS = []   # anomalies worth a line in the report


def warn(msg):
    WARNINGS.append(msg)
    print(f"  WARNING: {msg}", file=sys.stderr, flush=True)


def log(msg):
    print(msg, flush=True)


# ---- processes -----------------------------------------------------------------

NICE = []  # ["nice", "-n", "-10"] when root: shrug off other work on a shared machine


def pin(cpu):
    """The nice + taskset prefix for a CPU; no taskset on a one-CPU machine or for None."""
    if cpu is not None and (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return NICE + ["taskset", "-c", str(cpu)]
    return list(NICE)


def alive(pid):
    """True while PID runs; a zombie has stopped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cpu_stall_us():
    """Total µs some task waited for a CPU (PSI), or None without /proc/pressure."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(re.search(r"some .*total=(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def spawn(cmd, **kw):
    proc = subprocess.Popen(cmd, **kw)
    CHILDREN[proc.pid] = proc
    return proc


def reap(proc, timeout=10.0):
    """Waits for a child we started; kills it by PID if it overstays."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    CHILDREN.pop(proc.pid, None)
    return proc.returncode


def stop(proc, grace=5.0):
    """SIGTERM, then SIGKILL after grace seconds; returns the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return reap(proc, grace)


def stop_all(*_):
    for proc in list(CHILDREN.values()):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.time() + 3
    for proc in list(CHILDREN.values()):
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        CHILDREN.pop(proc.pid, None)


def on_signal(signum, _frame):
    stop_all()
    sys.exit(128 + signum)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


# ---- fixtures -----------------------------------------------------------------

def fixture_paths():
    flood = [f"/flood/16m-{i:02d}.bin" for i in range(FLOOD_FILES)]
    return {"/1k.bin": 1024, "/1m.bin": MiB, "/16m.bin": 16 * MiB,
            **{p: 16 * MiB for p in flood}}, flood


def make_fixtures():
    """Random (incompressible) files, made once; loadtest/fixtures/ is git-ignored."""
    sizes, _ = fixture_paths()
    os.makedirs(os.path.join(FIXTURES, "flood"), exist_ok=True)
    for rel, size in sizes.items():
        path = FIXTURES + rel
        if os.path.exists(path) and os.path.getsize(path) == size:
            continue
        log(f"  making fixture {rel} ({size} bytes)")
        with open(path + ".tmp", "wb") as f:
            left = size
            while left:
                n = min(left, MiB)
                f.write(os.urandom(n))
                left -= n
        os.replace(path + ".tmp", path)


def prewarm(paths):
    """Reads files through the page cache so the warm flood never touches the disk."""
    for rel in paths:
        with open(FIXTURES + rel, "rb") as f:
            while f.read(4 * MiB):
                pass


# ---- servers ------------------------------------------------------------------

class Server:
    """One server configuration; start() runs a fresh process, stop() ends it."""
    gzip = False
    pinned = True  # server on CPU 0 and its load on CPU 1 (when there are two)

    def __init__(self, label, kind):
        self.label, self.kind = label, kind
        self.proc = None
        self.port = None

    def wait_listening(self, logpath, timeout=10.0, count=1):
        """The port, once COUNT processes (an unclog's workers) have logged it."""
        deadline = time.time() + timeout
        pat = re.compile(r"listening on http://127\.0\.0\.1:(\d+)/")
        while time.time() < deadline:
            with open(logpath, errors="replace") as f:
                m = pat.findall(f.read())
            if len(m) >= count:
                return int(m[0])
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"{self.label} did not start; see {logpath}:\n{tail(logpath)}")

    def wait_connect(self, port, timeout=10.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return port
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"{self.label} did not start listening on port {port}")

    def stop(self):
        if self.proc is None:
            return
        rc = stop(self.proc)
        if rc != 0 and self.expect_clean_exit:
            warn(f"{self.label}: exit status {rc} after SIGTERM (expected 0); log {self.logpath}")
        self.proc = None

    expect_clean_exit = False


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Unclog(Server):
    gzip = True
    expect_clean_exit = True

    def __init__(self, binary, partition, gzip_partition=None, threads=4, cache=False,
                 workers=1, pinned=True):
        # The small-file cache is off unless asked for: with it, the 1 KiB probe
        # never touches the threadpool, and the experiment is about the pool.
        label = f"unclog {partition}" + (" +cache" if cache else "")
        if workers != 1 or not pinned:
            label += f" workers {workers}" + ("" if pinned else " (not pinned)")
        super().__init__(label, "unclog")
        self.binary, self.partition, self.cache = binary, partition, cache
        self.gzip_partition = gzip_partition or partition
        self.threads, self.workers, self.pinned = threads, workers, pinned

    def start(self, tmp, tag):
        conf = os.path.join(tmp, "unclog-empty.conf")
        with open(conf, "w") as f:
            f.write("# settings come from the command line (loadtest/run.py)\n")
        self.logpath = os.path.join(tmp, f"{tag}.log")
        cmd = pin(0 if self.pinned else None) + [
            self.binary, "-c", conf, "--listen", "127.0.0.1:0", "--root", FIXTURES,
            "--threads", str(self.threads), "--workers", str(self.workers),
            "--partition", self.partition, "--gzip-partition", self.gzip_partition,
            "--access-log", "off", "--file-cache", "on" if self.cache else "off"]
        with open(self.logpath, "w") as logf:
            self.proc = spawn(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        self.port = self.wait_listening(self.logpath, count=self.workers)
        return self.port

    def stop(self):
        """With workers, the master stops them before it exits; any left are killed by PID."""
        if self.proc is None:
            return
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                workers = [int(p) for p in f.read().split()]
        except OSError:
            workers = []
        super().stop()
        deadline = time.time() + 5
        while any(alive(p) for p in workers) and time.time() < deadline:
            time.sleep(0.05)
        for pid in filter(alive, workers):
            warn(f"{self.label}: worker pid {pid} outlived its master; killed")
            os.kill(pid, signal.SIGKILL)

    def save_stats(self, path):
        try:
            _, body = http(self.port, "/stats", timeout=5)
            with open(path, "wb") as f:
                f.write(body)
        except Exception as e:  # /stats is informative only
            warn(f"{self.label}: GET /stats failed: {e}")


NGINX_VARIANTS = {
    "sendfile": "sendfile on; aio off;",
    "aio 1x16m": "sendfile off; aio threads; output_buffers 1 16m;",
    "aio 2x64k": "sendfile off; aio threads; output_buffers 2 64k;",
}


class Nginx(Server):
    def __init__(self, variant):
        super().__init__(f"nginx {variant}", "nginx")
        self.variant = variant

    def start(self, tmp, tag):
        prefix = os.path.join(tmp, tag + ".nginx")
        os.makedirs(prefix, exist_ok=True)
        port = free_port()
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""# written by loadtest/run.py
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
thread_pool default threads=4 max_queue=65536;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    default_type application/octet-stream;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    tcp_nopush on;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    {NGINX_VARIANTS[self.variant]}
    server {{
        listen 127.0.0.1:{port};
        root {FIXTURES};
    }}
}}
""")
        self.logpath = os.path.join(prefix, "error.log")
        cmd = pin(0) + ["nginx", "-c", conf, "-p", prefix + "/", "-e", self.logpath,
                        "-g", "daemon off; master_process off;"]
        with open(os.path.join(prefix, "stdout.log"), "w") as logf:
            self.proc = spawn(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        self.port = self.wait_connect(port)
        return self.port


class Node(Server):
    gzip = True

    def __init__(self, script):
        super().__init__(f"node {script}", "node")
        self.script = script

    def start(self, tmp, tag):
        self.logpath = os.path.join(tmp, f"{tag}.log")
        env = dict(os.environ, UV_THREADPOOL_SIZE="4")
        cmd = pin(0) + ["node", os.path.join(HERE, "peers", self.script + ".js"),
                        "--port", "0", "--root", FIXTURES]
        with open(self.logpath, "w") as logf:
            self.proc = spawn(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=env)
        self.port = self.wait_listening(self.logpath)
        return self.port


def peers():
    found = []
    if shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"):
        found += [Nginx(v) for v in NGINX_VARIANTS]
    else:
        warn("nginx not installed: peers skipped (apt-get install nginx-light)")
    if shutil.which("node"):
        found += [Node("readfile"), Node("stream")]
    else:
        warn("node not installed: Node.js peers skipped")
    return found


def check(server):
    """A sanity request or two, so a broken server fails loudly, not as odd numbers."""
    status, body = http(server.port, "/1k.bin")
    if status != 200 or len(body) != 1024:
        raise RuntimeError(f"{server.label}: GET /1k.bin gave {status}, {len(body)} bytes")
    if server.gzip:
        try:
            status, body = http(server.port, "/gzip", body=b"hello " * 200)
            if status != 200 or body[:2] != b"\x1f\x8b":
                raise RuntimeError(f"status {status}")
        except Exception as e:
            warn(f"{server.label}: POST /gzip does not work ({e}); gzip probe skipped")
            server.gzip = False


# ---- load generators -------------------------------------------------------------

def start_wrk(port, path, conns, seconds, paths=None, cpu=1):
    env = dict(os.environ)
    env.pop("UNCLOG_PATHS", None)
    if paths:
        env["UNCLOG_PATHS"] = ",".join(paths)
    cmd = pin(cpu) + ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "30s",
                      "-s", os.path.join(HERE, "wrk.lua"), f"http://127.0.0.1:{port}{path}"]
    return spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)


def finish_wrk(proc, seconds):
    out, _ = proc.communicate(timeout=seconds + 60)
    CHILDREN.pop(proc.pid, None)
    m = re.search(r"^WRKJSON (.*)$", out, re.M)
    if not m:
        raise RuntimeError(f"wrk failed (status {proc.returncode}):\n{out}")
    r = json.loads(m.group(1))
    secs = r["duration_us"] / 1e6
    r["req_s"] = r["requests"] / secs
    r["mb_s"] = r["bytes"] / secs / 1e6
    r["errors"] = sum(r[k] for k in ("connect_errors", "read_errors", "write_errors",
                                     "status_errors", "timeouts"))
    return r


def start_probe(args, port, gzip, seconds, csv_path):
    what = ["--gzip"] if gzip else ["--get", "/1k.bin"]
    cmd = pin(1) + [args.probe, "--port", str(port), *what, "--rate", str(args.rate),
                    "--duration", str(seconds), "--timeout", "10", "--csv", csv_path]
    return spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_probe(proc, seconds):
    out, err = proc.communicate(timeout=seconds + 30)
    CHILDREN.pop(proc.pid, None)
    if proc.returncode != 0:
        raise RuntimeError(f"probe failed (status {proc.returncode}): {err}{out}")
    r = json.loads(out.strip().splitlines()[-1])
    if r["errors"] or r["timeouts"]:
        warn(f"probe {r['mode']}: {r['errors']} errors, {r['timeouts']} timeouts")
    return r


def start_evictor(args, seconds, paths):
    cmd = pin(1) + [args.probe, "--evict", "--interval", "0.05", "--duration", str(seconds),
                    *[FIXTURES + p for p in paths]]
    return spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---- scenarios ---------------------------------------------------------------

def rotate(items, r):
    """Round r starts one configuration later, so no config always goes first."""
    k = r % len(items)
    return items[k:] + items[:k]


def probes(args, server, seconds, tmp, tag):
    """The GET and (where served) gzip probes side by side for `seconds`."""
    get = start_probe(args, server.port, False, seconds, os.path.join(tmp, f"{tag}-get.csv"))
    gz = None
    if server.gzip:
        gz = start_probe(args, server.port, True, seconds, os.path.join(tmp, f"{tag}-gzip.csv"))
    res = {"get": finish_probe(get, seconds)}
    if gz:
        res["gzip"] = finish_probe(gz, seconds)
    return res


def flood_phase(args, server, cfg, tmp, tag, cold):
    _, flood = fixture_paths()
    seconds = cfg["flood"]
    total = cfg["lead"] + seconds + 1
    if not cold:
        prewarm(flood)
    evictor = start_evictor(args, total, flood) if cold else None
    wrk = start_wrk(server.port, flood[0], 10, total, paths=flood)
    time.sleep(cfg["lead"])
    res = probes(args, server, seconds, tmp, tag)
    res["flood"] = finish_wrk(wrk, total)
    if evictor:
        out, _ = evictor.communicate(timeout=total + 30)
        CHILDREN.pop(evictor.pid, None)
        res["evict"] = json.loads(out.strip().splitlines()[-1])
    return res


CLOG_FIELDS = ["label", "kind", "partition", "round", "phase",
               "flood_mb_s", "flood_req_s", "flood_errors",
               "get_p50_ms", "get_p90_ms", "get_p99_ms", "get_p999_ms", "get_max_ms",
               "get_ok", "get_errors", "get_timeouts", "get_lag_max_ms",
               "gzip_p50_ms", "gzip_p90_ms", "gzip_p99_ms", "gzip_p999_ms", "gzip_max_ms",
               "gzip_ok", "gzip_errors", "gzip_timeouts", "gzip_lag_max_ms",
               "evict_passes", "cpu_pressure_pct", "series"]


def clog_row(server, r, phase, res, series):
    row = {"label": server.label, "kind": server.kind,
           "partition": getattr(server, "partition", ""), "round": r, "phase": phase,
           "series": series}
    if "flood" in res:
        f = res["flood"]
        row.update(flood_mb_s=f"{f['mb_s']:.1f}", flood_req_s=f"{f['req_s']:.2f}",
                   flood_errors=f["errors"])
    for name in ("get", "gzip"):
        p = res.get(name)
        if p is None:
            continue
        for q in ("p50", "p90", "p99", "p999", "max"):
            row[f"{name}_{q}_ms"] = p[f"{q}_ms"]
        row[f"{name}_ok"], row[f"{name}_errors"] = p["ok"], p["errors"]
        row[f"{name}_timeouts"], row[f"{name}_lag_max_ms"] = p["timeouts"], p["send_lag_max_ms"]
    if "evict" in res:
        row["evict_passes"] = res["evict"]["passes"]
    return row


def run_clog(args, cfg, servers, out, tmp):
    rows = []
    phases = ["alone", "warm"] + (["cold"] if cfg["cold"] else [])
    for r in range(1, cfg["rounds"] + 1):
        for server in rotate(servers, r - 1):
            tag = f"clog-{slug(server.label)}-r{r}"
            log(f"  clog round {r}/{cfg['rounds']}: {server.label}")
            server.start(tmp, tag)
            try:
                check(server)
                for phase in phases:
                    ptag = f"{tag}-{phase}"
                    stall0, t0 = cpu_stall_us(), time.time()
                    if phase == "alone":
                        res = probes(args, server, cfg["alone"], tmp, ptag)
                    else:
                        res = flood_phase(args, server, cfg, tmp, ptag, phase == "cold")
                    rows.append(clog_row(server, r, phase, res, f"tmp/{ptag}-get.csv"))
                    if stall0 is not None:
                        pct = (cpu_stall_us() - stall0) / ((time.time() - t0) * 1e6) * 100
                        rows[-1]["cpu_pressure_pct"] = f"{pct:.1f}"
                        if phase == "alone" and pct > 20:
                            warn(f"{server.label} round {r}: CPU pressure {pct:.0f}% with no "
                                 "flood: other work on this machine; expect noisy figures")
                    brief(rows[-1])
                if isinstance(server, Unclog):
                    server.save_stats(os.path.join(tmp, f"{tag}-stats.json"))
            finally:
                server.stop()
    write_csv(os.path.join(out, f"{args.mode}-clog.csv"), CLOG_FIELDS, rows)
    return rows


def brief(row):
    parts = [f"    {row['phase']:5}"]
    if row.get("flood_mb_s"):
        parts.append(f"flood {row['flood_mb_s']} MB/s")
    parts.append(f"GET p50/p99/max {row['get_p50_ms']}/{row['get_p99_ms']}/{row['get_max_ms']} ms")
    if row.get("gzip_p99_ms") is not None and row.get("gzip_p99_ms") != "":
        parts.append(f"gzip p99 {row['gzip_p99_ms']} ms")
    log("  ".join(parts))


THROUGHPUT_TESTS = [("/1k.bin", 1), ("/1k.bin", 10), ("/16m.bin", 1), ("/16m.bin", 10)]
TP_FIELDS = ["label", "round", "path", "conns", "requests", "bytes", "duration_us",
             "req_s", "mb_s", "errors", "lat_p50_us", "lat_p99_us", "lat_max_us"]


def wrk_rows(server, r, tests, seconds, sink):
    prewarm(["/1k.bin", "/16m.bin"])
    for path, conns in tests:
        res = finish_wrk(start_wrk(server.port, path, conns, seconds,
                                   cpu=1 if server.pinned else None), seconds)
        if res["errors"]:
            warn(f"{server.label}: wrk {path} -c{conns}: {res['errors']} errors")
        sink.append({"label": server.label, "round": r, "path": path, "conns": conns,
                     **{k: res[k] for k in TP_FIELDS if k in res}})
        log(f"    {path} -c{conns}: {res['req_s']:.0f} req/s, {res['mb_s']:.1f} MB/s")


def run_throughput(args, cfg, servers, out, tmp):
    rows = []
    for r in range(1, cfg["throughput_rounds"] + 1):
        for server in rotate(servers, r - 1):
            log(f"  throughput round {r}/{cfg['throughput_rounds']}: {server.label}")
            server.start(tmp, f"tp-{slug(server.label)}-r{r}")
            try:
                check(server)
                wrk_rows(server, r, THROUGHPUT_TESTS, cfg["throughput"], rows)
            finally:
                server.stop()
    for row in rows:
        row["req_s"], row["mb_s"] = f"{row['req_s']:.1f}", f"{row['mb_s']:.1f}"
    write_csv(os.path.join(out, f"{args.mode}-throughput.csv"), TP_FIELDS, rows)
    return rows


# ---- tables ------------------------------------------------------------------

def slug(s):
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


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


def clog_summary(rows):
    """Medians per configuration and phase, in the order configurations first appear."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    summary = {}
    for label in labels:
        for phase in ("alone", "warm", "cold"):
            sel = [r for r in rows if r["label"] == label and r["phase"] == phase]
            if sel:
                summary[(label, phase)] = {k: med(sel, k) for k in CLOG_FIELDS[5:-1]}
    return labels, summary


def clog_table(rows, phase):
    labels, s = clog_summary(rows)
    out = []
    for label in labels:
        under, alone = s.get((label, phase)), s.get((label, "alone"))
        if under is None:
            continue
        a = lambda k: alone.get(k) if alone else None
        out.append([label, fmt(under["flood_mb_s"], 0),
                    fmt(under["get_p50_ms"], "auto"), fmt(under["get_p99_ms"], "auto"),
                    fmt(under["get_max_ms"], "auto"), fmt(a("get_p99_ms"), "auto"),
                    fmt(ratio(under["get_p99_ms"], a("get_p99_ms")), 1) + "×",
                    fmt(under["gzip_p50_ms"], "auto"), fmt(under["gzip_p99_ms"], "auto"),
                    fmt(under["gzip_max_ms"], "auto"),
                    fmt(ratio(under["gzip_p99_ms"], a("gzip_p99_ms")), 1) + "×"
                    if under["gzip_p99_ms"] is not None else "–"])
    return table(["config", "flood MB/s", "GET p50 ms", "GET p99 ms", "GET max ms",
                  "GET p99 alone", "GET inflation", "gzip p50 ms", "gzip p99 ms",
                  "gzip max ms", "gzip inflation"], out)


def cold_table(rows):
    labels, s = clog_summary(rows)
    out = []
    for label in labels:
        warm, cold, alone = s.get((label, "warm")), s.get((label, "cold")), s.get((label, "alone"))
        if not (warm and cold):
            continue
        out.append([label, fmt(warm["flood_mb_s"], 0), fmt(cold["flood_mb_s"], 0),
                    fmt(ratio(cold["flood_mb_s"], warm["flood_mb_s"]), 2),
                    fmt(warm["get_p99_ms"], "auto"), fmt(cold["get_p99_ms"], "auto"),
                    fmt(ratio(cold["get_p99_ms"], alone and alone["get_p99_ms"]), 1) + "×",
                    fmt(cold["gzip_p99_ms"], "auto")])
    return table(["config", "warm flood MB/s", "cold flood MB/s", "cold/warm",
                  "GET p99 warm ms", "GET p99 cold ms", "GET inflation cold",
                  "gzip p99 cold ms"], out)


def throughput_table(rows):
    labels = list(dict.fromkeys(r["label"] for r in rows))
    out = []
    for label in labels:
        cells = [label]
        for path, conns in THROUGHPUT_TESTS:
            sel = [r for r in rows if r["label"] == label and r["path"] == path
                   and r["conns"] == conns]
            key = "req_s" if path == "/1k.bin" else "mb_s"
            cells.append(fmt(med(sel, key), 0))
        out.append(cells)
    return table(["config", "1 KiB -c1 req/s", "1 KiB -c10 req/s",
                  "16 MiB -c1 MB/s", "16 MiB -c10 MB/s"], out)


# ---- plots ---------------------------------------------------------------------

def size_bytes(p):
    if p == "whole":
        return 64 * MiB  # drawn one step right of 16m, labelled "whole"
    units = {"k": 1024, "m": MiB}
    return int(p[:-1]) * units[p[-1]] if p[-1] in units else int(p)


def plot(args, out, rows):
    if not shutil.which("gnuplot"):
        warn("gnuplot not installed: no plots (apt-get install gnuplot-nox)")
        return []
    labels, s = clog_summary(rows)
    parts = [r for r in dict.fromkeys(r["partition"] for r in rows if r["kind"] == "unclog")]
    parts.sort(key=size_bytes)
    dat = os.path.join(out, f"{args.mode}-sweep.dat")
    cols = ["x", "alone_get_p99", "warm_get_p99", "warm_gzip_p99", "cold_get_p99",
            "cold_gzip_p99", "warm_flood_mb_s", "cold_flood_mb_s"]
    with open(dat, "w") as f:
        f.write("# unclog partition sweep, medians over rounds; x = partition bytes"
                " (whole drawn at 64 MiB)\n# " + " ".join(cols) + " label\n")
        for p in parts:
            g = lambda ph, k: s.get((f"unclog {p}", ph), {}).get(k)
            vals = [size_bytes(p), g("alone", "get_p99_ms"), g("warm", "get_p99_ms"),
                    g("warm", "gzip_p99_ms"), g("cold", "get_p99_ms"), g("cold", "gzip_p99_ms"),
                    g("warm", "flood_mb_s"), g("cold", "flood_mb_s")]
            f.write(" ".join("NaN" if v is None else f"{v:g}" for v in vals) + f" {p}\n")
    xtics = ", ".join(f'"{p}" {size_bytes(p)}' for p in parts)
    xrange = f"{size_bytes(parts[0]) / 1.3:g}:{size_bytes(parts[-1]) * 1.3:g}" if parts else "*:*"
    common = f"""set terminal svg size 900,640 dynamic font "Helvetica,16" background "white"
set border 3
set tics nomirror
set grid ytics lc rgb "#dddddd"
set key below
set logscale x 2
set xrange [{xrange}]
set xtics ({xtics}) font ",13"
set xlabel "partition (bytes per threadpool read)"
set datafile missing "NaN"
"""
    # Peers have no partition: each one's warm GET p99 is a flat reference line.
    colors = ["#e69f00", "#cc79a7", "#0072b2", "#8c564b", "#17becf"]
    peer_lines = ""
    for i, label in enumerate(x for x in labels if not x.startswith("unclog ")):
        v = s.get((label, "warm"), {}).get("get_p99_ms")
        if v is not None:
            peer_lines += (f', \\\n     {v:g} with lines lw 1.5 lc rgb "{colors[i % len(colors)]}"'
                           f' title "{label}: GET p99, flood"')
    made = []
    p99 = os.path.join(out, f"{args.mode}-p99-vs-partition.svg")
    gp = common + f"""set output "{p99}"
set title "Small-request p99 latency under a 10-connection 16 MiB flood"
set ylabel "probe p99 latency (ms)"
set logscale y
plot "{dat}" using 1:3 with linespoints lw 3 pt 7 ps 1.2 title "GET 1 KiB, flood (warm cache)", \\
     "{dat}" using 1:4 with linespoints lw 3 pt 5 ps 1.2 title "POST /gzip 1 KiB, flood (warm)", \\
     "{dat}" using 1:5 with linespoints lw 3 pt 9 ps 1.2 lc rgb "#e51e10" title "GET 1 KiB, flood (cold cache)", \\
     "{dat}" using 1:2 with linespoints lw 2 pt 13 ps 1.0 lc rgb "#888888" title "GET 1 KiB, no flood"{peer_lines}
"""
    made += run_gnuplot(gp, p99)
    mbs = os.path.join(out, f"{args.mode}-flood-vs-partition.svg")
    gp = common + f"""set output "{mbs}"
set title "Flood throughput (10 connections x 16 MiB files)"
set ylabel "flood MB/s"
set yrange [0:*]
plot "{dat}" using 1:7 with linespoints lw 3 pt 7 ps 1.2 title "warm page cache", \\
     "{dat}" using 1:8 with linespoints lw 3 pt 5 ps 1.2 title "cold (evicted)"
"""
    made += run_gnuplot(gp, mbs)
    # Latency over time: round 1, warm flood, GET probe, whole vs 64k.
    series = []
    for p in ("whole", "64k"):
        row = next((r for r in rows if r["label"] == f"unclog {p}" and r["phase"] == "warm"), None)
        if row:
            src = os.path.join(out, row["series"])
            dst = os.path.join(out, f"{args.mode}-series-{p}.csv")
            if os.path.exists(src):
                shutil.copyfile(src, dst)
                series.append((p, dst))
    if series:
        ts = os.path.join(out, f"{args.mode}-latency-over-time.svg")
        lines = ", \\\n     ".join(
            f'"{dst}" using 1:(strcol(3) eq "ok" ? $2 : NaN) with lines lw 1.5 '
            f'title "partition = {p}"' for p, dst in series)
        gp = f"""set terminal svg size 900,540 dynamic font "Helvetica,16" background "white"
set output "{ts}"
set datafile missing "NaN"
set datafile separator ","
set border 3
set tics nomirror
set grid ytics lc rgb "#dddddd"
set key below
set title "GET 1 KiB latency, one request every {1000 / args.rate:g} ms, during the flood"
set xlabel "scheduled send time (s)"
set ylabel "latency (ms)"
set logscale y
plot {lines}
"""
        made += run_gnuplot(gp, ts)
    return made


def run_gnuplot(script, target):
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0 or not os.path.exists(target):
        warn(f"gnuplot failed for {os.path.basename(target)}: {r.stderr.strip()[:300]}")
        return []
    return [target]


# ---- environment record ---------------------------------------------------------

def cmd_out(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def environment(args, cfg):
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
        cpu = m.group(1) if m else cpu
    osname = ""
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            m = re.search(r'^PRETTY_NAME="?(.*?)"?$', f.read(), re.M)
            osname = m.group(1) if m else ""
    gov = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    with open("/proc/meminfo") as f:
        mem = f.readline().split()[1]
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpu": f"{cpu} × {os.cpu_count()}",
        "memory": f"{int(mem) // 1024} MiB",
        "os": osname,
        "kernel": os.uname().release,
        "cpu governor": open(gov).read().strip() if os.path.exists(gov) else "n/a",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "pinning": "server on CPU 0, wrk/probe/evictor on CPU 1" if "taskset" in pin(0)
        else "none (1 CPU)",
        "priority": f"nice {args.nice} for every process started",
        "unclog": cmd_out([args.unclog, "--version"]),
        "unclog commit": cmd_out(["git", "-C", TOP, "describe", "--always", "--dirty"]),
        "libuv": cmd_out(["pkg-config", "--modversion", "libuv"]),
        "zlib": cmd_out(["pkg-config", "--modversion", "zlib"]),
        "llhttp": cmd_out(["dpkg-query", "-W", "-f=${Version}", "node-llhttp"]),
        "cc": cmd_out(["cc", "--version"]),
        "wrk": cmd_out(["wrk", "-v"]),
        "nginx": cmd_out(["nginx", "-v"]),
        "node": cmd_out(["node", "--version"]),
        "gnuplot": cmd_out(["gnuplot", "--version"]),
        "settings": json.dumps(cfg) + "; unclog --threads 4" +
        ("" if args.mode == "bench" else
         f"; probe rate {args.rate:g}/s each (GET 1 KiB, POST /gzip 1 KiB)"),
    }
    return info


def env_table(info):
    return table(["what", "value"], [[k, str(v).replace("|", "/")] for k, v in info.items()])


# ---- bench --------------------------------------------------------------------

BENCH = [  # (title, path, metric, server A, server B): the ratio is A ÷ B
    ("1 KiB, wrk -c10, req/s (defaults: small-file cache on)", "/1k.bin", "req_s",
     "unclog 64k +cache", "nginx sendfile"),
    ("1 KiB, wrk -c10, req/s: every read through the pool", "/1k.bin", "req_s",
     "unclog 64k", "nginx sendfile"),
    ("16 MiB, wrk -c10, MB/s: whole vs sendfile", "/16m.bin", "mb_s",
     "unclog whole", "nginx sendfile"),
    ("16 MiB, wrk -c10, MB/s: 64k vs aio 2x64k", "/16m.bin", "mb_s",
     "unclog 64k", "nginx aio 2x64k"),
    ("1 KiB, wrk -c10, req/s: workers 2 vs 1 (defaults: cache on), not pinned", "/1k.bin",
     "req_s", "unclog 64k +cache workers 2 (not pinned)",
     "unclog 64k +cache workers 1 (not pinned)"),
]


def run_bench(args, cfg, out, tmp):
    # The workers row pins nothing: on CPU 0 a second worker has no core of its own.
    servers = {s.label: s for s in [
        Unclog(args.unclog, "64k", cache=True), Unclog(args.unclog, "64k"),
        Unclog(args.unclog, "whole"), Nginx("sendfile"), Nginx("aio 2x64k"),
        Unclog(args.unclog, "64k", cache=True, workers=2, pinned=False),
        Unclog(args.unclog, "64k", cache=True, workers=1, pinned=False)]}
    tests = {}  # label -> [(path, conns)]
    for _, path, _, a, b in BENCH:
        for label in (a, b):
            tests.setdefault(label, [])
            if (path, 10) not in tests[label]:
                tests[label].append((path, 10))
    rows = []
    order = list(servers)
    for r in range(1, cfg["rounds"] + 1):
        for label in rotate(order, r - 1):
            server = servers[label]
            log(f"  bench round {r}/{cfg['rounds']}: {label}")
            server.start(tmp, f"bench-{slug(label)}-r{r}")
            try:
                check(server)
                wrk_rows(server, r, tests[label], cfg["bench"], rows)
            finally:
                server.stop()
    write_csv(os.path.join(out, "bench.csv"), TP_FIELDS,
              [{**row, "req_s": f"{row['req_s']:.1f}", "mb_s": f"{row['mb_s']:.1f}"} for row in rows])
    out_rows = []
    for title, path, metric, a, b in BENCH:
        u = med([x for x in rows if x["label"] == a and x["path"] == path], metric)
        n = med([x for x in rows if x["label"] == b and x["path"] == path], metric)
        per = lambda lab: " / ".join(fmt(x[metric], 0) for x in rows
                                     if x["label"] == lab and x["path"] == path)
        out_rows.append([title, a, fmt(u, 0), b, fmt(n, 0), fmt(ratio(u, n), 2),
                         f"{per(a)} vs {per(b)}"])
    return table(["test", "A", "median", "B", "median", "A ÷ B", "per round (A vs B)"],
                 out_rows) + ("\nA ÷ B above 1: A is faster. Not pinned: neither the server nor "
                              "wrk is pinned (other rows: server on CPU 0, wrk on CPU 1).\n")


# ---- main ---------------------------------------------------------------------

def latest_results():
    base = os.path.join(HERE, "results")
    dirs = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
    return os.path.join(base, dirs[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=list(MODES))
    ap.add_argument("--unclog", default=os.path.join(TOP, "build", "unclog"))
    ap.add_argument("--probe", default=os.path.join(TOP, "build", "probe"))
    ap.add_argument("--out", help="results directory (default loadtest/results/DATE-HOST)")
    ap.add_argument("--rounds", type=int, help="override the mode's rounds")
    ap.add_argument("--partitions", help="comma-separated partitions, e.g. 4k,64k,whole")
    ap.add_argument("--rate", type=float, default=None, help="probe requests/s (each probe)")
    ap.add_argument("--no-peers", action="store_true", help="skip nginx and Node.js")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache variant")
    ap.add_argument("--nice", type=int, default=-10 if os.geteuid() == 0 else 0,
                    help="nice value for everything started (default -10 as root, else 0)")
    ap.add_argument("--replot", action="store_true",
                    help="redraw the plots from the results directory's MODE-clog.csv")
    args = ap.parse_args()
    cfg = dict(MODES[args.mode])
    if args.rounds:
        cfg["rounds"] = args.rounds
        cfg["throughput_rounds"] = min(cfg.get("throughput_rounds", 1), args.rounds)
    if args.partitions:
        cfg["partitions"] = args.partitions.split(",")
    if args.no_peers:
        cfg["peers"] = False
    if args.no_cold:
        cfg["cold"] = False
    args.rate = args.rate or cfg.get("rate", 200)
    for tool in ["wrk"] + (["nginx"] if args.mode == "bench" else []):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} not found: apt-get install wrk gnuplot-nox nginx-light")
    os.environ["PATH"] += os.pathsep + "/usr/sbin"
    for exe in (args.unclog, args.probe):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} missing: run make {os.path.relpath(exe, TOP)}")

    if args.replot:
        out = args.out or latest_results()
        with open(os.path.join(out, f"{args.mode}-clog.csv")) as f:
            rows = list(csv.DictReader(f))
        args.rate = args.rate or float(MODES[args.mode].get("rate", 200))
        for p in plot(args, out, rows):
            log(f"written: {p}")
        return
    if args.nice:
        NICE[:] = ["nice", "-n", str(args.nice)]
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", f"{day}-{socket.gethostname()}")
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    started = time.time()
    log(f"unclog load test, mode {args.mode}; results in {os.path.relpath(out, TOP)}")
    make_fixtures()
    info = environment(args, cfg)
    report = [f"# unclog load test: {args.mode}\n",
              "Medians over rounds; configurations alternated round by round. "
              "See loadtest/README.md for what each column means.\n",
              "## Environment\n", env_table(info)]
    try:
        if args.mode == "bench":
            cfg.pop("partitions", None)
            tbl = run_bench(args, cfg, out, tmp)
            report += ["## Bench: unclog vs nginx, and unclog workers 2 vs 1\n", tbl]
            name = "bench.md"
        else:
            unclogs = [Unclog(args.unclog, p) for p in cfg["partitions"]]
            if args.mode == "full" and "whole" in cfg["partitions"]:
                # One-shot reads, but small files served from memory: the GET
                # probe leaves the pool, the gzip probe still queues on it.
                unclogs.append(Unclog(args.unclog, "whole", cache=True))
            others = peers() if cfg["peers"] else []
            log("throughput (scenario 1)")
            tp_servers = [u for u in unclogs if u.partition in ("64k", "whole")] or unclogs[:1]
            tp = run_throughput(args, cfg, tp_servers + others, out, tmp)
            report += ["## 1. Throughput (wrk, warm cache)\n",
                       "1 KiB in requests/s, 16 MiB in MB/s (10^6 bytes/s).\n",
                       throughput_table(tp)]
            log("clogging (scenario 2" + (", and 3: cold" if cfg["cold"] else "") + ")")
            rows = run_clog(args, cfg, unclogs + others, out, tmp)
            report += ["## 2. Clogging (warm page cache)\n",
                       f"Flood: wrk, 10 connections looping GET over {FLOOD_FILES} distinct "
                       f"16 MiB files. Probes: GET /1k.bin and POST /gzip (1 KiB body), "
                       f"{args.rate:g} req/s each, latency from the scheduled send time. "
                       "Inflation = probe p99 under the flood ÷ probe p99 with no flood "
                       "(medians). unclog rows set partition = gzip_partition = the value shown.\n",
                       clog_table(rows, "warm")]
            if cfg["cold"]:
                report += ["## 3. Cold: the same flood, its files evicted from the page cache\n",
                           "posix_fadvise(POSIX_FADV_DONTNEED) on the flood's files every 50 ms "
                           "during the run (`probe --evict`).\n",
                           cold_table(rows), "\nThe cold run's probe figures in full:\n\n",
                           clog_table(rows, "cold")]
            plots = plot(args, out, rows)
            if plots:
                report += ["## Plots\n"] + [f"![{os.path.basename(p)}]({os.path.basename(p)})\n"
                                            for p in plots]
            name = f"{args.mode}.md"
    finally:
        stop_all()
    if WARNINGS:
        report += ["## Warnings\n"] + [f"- {w}\n" for w in dict.fromkeys(WARNINGS)]
    report.append(f"\n_Run took {time.time() - started:.0f} s._\n")
    path = os.path.join(out, name)
    with open(path, "w") as f:
        f.write("\n".join(report))
    log("")
    log("\n".join(report[4:]))
    log(f"written: {os.path.relpath(path, TOP)}")


if __name__ == "__main__":
    main()
