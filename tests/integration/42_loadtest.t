#!/usr/bin/env python3
# make loadtest SHORT=1, the load test's one-minute form (loadtest/README.md):
# the knob reaches loadtest/run.py as its short mode (and without it, or
# with SHORT=0, make loadtest stays the quick pass), and the short mode,
# cut here to its clogging part on one configuration, writes its report, its
# CSV and (with gnuplot) its plots into the --out directory and leaves
# nothing it started running (the test is the subreaper of what run.py
# leaves behind). Needs wrk for the run; never compiles.
# And --attackers N (issue 39): every attack shape of scenario 4 is started
# from 127.0.1.1 ... 127.0.1.N by one process, its connections taking the
# addresses in turn (the commands run.py would run, recorded, not run),
# slow.py's and build/probe's connections really come from the addresses
# they are given, and run.py refuses --attackers 0.
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from harness import BIN, REPO, is_, like, note, ok, run, skip_test

RUN_PY = os.path.join(REPO, "loadtest", "run.py")
PROBE = os.path.join(REPO, "build", "probe")
# Variables a calling make could pass down to ours.
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS", "SHORT")
PR_SET_CHILD_SUBREAPER = 36


def make_n(*args):
    """The command `make -n loadtest ARGS` would run for the load test itself."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV}
    p = subprocess.run(["make", "-n", "--no-print-directory", "loadtest", *args], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=60)
    lines = [line for line in p.stdout.splitlines() if "loadtest/run.py" in line]
    return p.returncode, lines[-1] if lines else p.stdout + p.stderr


def check_knob():
    for args, mode in ((["SHORT=1"], "short"), ([], "quick"), (["SHORT=0"], "quick")):
        rc, cmd = make_n(*args)
        is_(rc, 0, "make -n loadtest %s exits 0" % " ".join(args))
        like(cmd, r"^python3 loadtest/run\.py %s(\s|$)" % mode,
             "make loadtest %s runs run.py %s" % (" ".join(args), mode))


def children():
    """Every live process whose parent is this one (the orphans of run.py land here)."""
    kids = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            kids.append(int(d))
    return kids


def check_short_run():
    if not shutil.which("wrk"):
        skip_test("run.py short", "wrk not installed (make loadtest-deps)")
        return
    if not os.access(PROBE, os.X_OK):
        skip_test("run.py short", "build/probe missing (make build/probe)")
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    out = tempfile.mkdtemp(prefix="unclog-loadtest-")
    try:
        cmd = [sys.executable, RUN_PY, "short", "--out", out, "--only", "clog",
               "--partitions", "whole", "--fair", "", "--nice", "0",
               "--unclog", BIN, "--probe", PROBE]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
        ok(p.returncode == 0, "run.py short exits 0 (%s)" % p.returncode, p.stdout[-3000:],
           p.stderr[-3000:])
        report = os.path.join(out, "short-clog.md")
        ok(os.path.isfile(report), "run.py short wrote short-clog.md", sorted(os.listdir(out)))
        text = open(report).read() if os.path.isfile(report) else ""
        like(text, r"^# unclog load test: short", "the report is the short mode's")
        like(text, r'"attack_victim": 2, "attack_peers": \[\], "attacks": \["hog"\]',
             "its settings are the short mode's")
        like(text, r"\| unclog whole \| [\d.]+ \|", "the clogging table has its row")
        like(text, r"_Run took \d+ s\._", "the report ends with the run's time")
        with open(os.path.join(out, "short-clog.csv")) as f:
            rows = f.read().splitlines()
        is_(len(rows), 3, "short-clog.csv: a header, the alone and the warm phases")
        if shutil.which("gnuplot"):
            plots = {"short-%s.svg" % p for p in ("p99-vs-partition", "flood-vs-partition",
                                                  "frontier", "latency-over-time")}
            is_(sorted(plots - set(os.listdir(out))), [], "run.py short drew its four plots")
        else:
            skip_test("run.py short drew its four plots", "gnuplot not installed")
        left = children()
        is_(left, [], "run.py short left nothing running")
        for pid in left:  # by PID, what it should have stopped
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        shutil.rmtree(out, ignore_errors=True)


class Recorder:
    """A session whose processes are recorded, not started."""

    def __init__(self, attackers):
        self.settings = {"attackers": attackers}
        self.probe, self.cmds = "probe", []
        self.procs = self

    def spawn(self, cmd, **_):
        self.cmds.append(cmd)


def arg(cmd, name):
    return cmd[cmd.index(name) + 1] if name in cmd else None


def check_attackers_reach_shapes():
    sys.path.insert(0, os.path.join(REPO, "loadtest"))
    from unclogbench import attacks

    class Server:
        port = 1

        class config:
            server = "unclog"

    for attack in attacks.ATTACKS:
        one, two = Recorder(1), Recorder(2)
        attacks.start_attacker(one, Server, attack, 1.0)
        attacks.start_attacker(two, Server, attack, 1.0)
        is_([arg(c, "--from") for c in one.cmds], ["127.0.0.1"],
            "%s: --attackers 1 attacks from 127.0.0.1" % attack.name)
        # One process from both: as many connections as from one address,
        # and no more load on the load generator's CPU.
        is_([arg(c, "--from") for c in two.cmds], ["127.0.1.1,127.0.1.2"],
            "%s: --attackers 2: one process from both addresses" % attack.name)
        is_([c[:c.index("--from")] for c in two.cmds], [c[:c.index("--from")] for c in one.cmds],
            "%s: the same attack as from one address" % attack.name)
    ok(any(a.name == "stalled" and a.slow and a.victim == "bulk" for a in attacks.ATTACKS),
       "the stalled shape: slow readers against a downloading victim")
    p = subprocess.run([sys.executable, RUN_PY, "full", "--attackers", "0"],
                       capture_output=True, text=True, timeout=60)
    ok(p.returncode != 0 and "--attackers" in p.stderr, "run.py refuses --attackers 0",
       p.stderr)


def check_binds_addresses(name, cmd):
    """CMD (its port last) --from 127.0.1.1,127.0.1.2 with 4 connections: the
    listener sees half of them from each."""
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(64)
    lsn.settimeout(10)
    slow = subprocess.Popen(cmd + [str(lsn.getsockname()[1])], stdout=subprocess.PIPE, text=True)
    held, peers = [], []
    try:
        for _ in range(4):
            c, (addr, _) = lsn.accept()
            held.append(c)
            peers.append(addr)
        out, _ = slow.communicate(timeout=30)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
        for c in held + [lsn]:
            c.close()
    is_(sorted(peers), ["127.0.1.1", "127.0.1.1", "127.0.1.2", "127.0.1.2"],
        "%s --from 127.0.1.1,127.0.1.2: two connections from each" % name)
    like(out, r'"conns_opened": ?4\b', "%s opened its 4 connections once each" % name)


def check_slow_binds_addresses():
    check_binds_addresses("slow.py", [
        sys.executable, os.path.join(REPO, "loadtest", "unclogbench", "slow.py"),
        "--shape", "head", "--from", "127.0.1.1,127.0.1.2", "--conns", "4",
        "--interval", "0.2", "--duration", "1.5", "--port"])
    probe = os.path.join(REPO, "build", "probe")
    if not os.access(probe, os.X_OK):
        note("build/probe not built (make build/probe): its --from not checked")
        return
    check_binds_addresses("build/probe", [
        probe, "--get", "/1k.bin", "--hog", "4", "--hog-silent", "--duration", "1.5",
        "--from", "127.0.1.1,127.0.1.2", "--port"])


def main():
    check_knob()
    check_attackers_reach_shapes()
    check_slow_binds_addresses()
    check_short_run()


run(main, timeout=240)
