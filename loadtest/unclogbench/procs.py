"""Every process a run starts, and the warnings it collects.

    with Processes(nice=-10) as procs:
        proc = procs.spawn(["wrk", ...], cpu=1, stdout=subprocess.PIPE)
        ...
    # here everything spawned has been stopped, also after an exception,
    # Ctrl-C (SIGINT), SIGTERM or SIGHUP

Processes are stopped by PID: SIGTERM, a grace period, then SIGKILL. Children
of a spawned process (an unclog master's workers) are stopped with it.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Warnings:
    """Anomalies worth a line in the report; each is printed once when it happens."""

    def __init__(self):
        self._seen = {}

    def add(self, msg):
        print(f"  WARNING: {msg}", file=sys.stderr, flush=True)
        self._seen[msg] = None

    def __iter__(self):
        return iter(self._seen)

    def __bool__(self):
        return bool(self._seen)


def alive(pid):
    """True while PID runs; a zombie has stopped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid):
    """The PIDs of PID's child processes (an unclog master's workers)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Processes:
    """Spawns, tracks and stops processes; a context manager (see the module's doc)."""

    def __init__(self, nice=0, grace=5.0):
        self.nice = ["nice", "-n", str(nice)] if nice else []
        self.grace = grace
        self.can_pin = (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None
        self._running = {}  # pid -> Popen, started and not reaped
        self._old_handlers = {}

    def __enter__(self):
        for sig in SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc):
        for sig in SIGNALS:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        try:
            self.stop_all()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
        return False

    @staticmethod
    def _on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds through __exit__

    def prefix(self, cpu):
        """nice + taskset for CPU; no taskset for None or on a one-CPU machine."""
        if cpu is not None and self.can_pin:
            return self.nice + ["taskset", "-c", str(cpu)]
        return list(self.nice)

    def spawn(self, cmd, cpu=None, **popen):
        """Starts cmd (niced, and pinned to cpu) with stdin from /dev/null."""
        popen.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self.prefix(cpu) + cmd, **popen)
        self._running[proc.pid] = proc
        return proc

    def communicate(self, proc, timeout):
        """Its output once it exits by itself; on timeout it stays tracked and raises."""
        out, err = proc.communicate(timeout=timeout)
        self._running.pop(proc.pid, None)
        return out, err

    def stop(self, proc, grace=None):
        """Stops proc and its children by PID; returns (exit status, children killed)."""
        killed = self._stop([proc], self.grace if grace is None else grace)
        return proc.returncode, killed

    def stop_all(self, grace=3.0):
        """Stops everything still running (and its children)."""
        self._stop(list(self._running.values()), grace)

    def _stop(self, procs, grace):
        """SIGTERM to each, SIGKILL to those still running after grace; then their children."""
        kids = [k for p in procs for k in children(p.pid)]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._running.pop(proc.pid, None)
        return self._reap_orphans(kids, time.time() + self.grace)

    @staticmethod
    def _reap_orphans(pids, deadline):
        """Gives a stopped parent's children until deadline to exit, then SIGKILLs them."""
        while any(alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.05)
        killed = [p for p in pids if alive(p)]
        for pid in killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return killed
