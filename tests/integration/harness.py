"""The one helper library of unclog's black-box integration tests.

Each tests/integration/NN_feature.t is a Python script that imports this
module (the test command puts this directory on PYTHONPATH), starts the real
binary ($UNCLOG_BIN, default build/unclog) on a temp docroot and config,
talks to it over raw sockets and prints TAP for prove.

Four parts:
  - TAP: ok(), is_(), like(), diag(), note(), skip_test(), bail_out(), and
    run(), which wraps a test body with a watchdog and prints the plan.
  - Processes and waiting: run_bin(), poll() (a hang guard, never a timing
    check), in_parallel(), figures from /proc, test data.
  - Server: temp dir with docroot, config file and logs; start on port 0,
    read the port and the admin door's (admin_listen = auto: ephemeral too)
    from the startup line; stop() or, after a signal sent by the test,
    wait_exit(), each reporting the exit status and sanitizer output as TAP
    results. Server.request(), get(), head() and stats() send the admin
    paths (ADMIN_PATHS: /stats, /settings, ...) to the admin door and the
    rest to the public listener (door= overrides); admin_conn() is a Conn
    on the admin door, conn() one on the public listener.
  - HTTP: Conn, a client on a raw socket that can pipeline, send malformed
    bytes and read responses framed by Content-Length, chunked encoding or
    the close; exchange() for raw bytes in and everything until the close
    out; one head parser (parse_head) behind both. Every socket operation
    has a timeout.
"""

import atexit
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("UNCLOG_BIN") or os.path.join(REPO, "build", "unclog")
ASAN = os.environ.get("UNCLOG_ASAN", "") not in ("", "0")
# Every server the tests start (and those the demo starts) hashes clients
# under this key, not a random one: with it 127.0.0.1 to 127.0.0.5 and ::/64
# each have a bucket of their own in every table that hashes clients (the
# connections', the scheduler's, the budget's, the send shares', the turns'),
# so a test between two clients never finds them sharing one by chance.
os.environ.setdefault("UNCLOG_CLIENT_KEY", "0000756e636c6f672d74657374730000")

# The ThreadSanitizer build (make test-tsan): a report fails the server's
# stop check as ASan's do (SANITIZER_MARKERS), and TSan's exit status 66.
TSAN = os.environ.get("UNCLOG_TSAN", "") not in ("", "0")
# Either build: its shadow memory and allocator make RSS mean little.
SANITIZED = ASAN or TSAN

# Sanitizer builds run about three times slower (TSan five): every guard
# scales with this.
SLOW = 5 if TSAN else 3 if ASAN else 1
IO_TIMEOUT = 10 * SLOW  # seconds, any single socket operation
START_TIMEOUT = 10 * SLOW  # seconds until the startup line appears
STOP_TIMEOUT = 15  # seconds between the signal and the exit (times SLOW)

KiB = 1024
MiB = 1024 * 1024

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "ThreadSanitizer")


# ---------------------------------------------------------------- TAP -----


class _Tap:
    def __init__(self):
        self.count = 0
        self.failed = 0


_tap = _Tap()


def _clean(desc):
    # '#' would start a TAP directive; a newline would end the line.
    return " ".join(str(desc).split()).replace("#", "\\#")


def _out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def diag(msg):
    """Print a diagnostic on stderr (prove shows it)."""
    sys.stdout.flush()
    for line in str(msg).splitlines() or [""]:
        sys.stderr.write("# " + line + "\n")
    sys.stderr.flush()


def note(msg):
    """Print a diagnostic on stdout (prove shows it with -v)."""
    for line in str(msg).splitlines() or [""]:
        _out("# " + line)


def ok(cond, desc, *diags):
    """Report one test; on failure print the extra diagnostics. Returns cond."""
    _tap.count += 1
    if cond:
        _out("ok %d - %s" % (_tap.count, _clean(desc)))
    else:
        _tap.failed += 1
        _out("not ok %d - %s" % (_tap.count, _clean(desc)))
        for d in diags:
            diag(d)
    return bool(cond)


def _show(value, limit=300):
    text = repr(value)
    if len(text) > limit:
        text = text[:limit] + "... (%d chars)" % len(text)
    return text


