#!/usr/bin/env python3
# make demo (loadtest/demo.py): it serves the dashboard, prints the URL and a
# line a second, and stops everything it started, by PID, with status 0 —
# at the end of --duration and on SIGINT mid-run — with wrk and with the
# probe's own flood (--no-wrk); --script switches the settings live and
# prints its tables. Also build/probe --flood on its own.
#
# Needs build/probe (make test builds it); never compiles.
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from harness import BIN, SLOW, MiB, REPO, Server, is_, like, ok, poll, run, skip_test

DEMO = os.path.join(REPO, "loadtest", "demo.py")
PROBE = os.path.join(REPO, "build", "probe")
LINE = re.compile(r"^ *\d+ s  \S", re.M)  # one per-second line


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def descendants(pid):
    """Every live process under pid, from /proc (PPid of each)."""
    parents = {}
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                parents[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found.update(kids)
        todo += kids
    return found


class Demo:
    """loadtest/demo.py in a temp docroot on a free port, its output collected."""

    def __init__(self, root, *args):
        self.port = free_port()
        cmd = [sys.executable, DEMO, "--port", str(self.port), "--dir", root,
               "--flood-size", "1m", "--connections", "2", "--rate", "50",
               "--unclog", BIN, "--probe", PROBE, *args]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
        self.out = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.out += line

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        return self.proc.returncode

    def pids(self):
        return [int(p) for p in re.findall(r"pid (\d+)", self.out)]

    def check(self, what, rc, flood):
        is_(rc, 0, what + ": exit status 0")
        like(self.out, r"Dashboard: http://127\.0\.0\.1:%d/\.unclog/dashboard" % self.port,
             what + ": printed the dashboard URL")
        like(self.out, r"started: unclog pid \d+, %s pid \d+, probe pid \d+" % re.escape(flood),
             what + ": printed the PIDs it started (flood: %s)" % flood)
        like(self.out, r"stopped: .*\(exit status 0\)", what + ": the server exited 0")
        pids = self.pids()
        is_(len(pids), 3, what + ": three processes started")
        left = [p for p in pids if alive(p)]
        is_(left, [], what + ": none of them is left")


def dashboard_served(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /.unclog/dashboard HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk
    except OSError as e:
        return str(e).encode()


def check_duration(root):
    flood = "wrk" if shutil.which("wrk") else "probe --flood"
    demo = Demo(root, "--duration", "4")
    ok(poll(lambda: "Dashboard:" in demo.out, timeout=15), "--duration 4: the demo starts")
    like(dashboard_served(demo.port).decode("utf-8", "replace"), r"^HTTP/1\.1 200",
         "--duration 4: the dashboard is served at the URL printed")
    rc = demo.wait(20)
    demo.check("--duration 4", rc, flood)
    ok(len(LINE.findall(demo.out)) >= 3, "--duration 4: a line a second", demo.out)
    like(demo.out, r"(?m)^ *\d+ s  whole fifo +[\d.]+ +[\d.]+ +[\d.]+ +[\d,]+",
         "--duration 4: lines show the setting, the probe's p50/p99, the server's p99, MB/s")


def check_sigint(root):
    demo = Demo(root, "--no-wrk")
    ok(poll(lambda: len(LINE.findall(demo.out)) >= 2, timeout=15), "SIGINT: lines before it")
    under = descendants(demo.proc.pid)
    pids = demo.pids()
    ok(set(pids) <= under, "SIGINT: the PIDs it printed are its children",
       "printed %r, under it %r" % (pids, sorted(under)))
    demo.proc.send_signal(signal.SIGINT)
    rc = demo.wait(15)
    demo.check("SIGINT", rc, "probe --flood")
    is_([p for p in under if alive(p)], [], "SIGINT: nothing it started is left (/proc)")


def check_script(root):
    demo = Demo(root, "--no-wrk", "--script", "--phase", "1.5")
    rc = demo.wait(30)
    demo.check("--script", rc, "probe --flood")
    for body in ("partition=64k", "partition=whole", "scheduler=fair&partition=auto"):
        like(demo.out, r"POST /settings %s: 200 in" % re.escape(body),
             "--script: POST /settings %s answered 200" % body)
    like(demo.out, r"(?m)^ *\d+ s  64k fifo ", "--script: the lines show the new setting")
    rows = re.findall(r"(?m)^\| (whole \+ fifo|64k|whole|fair \+ auto) \| [\d.]+ \|", demo.out)
    is_(rows, ["whole + fifo", "64k", "whole", "fair + auto"], "--script: a row per phase")
    is_(len(re.findall(r"(?m)^\| .* → .* \| .* \| .* \| .* \|$", demo.out)), 3,
        "--script: a row per switch")


def check_probe_flood():
    srv = Server(files={"big.bin": os.urandom(MiB)}, name="flood target").start()
    out = subprocess.run([PROBE, "--port", str(srv.port), "--flood", "3", "--get", "/big.bin",
                          "--duration", "2", "--every", "0.2"],
                         capture_output=True, text=True, timeout=10 * SLOW)
    is_(out.returncode, 0, "probe --flood: exit status 0")
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    final = lines[-1] if lines else {}
    is_((final.get("mode"), final.get("conns"), final.get("errors")), ("flood", 3, 0),
        "probe --flood: its summary")
    ok(final.get("requests", 0) > 3 and final.get("bytes", 0) >= final["requests"] * MiB,
       "probe --flood: whole responses, back to back, bytes counted", out.stdout)
    every = [l for l in lines if "t" in l]
    ok(len(every) >= 2 and sum(l["bytes"] for l in every) == final.get("bytes"),
       "probe --flood --every: progress lines that add up to the total", out.stdout)
    out = subprocess.run([PROBE, "--port", str(srv.port), "--flood", "1", "--get", "/nope",
                          "--duration", "%g" % SLOW], capture_output=True, text=True,
                         timeout=10 * SLOW)
    final = json.loads(out.stdout.splitlines()[-1])
    ok(final["requests"] == 0 and final["errors"] > 0, "probe --flood: a 404 is an error",
       out.stdout)
    srv.stop()


def main():
    if not os.access(PROBE, os.X_OK):
        skip_test("make demo", "build/probe missing (make build/probe)")
        return
    root = tempfile.mkdtemp(prefix="unclog-demo-")
    try:
        check_probe_flood()
        check_duration(root)
        check_sigint(root)
        check_script(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


run(main, timeout=90)
