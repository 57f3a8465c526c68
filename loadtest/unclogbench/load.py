"""What makes load: fixtures, wrk, the constant-rate probe and the page-cache evictor.

Each tool is started pinned to CPU 1 (unless told otherwise) and finished
into a plain record: WrkResult, ProbeResult, EvictResult.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys

from . import FIXTURES, HERE, MiB, PKG, log

FLOOD = [f"/flood/16m-{i:02d}.bin" for i in range(10)]  # the flood's distinct files
SIZES = {"/1k.bin": 1024, "/96k.bin": 96 * 1024, "/1m.bin": MiB, "/16m.bin": 16 * MiB,
         **{p: 16 * MiB for p in FLOOD}}
SMALL_FILES, SMALL_SIZE = 20000, 8192  # the small-file flood's files: /small/0.bin ...
SMALL = "/small/*.bin"  # build/probe --files turns '*' into 0 .. SMALL_FILES - 1
LOAD_CPU = 1  # servers run on CPU 0


def make_fixtures():
    """Random (incompressible) files, made once; loadtest/fixtures/ is git-ignored."""
    os.makedirs(os.path.join(FIXTURES, "flood"), exist_ok=True)
    for rel, size in SIZES.items():
        path = FIXTURES + rel
        if os.path.exists(path) and os.path.getsize(path) == size:
            continue
        log(f"  making fixture {rel} ({size} bytes)")
        with open(path + ".tmp", "wb") as f:
            for left in range(size, 0, -MiB):
                f.write(os.urandom(min(left, MiB)))
        os.replace(path + ".tmp", path)


def small_paths():
    return [SMALL.replace("*", str(i)) for i in range(SMALL_FILES)]


def make_small_fixtures():
    """The small-file flood's 20,000 random 8 KiB files, made once (about 160 MB)."""
    os.makedirs(os.path.join(FIXTURES, "small"), exist_ok=True)
    missing = [p for p in small_paths() if not os.path.exists(FIXTURES + p)
               or os.path.getsize(FIXTURES + p) != SMALL_SIZE]
    if missing:
        log(f"  making {len(missing)} fixtures {SMALL} ({SMALL_SIZE} bytes each)")
    for rel in missing:
        with open(FIXTURES + rel + ".tmp", "wb") as f:
            f.write(os.urandom(SMALL_SIZE))
        os.replace(FIXTURES + rel + ".tmp", FIXTURES + rel)


def prewarm(paths):
    """Reads files through the page cache so a warm run never touches the disk."""
    for rel in paths:
        with open(FIXTURES + rel, "rb") as f:
            while f.read(4 * MiB):
                pass


def record(cls, fields):
    """A dataclass from a dict of at least its fields (a tool's JSON line)."""
    return cls(**{f.name: fields[f.name] for f in dataclasses.fields(cls)})


@dataclasses.dataclass
class WrkResult:
    requests: int
    bytes: int
    duration_us: int
    connect_errors: int
    read_errors: int
    write_errors: int
    status_errors: int
    timeouts: int
    lat_p50_us: int
    lat_p99_us: int
    lat_max_us: int

    @property
    def req_s(self):
        return self.requests / (self.duration_us / 1e6)

    @property
    def mb_s(self):
        return self.bytes / (self.duration_us / 1e6) / 1e6

    @property
    def errors(self):
        return (self.connect_errors + self.read_errors + self.write_errors +
                self.status_errors + self.timeouts)


@dataclasses.dataclass
class ProbeResult:
    """build/probe's JSON line: counts, latency percentiles and its own send lag."""
    mode: str
    path: str
    rate: float
    duration: float
    scheduled: int
    ok: int
    errors: int
    timeouts: int
    conns_opened: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    send_lag_mean_ms: float
    send_lag_max_ms: float


@dataclasses.dataclass
class EvictResult:
    files: int
    passes: int
    failures: int


class Tool:
    """One load-generating process, started now and finished into a record later."""

    def __init__(self, session, cmd, seconds, cpu=LOAD_CPU, env=None):
        self.session, self.seconds = session, seconds
        self.proc = session.procs.spawn(cmd, cpu=cpu, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def json(self, slack=30, prefix=""):
        """Its last JSON line (after prefix), once it has exited by itself."""
        out, _ = self.session.procs.communicate(self.proc, self.seconds + slack)
        found = re.findall(rf"^{prefix}(\{{.*\}})$", out, re.M)
        if self.proc.returncode != 0 or not found:
            raise RuntimeError(f"{self.proc.args} failed (status {self.proc.returncode}):\n{out}")
        return json.loads(found[-1])


def start_wrk(session, port, path, conns, seconds, paths=None, cpu=LOAD_CPU):
    """wrk -t1 -cCONNS looping GET path, or over paths in turn (wrk.lua)."""
    env = dict(os.environ)
    env.pop("UNCLOG_PATHS", None)
    if paths:
        env["UNCLOG_PATHS"] = ",".join(paths)
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "30s",
           "-s", os.path.join(HERE, "wrk.lua"), f"http://127.0.0.1:{port}{path}"]
    return Tool(session, cmd, seconds, cpu=cpu, env=env)


def finish_wrk(tool):
    return record(WrkResult, tool.json(slack=60, prefix="WRKJSON "))


def start_probe(session, port, gzip, seconds, csv_path):
    """build/probe: GET /1k.bin or POST /gzip (1 KiB) at the session's rate."""
    what = ["--gzip"] if gzip else ["--get", "/1k.bin"]
    cmd = [session.probe, "--port", str(port), *what, "--rate", str(session.rate),
           "--duration", str(seconds), "--timeout", "10", "--csv", csv_path]
    return Tool(session, cmd, seconds)


def finish_probe(tool):
    r = record(ProbeResult, tool.json())
    if r.errors or r.timeouts:
        tool.session.warnings.add(f"probe {r.mode}: {r.errors} errors, {r.timeouts} timeouts")
    return r


def start_probe_args(session, port, args, seconds, source, csv_path=None):
    """build/probe with args (a schedule, a --flood or a --hog) from source, for seconds."""
    cmd = [session.probe, "--port", str(port), *args, "--duration", f"{seconds:g}",
           "--from", source, "--timeout", "10", *(("--csv", csv_path) if csv_path else ())]
    return Tool(session, cmd, seconds)


def start_slow(session, port, args, seconds, source):
    """slow.py: the slow attacker (a trickled head or body, a slow reader) from source."""
    cmd = [sys.executable, os.path.join(PKG, "slow.py"), "--port", str(port), *args,
           "--duration", f"{seconds:g}", "--from", source]
    return Tool(session, cmd, seconds)


def start_evictor(session, seconds, paths):
    """evict.py: posix_fadvise(DONTNEED) on paths, every 50 ms for seconds."""
    cmd = [sys.executable, os.path.join(PKG, "evict.py"), "--interval", "0.05",
           "--duration", str(seconds), *[FIXTURES + p for p in paths]]
    return Tool(session, cmd, seconds)


def finish_evictor(tool):
    r = record(EvictResult, tool.json())
    if r.failures:
        tool.session.warnings.add(f"evictor: {r.failures} failed posix_fadvise calls")
    return r