def is_(got, want, desc):
    """ok(got == want) with both values shown on failure."""
    return ok(got == want, desc, "     got: " + _show(got), "expected: " + _show(want))


def like(text, pattern, desc):
    """ok(re.search(pattern, text)) for str or bytes."""
    found = text is not None and re.search(pattern, text) is not None
    return ok(found, desc, "    text: " + _show(text, 2000), " pattern: " + _show(pattern))


def skip_test(desc, reason):
    """Report one test as skipped (TAP `# SKIP`)."""
    _tap.count += 1
    _out("ok %d - %s # SKIP %s" % (_tap.count, _clean(desc), _clean(reason)))


def bail_out(reason):
    """Abort the whole prove run: nothing else can work (e.g. no binary)."""
    _out("Bail out! " + _clean(reason))
    _kill_all_servers()
    sys.exit(255)


class Watchdog(Exception):
    pass


def _on_alarm(signum, frame):
    raise Watchdog("test file exceeded its time limit")


def run(body, timeout=120):
    """Run body() as a whole test file: watchdog, crash reporting, plan, exit status.

    timeout is in seconds for a normal build (multiplied by SLOW). An
    exception in body is reported as a failed test; live servers are stopped
    (and their teardown checks reported) before the plan is printed.
    """
    if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
        bail_out("server binary %s is missing; build it or set UNCLOG_BIN" % BIN)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(int(timeout * SLOW))
    try:
        body()
    except BaseException as e:  # noqa: B902 - report everything, incl. Watchdog
        signal.alarm(0)
        first = (str(e).splitlines() or [""])[0][:200]
        ok(False, "test body finished without an exception (%s: %s)" % (type(e).__name__, first),
           traceback.format_exc())
        for srv in list(_live_servers):
            try:
                srv.stop()
            except BaseException as e2:  # noqa: B902
                ok(False, "stopping %s after the error (%s)" % (srv.name, e2))
        _kill_all_servers()
    signal.alarm(0)
    _out("1..%d" % _tap.count)
    if _tap.count == 0:
        diag("no tests ran")
        sys.exit(255)
    sys.exit(min(_tap.failed, 254))


# ----------------------------------------------- processes, waiting -----


