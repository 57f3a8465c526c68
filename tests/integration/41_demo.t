#!/usr/bin/env python3
# make demo (loadtest/demo.py): it serves the dashboard, prints the URL and a
# line a second, and stops everything it started, by PID, with status 0 —
# at the end of --duration and on SIGINT mid-run — with wrk and with the
# probe's own flood (--no-wrk); --script switches the settings live and
# prints its tables; --act attack runs the fairness act (a hog, a small-file
# flood and a /gzip flood from 127.0.0.3, and here with --attacks the slow
# reader too, each under fifo and fair, against the victim's probe from
# 127.0.0.2) and prints its table: every row, no 503 for the victim under
# the hog, the hog refused or evicted (its own summary and /stats), the slow
# reader holding connections and refused beyond the limit, nothing left
# running; its lines in time order, within 120 columns; a taken port and a
# busy machine warned at start. Also build/probe --flood on its own, and
# the README's own command, README_DEMO, through make (59_docs.t checks
# that every command of the README is run by CI or a test).
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
README_DEMO = "make demo"  # as the README writes it
# Variables a calling make could pass down to ours.
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS")


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
        # --port 0: the server picks a free port (a port chosen here could be
        # taken by a test running beside this one before the demo binds it).
        cmd = [sys.executable, DEMO, "--port", "0", "--dir", root,
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

    @property
    def port(self):
        """The server's port, from the dashboard URL the demo printed (None before it)."""
        m = re.search(r"Dashboard: http://127\.0\.0\.1:(\d+)/", self.out)
        return int(m[1]) if m else None

    def pids(self):
        return [int(p) for p in re.findall(r"pid (\d+)", self.out)]

    def check(self, what, rc, flood):
        is_(rc, 0, what + ": exit status 0")
        like(self.out, r"Dashboard: http://127\.0\.0\.1:\d+/\.unclog/dashboard",
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
    secs = [float(t) for t in re.findall(r"(?m)^ *(\d+) s  \S", demo.out)]
    ok(all(a < b for a, b in zip(secs, secs[1:])), "--duration 4: its seconds in order, none twice",
       demo.out)
    like(demo.out, r"(?m)^ *\d+ s  whole fifo +[\d.,]+ +[\d.,]+ +[\d.,]+ +[\d,]+",
         "--duration 4: lines show the setting, the probe's p50/p99, the server's p99, MB/s")


def check_make_demo(root):
    """README_DEMO as make runs it, DEMO_ARGS keeping it short and on a free port."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    make = ["make", "-s", "--no-print-directory", "-C", REPO]
    if subprocess.run(make + ["-q", "build/unclog", "build/probe"], env=env,
                      stdin=subprocess.DEVNULL).returncode != 0:
        skip_test("the README's make demo",
                  "build/unclog or build/probe is not up to date (this test never compiles)")
        return
    args = ("--port 0 --dir %s --flood-size 1m --connections 2 --rate 50 --duration 2 --no-wrk"
            % root)
    proc = subprocess.run(make + README_DEMO.split()[1:] + ["DEMO_ARGS=" + args], env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    ok(proc.returncode == 0, "the README's %s: exit status 0" % README_DEMO, proc.stdout)
    like(proc.stdout, r"Dashboard: http://127\.0\.0\.1:\d+/\.unclog/dashboard",
         "  it printed the dashboard URL")
    like(proc.stdout, r"stopped: .*\(exit status 0\)", "  the server exited 0")


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
    rows = re.findall(r"(?m)^\| (whole \+ fifo|64k|whole|fair \+ auto) \| [\d.,]+ \|", demo.out)
    is_(rows, ["whole + fifo", "64k", "whole", "fair + auto"], "--script: a row per phase")
    is_(len(re.findall(r"(?m)^\| .* → .* \| .* \| .* \| .* \|$", demo.out)), 3,
        "--script: a row per switch")


ATTACK_ROWS = [(a, s) for a in ("hog", "files", "gzip", "reader") for s in ("fifo", "fair")]


def check_attack(root):
    demo = Demo(root, "--act", "attack", "--phase", "2", "--attack-files", "300",
                "--max-connections", "96", "--hog", "192", "--rate", "20",
                "--attacks", "hog,files,gzip,reader")
    rc = demo.wait(90 * SLOW)
    is_(rc, 0, "--act attack: exit status 0")
    like(demo.out, r"Dashboard: http://127\.0\.0\.1:\d+/\.unclog/dashboard",
         "--act attack: printed the dashboard URL")
    like(demo.out, r"started: unclog pid \d+\n",
         "--act attack: printed the PIDs it started")
    like(demo.out, r"stopped: .*\(exit status 0\)", "--act attack: the server exited 0")
    pids = demo.pids()
    is_(len(pids), 1 + 2 * len(ATTACK_ROWS),
        "--act attack: the server, and a victim and an attacker a step")
    is_([p for p in pids if alive(p)], [], "--act attack: none of them is left")
    rows = re.findall(r"(?m)^\| (hog|files|gzip|reader) \| (fifo|fair) \| ", demo.out)
    is_(rows, ATTACK_ROWS, "--act attack: the table has a row per attack and scheduler")
    like(demo.out, r"(?m)^ *\d+ s  hog · fair +\S+ +\S+ +\d+ ",
         "--act attack: lines a second name the step")
    wide = [line for line in demo.out.splitlines() if len(line) > 120 and "WARNING" not in line]
    ok(not wide, "--act attack: no line wider than 120 columns", "\n".join(wide[:3]))
    try:
        with open(os.path.join(root, "attack.json")) as f:
            steps = {(s["attack"], s["scheduler"]): s for s in json.load(f)["steps"]}
    except (OSError, ValueError, KeyError) as e:
        ok(False, "--act attack: attack.json", str(e))
        return
    is_(sorted(steps), sorted(ATTACK_ROWS), "--act attack: attack.json has every step")
    for key in ATTACK_ROWS:
        step = steps.get(key, {})
        # What a loaded machine answers in 2 s varies; that each step had both does not.
        ok(step.get("victim", {}).get("requests", 0) > 0 and "mode" in step.get("attacker", {}),
           "--act attack: %s · %s: the victim's requests and the attacker's summary" % key,
           repr(step))
    for sched in ("fifo", "fair"):
        hog = steps.get(("hog", sched), {})
        is_(hog.get("victim", {}).get("refused"), 0,
            "--act attack: hog · %s: no 503 for the victim" % sched)
        att, srv = hog.get("attacker", {}), hog.get("server", {})
        ok(att.get("refused", 0) + att.get("server_closed", 0) > 0,
           "--act attack: hog · %s: the hog's own summary counts 503s or closes" % sched,
           repr(att))
        ok((srv.get("refused_top_client") or 0) + (srv.get("evicted") or 0) > 0,
           "--act attack: hog · %s: /stats counts its refusals or evictions" % sched, repr(srv))
        ok((hog.get("top_client") or {}).get("client") == "127.0.0.3",
           "--act attack: hog · %s: the attacker was the top client" % sched, repr(hog))
        reader = steps.get(("reader", sched), {})
        is_(reader.get("attacker", {}).get("mode"), "slow-read",
            "--act attack: reader · %s: slow.py's summary" % sched)
        ok(reader.get("attacker", {}).get("held_mean", 0) > 0
           and (reader.get("server", {}).get("refused_top_client") or 0) > 0,
           "--act attack: reader · %s: it held connections, and those beyond the limit were "
           "refused as the top client's" % sched, repr(reader))


def check_attack_sigint(root):
    demo = Demo(root, "--act", "attack", "--phase", "2", "--attack-files", "300",
                "--max-connections", "96", "--hog", "192", "--rate", "20")
    ok(poll(lambda: re.search(r"victim starts \(pid \d+", demo.out) and
            len(LINE.findall(demo.out)) >= 2, timeout=30 * SLOW),
       "--act attack, SIGINT: an attack under way before it", demo.out)
    under = descendants(demo.proc.pid)
    demo.proc.send_signal(signal.SIGINT)
    is_(demo.wait(20 * SLOW), 0, "--act attack, SIGINT: exit status 0")
    like(demo.out, r"stopped: .*\(exit status 0\)", "--act attack, SIGINT: the server exited 0")
    is_([p for p in demo.pids() if alive(p)], [], "--act attack, SIGINT: none it printed is left")
    is_([p for p in under if alive(p)], [], "--act attack, SIGINT: nothing it started is left")


def check_warnings(root):
    """A taken port and a busy machine are said at start, before anything runs."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        cmd = [sys.executable, DEMO, "--port", str(port), "--dir", root, "--flood-size", "1m",
               "--connections", "1", "--rate", "20", "--duration", "1", "--no-wrk",
               "--unclog", BIN, "--probe", PROBE]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60 * SLOW, cwd=REPO,
                             env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    finally:
        for p in spin:
            p.kill()
            p.wait()
        taken.close()
    text = out.stdout + out.stderr
    is_(out.returncode, 0, "a taken port: the demo still runs, elsewhere")
    like(text, r"WARNING: port %d is taken .*the demo uses \d+" % port,
         "a taken port: a warning names it and the port used instead")
    like(text, r"WARNING: the machine is busy before the demo starts \(\d+%",
         "two processes spinning: a warning that the machine is busy")


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
        check_make_demo(root)
        check_warnings(root)
        check_sigint(root)
        check_script(root)
        check_attack(root)
        check_attack_sigint(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


run(main, timeout=180)