def run_bin(args, timeout=10, cwd=None):
    """Run the binary to completion. Returns (status, stdout, stderr) as str.

    status is None when it did not exit within timeout*SLOW seconds (it is
    then killed): e.g. a config error that the server did not notice.
    """
    proc = subprocess.Popen([BIN] + list(args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout * SLOW)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        status = None
    return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")



HELP_HEAD = re.compile(r"^(?:  (-\w), |      )(--[a-z0-9][\w-]*)(?: (\S+))?$")


def help_entries(text):
    """--help's options as [(short, flag, arg, description)]: each entry is
    a head line ("  -c, --config FILE" or "      --listen ADDR:PORT") and
    its description below it, indented ten columns, joined into one line.
    short and arg are "" when the option has none."""
    entries = []
    for line in text.splitlines():
        m = HELP_HEAD.match(line)
        if m:
            entries.append([m.group(1) or "", m.group(2), m.group(3) or "", ""])
        elif entries and entries[-1] is not None and re.match(r"^ {10}\S", line):
            entries[-1][3] = (entries[-1][3] + " " + line.strip()).strip()
        elif entries:
            entries.append(None)  # a blank line or a heading: the options end
    return [tuple(e) for e in entries if e is not None]


def help_keys(text):
    """The configuration keys of --help: [(flag, default, description)], each
    with its value read from the description's final "(default ...)" part."""
    keys = []
    for short, flag, arg, desc in help_entries(text):
        d = re.search(r"\(default ([^;()]*)(?:;[^()]*)?\)$", desc)
        if arg and not short and d:
            keys.append((flag, d.group(1), desc))
    return keys


def run_with_conf(text, args=(), timeout=10):
    """run_bin() with a config file holding text (in a temp dir, removed
    after), port 0 and no access log: for configurations the server must
    refuse. Returns (status, stdout, stderr, the config file's path)."""
    tmp = tempfile.mkdtemp(prefix="unclog-test-")
    try:
        conf = os.path.join(tmp, "bad.conf")
        with open(conf, "w") as f:
            f.write(text)
        return run_bin(["-c", conf, "--listen", "127.0.0.1:0", "--access-log", "off",
                        "--root", tmp] + list(args), timeout) + (conf,)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def poll(pred, timeout=10, interval=0.05):
    """Call pred until it returns something true or timeout*SLOW seconds
    pass (a hang guard, not a timing check). Returns pred's last value."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def in_parallel(fn, n):
    """Run fn(0) .. fn(n-1) on n threads at once. Returns their results in
    order; a call that raised gives its exception instead."""
    results = [None] * n

    def call(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: B902 - the caller judges
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def proc_rss_kib(pid):
    """VmRSS of a process in KiB, from /proc/PID/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def proc_fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_seconds(pid):
    """User plus system CPU time of a process, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / float(os.sysconf("SC_CLK_TCK"))


def random_bytes(size, seed):
    """size deterministic pseudo-random bytes (fast: ~70 ms for 16 MiB)."""
    return random.Random(seed).randbytes(size)


def gunzip(data):
    """gzip.decompress, or None when data is not a valid gzip stream."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return None


def text_bytes(size):
    """size bytes of compressible ASCII text."""
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    return (line * (size // len(line) + 1))[:size]


# ---------------------------------------------------------- server -----

_live_servers = []
_started_servers = []
# Whatever happens to the test script, no server outlives it.
atexit.register(lambda: _kill_all_servers())
# Temp dirs go at the end, so that a test can read logs after a stop.
atexit.register(lambda: _remove_temp_dirs())


def _kill_all_servers():
    for srv in list(_live_servers):
        try:
            srv.proc.kill()
            srv.proc.wait(5)
        except Exception:
            pass
        _live_servers.remove(srv)


def _remove_temp_dirs():
    if os.environ.get("UNCLOG_KEEP_TMP"):
        return
    for srv in _started_servers:
        if srv.stopped_clean:
            shutil.rmtree(srv.tmp, ignore_errors=True)


def terminate(proc, timeout=10):
    """SIGTERM to PROC, SIGKILL after TIMEOUT seconds; returns its status."""
    proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def promtool_check(text, desc):
    """promtool check metrics on TEXT, a /metrics answer: exit 0 and no lint
    problem. Skipped without promtool, unless UNCLOG_REQUIRE_PROMTOOL=1."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("UNCLOG_REQUIRE_PROMTOOL", "") not in ("", "0"):
            ok(False, "promtool is installed (UNCLOG_REQUIRE_PROMTOOL=1)",
               "apt-get install prometheus")
        else:
            skip_test(desc, "promtool is not installed (apt-get install "
                      "prometheus; UNCLOG_REQUIRE_PROMTOOL=1 makes this a failure)")
        return
    p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True,
                       timeout=30)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    is_((p.returncode, out.strip()), (0, ""), desc + ": exit 0, no lint problem")


class Prometheus:
    """A real Prometheus (when installed) scraping HOST:TARGET every
    INTERVAL ("1s", "200ms") into a temporary directory, on a free port:
    `with Prometheus(port, "1s") as prom: prom.query(...)`. Stopped and
    removed on exit, with its warnings and errors as diagnostics."""

    def __init__(self, target, interval, host="127.0.0.1"):
        self.binary = shutil.which("prometheus")
        self.target, self.interval, self.host = target, interval, host
        self.proc = None

    @staticmethod
    def installed(desc):
        """Whether the prometheus binary is there; if not, skips DESC."""
        if shutil.which("prometheus") is None:
            skip_test(desc, "prometheus is not installed")
            return False
        return True

    def __enter__(self):
        self.tmp = tempfile.mkdtemp(prefix="unclog-prom-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        conf = os.path.join(self.tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: %s\n  scrape_timeout: %s\n"
                    "scrape_configs:\n  - job_name: unclog\n    static_configs:\n"
                    "      - targets: ['%s:%d']\n" % (self.interval, self.interval,
                                                     self.host, self.target))
        self.log = open(os.path.join(self.tmp, "prometheus.log"), "wb")
        self.proc = subprocess.Popen([self.binary, "--config.file=" + conf,
                                      "--storage.tsdb.path=" + os.path.join(self.tmp, "data"),
                                      "--web.listen-address=127.0.0.1:%d" % self.port],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, cwd=self.tmp)
        return self

    def api(self, path, **params):
        """The "data" of an API answer, or None when Prometheus does not answer."""
        url = "http://127.0.0.1:%d/api/v1/%s?%s" % (self.port, path,
                                                    urllib.parse.urlencode(params))
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return json.load(r)["data"]
        except (OSError, ValueError, KeyError):
            return None

    def query(self, query):
        """The result vector of an instant query, or None."""
        data = self.api("query", query=query)
        return data["result"] if data else None

    def __exit__(self, *exc):
        terminate(self.proc)
        self.log.close()
        with open(os.path.join(self.tmp, "prometheus.log"), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        warnings = [l for l in text.splitlines() if ("level=warn" in l or "level=error" in l)
                    and "Received SIGTERM" not in l]
        if warnings:
            diag("prometheus log warnings:\n" + "\n".join(warnings[-10:]))
        note("prometheus stopped with status %s" % self.proc.returncode)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False


class Server:
    """One unclog process on a temp docroot, config file and logs.

    files:    {relative path: bytes} written under the docroot before start.
    conf:     {key: value} written as `key = value` lines to the config file,
              or conf_text for the raw file content.
    args:     extra command-line arguments (appended after the defaults).
    root:     serve an existing directory instead of a fresh docroot.
    defaults: pass --listen 127.0.0.1:0, --access-log and --root on the
              command line (turn off to test the config file's own keys).
    wrapper:  a command that execs the server (same pid), e.g. ["prlimit",
              "--nofile=64:64", "--"].
    stdout_pipe: standard output is a pipe that nobody reads (instead of
              a file, see stdout()).

    Use as a context manager (`with Server(...) as srv:`) or call start() and
    stop(). stop() reports the exit status and sanitizer check as TAP tests.
    The temp dir is removed when the test script ends, unless a check failed
    or UNCLOG_KEEP_TMP is set.
    """

    # The admin door's paths (handlers/observe/): where request() sends them.
    ADMIN_PATHS = ("/stats", "/stats/history", "/metrics", "/settings", "/.unclog/dashboard")

    def __init__(self, files=None, conf=None, conf_text=None, args=(), root=None,
                 defaults=True, name="server", wrapper=(), stdout_pipe=False):
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="unclog-test-")
        self.root = root or os.path.join(self.tmp, "root")
        os.makedirs(self.root, exist_ok=True)
        self.conf_path = os.path.join(self.tmp, "unclog.conf")
        self.access_log = os.path.join(self.tmp, "access.log")
        self.stderr_path = os.path.join(self.tmp, "stderr.log")
        self.stdout_path = os.path.join(self.tmp, "stdout.log")
        self.args = list(args)
        self.defaults = defaults
        self.wrapper = list(wrapper)
        self.stdout_pipe = stdout_pipe
        self.proc = None
        self.port = None
        self.admin_port = None  # admin_listen's TCP port, from the startup line
        self.admin_unix = None  # or its unix socket's path
        self.pid = None
        self.startup_line = None
        self.stopped_clean = False
        if conf_text is None:
            conf_text = "# written by tests/integration/harness.py\n"
            for key, value in (conf or {}).items():
                conf_text += "%s = %s\n" % (key, value)
        with open(self.conf_path, "w") as f:
            f.write(conf_text)
        for name_, data in (files or {}).items():
            self.write_file(name_, data)

    # docroot helpers (usable before or after start)

    def path(self, name):
        return os.path.join(self.root, name)

    def _new_path(self, name):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def write_file(self, name, data):
        p = self._new_path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def sparse_file(self, name, size):
        """A file of size zero bytes that takes no disk space."""
        p = self._new_path(name)
        with open(p, "wb") as f:
            f.truncate(size)
        return p

    def symlink(self, name, target):
        p = self._new_path(name)
        os.symlink(target, p)
        return p

    # process lifecycle

    def command(self):
        cmd = self.wrapper + [BIN, "-c", self.conf_path]
        if self.defaults:
            cmd += ["--listen", "127.0.0.1:0", "--access-log", self.access_log,
                    "--root", self.root]
        return cmd + self.args

    def start(self):
        """Start the process and wait for the startup line. Raises on failure."""
        with open(self.stderr_path, "wb") as err, open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE if self.stdout_pipe else out,
                                         stderr=err, cwd=self.tmp)
        self.pid = self.proc.pid
        _live_servers.append(self)
        _started_servers.append(self)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            # Loopback, or every address (then 127.0.0.1 reaches it too).
            m = re.search(r"http://(?:127\.0\.0\.1|0\.0\.0\.0|\[::\]):(\d+)/", self.stderr())
            if m:
                self.port = int(m.group(1))
                self.startup_line = next(l for l in self.stderr().splitlines()
                                         if m.group(0) in l)
                a = re.search(r", admin http://[^ ]*:(\d+)/", self.startup_line)
                self.admin_port = int(a.group(1)) if a else None
                a = re.search(r", admin unix:(\S+)", self.startup_line)
                self.admin_unix = a.group(1) if a else None
                return self
            if self.proc.poll() is not None:
                _live_servers.remove(self)
                raise RuntimeError("%s exited with status %s before announcing its port;"
                                   " command: %s\nstderr:\n%s"
                                   % (self.name, self.proc.returncode,
                                      " ".join(self.command()), self.stderr()))
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                _live_servers.remove(self)
                raise RuntimeError("%s printed no http://127.0.0.1:PORT/ line within %ss;"
                                   " stderr:\n%s" % (self.name, START_TIMEOUT, self.stderr()))
            time.sleep(0.02)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        """Send sig to the server (or, with workers, its master)."""
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM):
        """Stop with sig and report, as TAP: exit status 0, no sanitizer
        report. Returns True when both checks passed."""
        if self.proc is None:
            return True
        early = self.proc.poll()
        if early is None:
            self.proc.send_signal(sig)
        return self.wait_exit("after " + signal.Signals(sig).name, early=early)

    def wait_exit(self, when="", early=None):
        """Wait for the exit of a server that was told to stop (e.g. by the
        test's own signals) and report it as stop() does."""
        t0 = time.monotonic()
        try:
            status = self.proc.wait(STOP_TIMEOUT * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            status = None
        secs = time.monotonic() - t0
        if self in _live_servers:
            _live_servers.remove(self)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        err = self.stderr()
        tail = "stderr of %s (last 3000 chars):\n%s" % (self.name, err[-3000:])
        when = (" " + when) if when else ""
        if early is not None:
            good = ok(False, "%s was still running%s (it exited early with status %s)"
                      % (self.name, when.replace(" after", " at", 1), early), tail)
        elif status is None:
            good = ok(False, "%s exits%s (hung; killed after %ss)"
                      % (self.name, when, STOP_TIMEOUT * SLOW), tail)
        else:
            good = is_(status, 0, "%s exits with status 0%s" % (self.name, when))
            if not good:
                diag(tail)
        marker = next((m for m in SANITIZER_MARKERS if m in err), None)
        good &= ok(marker is None, "%s: no sanitizer report on stderr" % self.name,
                   "found %r; %s" % (marker, tail))
        note("%s stopped in %.2fs" % (self.name, secs))
        self.proc = None
        self.stopped_clean = good
        if not good:
            diag("kept %s" % self.tmp)
        return good

    def rss_kib(self):
        return proc_rss_kib(self.pid)

    def fd_count(self):
        return proc_fd_count(self.pid)

    # request shortcuts

    def conn(self, **kw):
        """A connection to the public listener."""
        return Conn(self.port, **kw)

    def admin_conn(self, **kw):
        """A connection to the admin door (admin_listen)."""
        if self.admin_port is None:
            raise RuntimeError("%s has no admin TCP port (admin_listen off or unix)" % self.name)
        return Conn(self.admin_port, **kw)

    def is_admin_target(self, target):
        """Whether TARGET's path (origin or absolute form) is an admin path."""
        path = re.sub(r"^[a-z]+://[^/]*", "", target)
        return re.split(r"[?#]", path, 1)[0] in self.ADMIN_PATHS

    def request(self, method, target, door=None, **kw):
        """One request on a new connection (see request()): on the admin
        door for an admin path, else on the public listener; DOOR ("admin",
        "public") chooses."""
        if door is None:
            door = "admin" if self.is_admin_target(target) else "public"
        port = self.port if door == "public" else self.admin_port
        if port is None:
            raise RuntimeError("%s has no admin TCP port (admin_listen off or unix)" % self.name)
        return request(port, method, target, **kw)

    def get(self, target, **kw):
        return self.request("GET", target, **kw)

    def head(self, target, **kw):
        return self.request("HEAD", target, **kw)

    def stats(self):
        """GET /stats parsed as JSON."""
        resp = self.get("/stats")
        if resp.status != 200:
            raise RuntimeError("GET /stats answered %d: %r" % (resp.status, resp.body[:200]))
        return json.loads(resp.body)

    def settled(self):
        """True when, by /stats, no connection is open but the one asking and
        no threadpool job is in flight: poll(srv.settled) after clients left."""
        st = self.stats()
        return (st["connections"]["active"] == 1
                and all(job["in_flight"] == 0 for job in st["jobs"].values()))

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.proc is not None:
            self.stop()
        return False


# ------------------------------------------------------------- HTTP -----


class ProtocolError(Exception):
    pass


class Response:
    """One parsed HTTP response."""

    def __init__(self, version, status, reason, headers, body=b"", chunked=False):
        self.version = version  # "HTTP/1.1"
        self.status = status  # int
        self.reason = reason
        self.headers = headers  # [(name, value)] in order
        self.body = body  # bytes (b"" for HEAD)
        self.chunked = chunked

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has_header(self, name):
        return self.header(name) is not None

    @property
    def media_type(self):
        """Content-Type without parameters, lower-cased ("text/html")."""
        ct = self.header("Content-Type")
        return None if ct is None else ct.split(";")[0].strip().lower()

    def tokens(self, name):
        """A comma-separated header as a set of lower-case tokens."""
        out = set()
        for v in self.header_all(name):
            out.update(t.strip().lower() for t in v.split(",") if t.strip())
        return out

    def __repr__(self):
        return "<Response %s %d %s, %d body bytes>" % (self.version, self.status, self.reason,
                                                       len(self.body))


def parse_head(head):
    """A response head (bytes, without the blank line that ends it) as a
    Response with no body. Raises ProtocolError when it is malformed."""
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$", lines[0])
    if not m:
        raise ProtocolError("bad status line %r" % lines[0])
    headers = []
    for line in lines[1:]:
        if ":" not in line:
            raise ProtocolError("bad header line %r" % line)
        k, v = line.split(":", 1)
        headers.append((k.strip(), v.strip()))
    return Response(m.group(1), int(m.group(2)), m.group(3) or "", headers)


def build_request(method, target, headers=None, body=None, version="HTTP/1.1", host=True,
                  chunks=None):
    """Request bytes. body adds Content-Length (unless headers set one); chunks
    (a list of bytes) sends a chunked body instead."""
    headers = list((headers or {}).items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in headers}
    lines = ["%s %s %s" % (method, target, version)]
    if host and "host" not in names:
        lines.append("Host: 127.0.0.1")
    if chunks is not None and "transfer-encoding" not in names:
        headers.append(("Transfer-Encoding", "chunked"))
    elif body is not None and "content-length" not in names:
        headers.append(("Content-Length", str(len(body))))
    lines += ["%s: %s" % kv for kv in headers]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if chunks is not None:
        for c in chunks:
            if c:
                raw += b"%x\r\n" % len(c) + c + b"\r\n"
        raw += b"0\r\n\r\n"
    elif body is not None:
        raw += body
    return raw


class Conn:
    """A client connection on a raw socket, every operation under a timeout
    (seconds, already scaled: default IO_TIMEOUT)."""

    def __init__(self, port, timeout=None, rcvbuf=None, host="127.0.0.1", source=None):
        self.timeout = timeout or IO_TIMEOUT
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source:
            # The client's own address (any of 127/8 reaches lo): another client.
            self.sock.bind((source, 0))
        if rcvbuf:
            # Before connect, so the TCP window is negotiated with it.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(self.timeout)
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.end = None  # at EOF: "closed" or "reset"

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, target, **kw):
        """Send one request (see build_request) without reading the answer."""
        self.send(build_request(method, target, **kw))

    def roundtrip(self, method, target, **kw):
        """Send one request and read its response."""
        self.request(method, target, **kw)
        return self.read_response(head=(method == "HEAD"))

    # reading

    def fill(self):
        """Read what comes next (waiting up to the timeout) into buf.
        Returns False at EOF (a close or a reset, told apart by self.end)."""
        if self.eof:
            return False
        try:
            data = self.sock.recv(256 * KiB)
        except ConnectionResetError:
            self.end = "reset"
            data = b""
        if not data:
            self.eof = True
            self.end = self.end or "closed"
            return False
        self.buf += data
        return True

    def _read_until(self, delim, limit=1 * MiB):
        start = 0
        while True:
            i = self.buf.find(delim, start)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + len(delim)]
                return out
            start = max(0, len(self.buf) - len(delim) + 1)
            if len(self.buf) > limit:
                raise ProtocolError("no %r within %d bytes" % (delim, limit))
            if not self.fill():
                raise ProtocolError("connection closed while waiting for %r (have %r)"
                                    % (delim, bytes(self.buf[:200])))

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise ProtocolError("connection closed after %d of %d body bytes"
                                    % (len(self.buf), n))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_to_end(self):
        """Everything until the server closes. Returns (bytes, end), end
        being "closed", "reset", or "open" when nothing came for the
        timeout."""
        try:
            while self.fill():
                pass
            end = self.end
        except socket.timeout:
            end = "open"
        out = bytes(self.buf)
        self.buf.clear()
        return out, end

    def read_head(self):
        """Status line and headers, as a Response with no body."""
        return parse_head(self._read_until(b"\r\n\r\n", limit=256 * KiB))

    def read_response(self, head=False, skip_interim=True):
        """Read one complete response; head=True for the answer to a HEAD.

        Raises ProtocolError when the stream is not a valid response, and
        socket.timeout when the server goes quiet for self.timeout seconds.
        """
        while True:
            resp = self.read_head()
            if not (skip_interim and 100 <= resp.status < 200):
                break
        status = resp.status
        if head or status in (204, 304) or 100 <= status < 200:
            return resp
        if "chunked" in resp.tokens("Transfer-Encoding"):
            resp.chunked = True
            resp.body = self._read_chunked()
        elif resp.header("Content-Length") is not None:
            lengths = set(resp.header_all("Content-Length"))
            if len(lengths) != 1 or not re.match(r"^\d+$", lengths.copy().pop()):
                raise ProtocolError("bad Content-Length %r" % resp.header_all("Content-Length"))
            resp.body = self.read_exact(int(lengths.pop()))
        else:
            resp.body, end = self.read_to_end()
            if end == "open":
                raise socket.timeout("a body delimited by the close, and no close")
        return resp

    def _read_chunked(self):
        parts = []
        while True:
            line = self._read_until(b"\r\n", limit=4 * KiB).decode("latin-1")
            size_text = line.split(";", 1)[0].strip()
            if not re.match(r"^[0-9a-fA-F]+$", size_text):
                raise ProtocolError("bad chunk size line %r" % line)
            size = int(size_text, 16)
            if size == 0:
                break
            parts.append(self.read_exact(size))
            if self.read_exact(2) != b"\r\n":
                raise ProtocolError("chunk of %d bytes not followed by CRLF" % size)
        while self._read_until(b"\r\n", limit=64 * KiB):  # trailers
            pass
        return b"".join(parts)

    def read_responses(self, methods):
        """Read one response per method in methods (HEAD gets no body)."""
        return [self.read_response(head=(m == "HEAD")) for m in methods]

    def wait_closed(self, timeout=None):
        """Wait for the server to close. Returns "closed", "data" (bytes came
        instead: kept in buf) or "open" (nothing within timeout)."""
        if self.buf:
            return "data"
        if self.eof:
            return "closed"
        self.sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            return "data" if self.fill() else "closed"
        except socket.timeout:
            return "open"
        finally:
            self.sock.settimeout(self.timeout)


def request(port, method, target, head=None, **kw):
    """Open a connection, send one request, read its response, close."""
    with Conn(port) as c:
        c.request(method, target, **kw)
        return c.read_response(head=(method == "HEAD") if head is None else head)


def exchange(port, raw, timeout=5, pause=None):
    """Send raw (bytes, or a list of pieces sent `pause` seconds apart), then
    read until the server closes: for hostile bytes and checks of exact
    framing. Returns (data, end), end as Conn.read_to_end says ("open":
    nothing more within timeout*SLOW seconds). A server that closes while we
    still send is fine: we read what it said."""
    pieces = raw if isinstance(raw, list) else [raw]
    with Conn(port, timeout=timeout * SLOW) as c:
        try:
            for i, piece in enumerate(pieces):
                if i and pause:
                    time.sleep(pause)
                c.send(piece)
        except OSError:
            pass
        return c.read_to_end()


def split_response(data, end="closed"):
    """(Response without body, rest) of the first response head in data;
    rest is every byte after the blank line, unparsed. With exchange()'s
    (data, end): split_response(*exchange(...)) also raises when the server
    did not close."""
    if end == "open":
        raise ProtocolError("the server did not close after %r" % data[:200])
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise ProtocolError("no end of head in %r" % data[:200])
    return parse_head(head), rest


def statuses(data):
    """The status codes of every response head in data, in order."""
    return [int(m) for m in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", data)]


IMF_FIXDATE = (r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct"
               r"|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")

# An entity-tag (RFC 9110 8.8.3); group 1 is "W/" for a weak one.
ETAG_RE = r'^(W/)?"[\x21\x23-\x7e\x80-\xff]*"$'


def comparable_headers(resp, ignore=("date",)):
    """A response's headers as a sorted list of (lower-case name, value),
    without the names in ignore: for HEAD-versus-GET comparisons."""
    return sorted((k.lower(), v) for k, v in resp.headers if k.lower() not in ignore)


def parse_byteranges(resp):
    """The parts of a multipart/byteranges response (RFC 9110 14.6) as a list
    of ({lower-case name: value}, bytes). Raises ProtocolError if malformed."""
    ct = resp.header("Content-Type", "")
    m = re.match(r'^multipart/byteranges\s*;\s*boundary="?([^";]+)"?\s*$', ct, re.I)
    if not m:
        raise ProtocolError("not multipart/byteranges: %r" % ct)
    delim = b"--" + m.group(1).encode("latin-1")
    body = resp.body
    start = body.find(delim)
    if start < 0 or (start > 0 and body[start - 2:start] != b"\r\n"):
        raise ProtocolError("no first boundary line in %r" % body[:200])
    parts = []
    pos = start + len(delim)
    while True:
        if body[pos:pos + 2] == b"--":
            return parts
        if body[pos:pos + 2] != b"\r\n":
            raise ProtocolError("boundary not followed by CRLF at %d" % pos)
        head_end = body.find(b"\r\n\r\n", pos + 2)
        if head_end < 0:
            raise ProtocolError("part head without end at %d" % pos)
        headers = {}
        for line in body[pos + 2:head_end].decode("latin-1").split("\r\n"):
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        cr = re.match(r"^bytes (\d+)-(\d+)/(\d+|\*)$", headers.get("content-range", ""))
        if not cr:
            raise ProtocolError("part without a valid Content-Range: %r" % headers)
        data_start = head_end + 4
        data_end = data_start + int(cr.group(2)) - int(cr.group(1)) + 1
        if body[data_end:data_end + 2 + len(delim)] != b"\r\n" + delim:
            raise ProtocolError("part %d is not followed by CRLF and the boundary" % len(parts))
        parts.append((headers, body[data_start:data_end]))
        pos = data_end + 2 + len(delim)
