"""The servers under test: a Config names one, running() starts a fresh process of it.

Every server listens on 127.0.0.1 only and serves loadtest/fixtures/. unclog
starts from the empty loadtest/templates/unclog.conf with its settings as
flags; nginx gets loadtest/templates/nginx.conf filled in per variant;
lighttpd and h2o (the attacks' peers) get lighttpd.conf and h2o.conf, their
own defaults otherwise; the Node.js peers are loadtest/peers/*.js.
"""

import contextlib
import dataclasses
import os
import re
import shutil
import socket
import string
import time
import urllib.request

from . import FIXTURES, HERE, TEMPLATES, TOP

# nginx's ways of reading a file: the directives put in the template's $variant.
NGINX_VARIANTS = {
    "sendfile": "sendfile on; aio off;",
    "aio 1x16m": "sendfile off; aio threads; output_buffers 1 16m;",
    "aio 2x64k": "sendfile off; aio threads; output_buffers 2 64k;",
}
NODE_SCRIPTS = ("readfile", "stream")
# Peers run with a template of their own and their defaults: setting "defaults".
TEMPLATED = {"lighttpd": "lighttpd.conf", "h2o": "h2o.conf"}
# The address haproxy connects to unclog from: neither the attacker's (127.0.0.1)
# nor the victim's (127.0.0.2), as a balancer has an address of its own.
BALANCER = "127.0.0.9"


@dataclasses.dataclass(frozen=True)
class Config:
    """One server configuration: the key of every row, table line and plot point."""

    server: str  # "unclog", "nginx", "node", "lighttpd" or "h2o"
    setting: str  # unclog: partition (= gzip_partition); nginx: variant; node: script;
    # lighttpd, h2o: "defaults"
    cache: bool = False  # unclog's small-file cache (off: every read meets the pool)
    loop: bool = False  # unclog's loop_reads (off: every read meets the pool, as in the seed)
    sendfile: bool = False  # unclog's sendfile (off: every body through buffers, as in the seed)
    # unclog: behind Debian's haproxy running docs/haproxy.cfg: "haproxy" (the
    # PROXY protocol, proxy_protocol_from its address) or "haproxy, no PROXY";
    # ", no door" drops the config's per-source connection limit
    balancer: str = ""
    workers: int = 1
    pinned: bool = True  # server on CPU 0 and its load on CPU 1 (when there are two)
    scheduler: str = "fifo"  # unclog: the order of pool jobs (fifo: libuv's own)
    flags: tuple = ()  # unclog: more flags, e.g. ("--send-buffer", "256k"), shown in the label

    @property
    def label(self):
        """The name in tables and CSVs: "unclog 64k", "unclog auto fair", "nginx sendfile"."""
        label = f"{self.server} {self.setting}" + (" fair" if self.scheduler == "fair" else "")
        label += " +cache" if self.cache else ""
        label += " +loop" if self.loop else ""
        label += " +sendfile" if self.sendfile else ""
        label += f" (behind {self.balancer})" if self.balancer else ""
        label += "".join(" " + f for f in self.flags)
        if self.workers != 1 or not self.pinned:
            label += f" workers {self.workers}" + ("" if self.pinned else " (not pinned)")
        return label

    @classmethod
    def from_label(cls, label):
        """The inverse of label, for rows read back from a CSV."""
        server, rest = label.split(" ", 1)
        if server != "unclog":
            return cls(server, rest)
        flags = tuple(rest[rest.index(" --") + 1:].split()) if " --" in rest else ()
        rest = rest[:rest.index(" --")] if flags else rest
        words = rest.split()
        workers = int(words[words.index("workers") + 1]) if "workers" in words else 1
        balancer = re.search(r"\(behind ([^)]*)\)", rest)
        return cls(server, words[0], cache="+cache" in words, loop="+loop" in words,
                   sendfile="+sendfile" in words,
                   balancer=balancer[1] if balancer else "", workers=workers,
                   pinned="(not pinned)" not in rest,
                   scheduler="fair" if "fair" in words else "fifo", flags=flags)

    @property
    def slug(self):
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")

    @property
    def partition(self):
        return self.setting if self.server == "unclog" else ""


def unclog(partition, **kw):
    return Config("unclog", partition, **kw)


def peers(warnings):
    """The nginx and Node.js configurations that are installed."""
    found = []
    if shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"):
        found += [Config("nginx", v) for v in NGINX_VARIANTS]
    else:
        warnings.add("nginx not installed: peers skipped (apt-get install nginx-light)")
    if shutil.which("node"):
        found += [Config("node", s) for s in NODE_SCRIPTS]
    else:
        warnings.add("node not installed: Node.js peers skipped")
    return found


def installed(name):
    return shutil.which(name) is not None or os.path.exists(f"/usr/sbin/{name}")


def attack_peers(warnings, names):
    """The peers of the attacks (nginx aio 2x64k, lighttpd, h2o) among names that are installed."""
    configs = {"nginx": Config("nginx", "aio 2x64k"), "lighttpd": Config("lighttpd", "defaults"),
               "h2o": Config("h2o", "defaults")}
    found = []
    for name in names:
        if installed(name):
            found.append(configs[name])
        else:
            warnings.add(f"{name} not installed: no {name} row in the attacks")
    return found


def http(port, path, body=None, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Server:
    """A process serving one Config; start() spawns it, stop() ends it by PID."""

    def __init__(self, config, session):
        self.config, self.session = config, session
        self.label = config.label
        self.gzip = config.server in ("unclog", "node")  # answers POST /gzip
        self.proc = self.port = self.logpath = self.tag = None
        self.admin_port = None  # unclog's admin door (admin_listen), where /stats answers
        self.balancer = None  # haproxy's process, in front of it

    def start(self, tag):
        """Spawns it (logs and configs named after tag) and waits until it listens."""
        self.tag = tag
        launch = {"unclog": self._unclog, "nginx": self._nginx, "node": self._node,
                  "lighttpd": self._templated, "h2o": self._templated}
        cmd, env, out, port = launch[self.config.server](tag)
        with open(out, "w") as logf:
            self.proc = self.session.procs.spawn(
                cmd, cpu=0 if self.config.pinned else None, stdout=logf, stderr=logf, env=env)
        self.port = self._wait_connect(port) if port else self._wait_listening()
        if self.config.balancer:
            self.port = self._haproxy(tag, self.port)

    def _haproxy(self, tag, backend):
        """Debian's haproxy running docs/haproxy.cfg in front of BACKEND: its bind and
        server lines pointed here, connecting from an address of its own (BALANCER, so
        that neither the attacker nor the victim shares the balancer's place among the
        clients), its health check at /1k.bin (the fixtures have no index), without
        send-proxy-v2 for "no PROXY", without the per-source limit for "no door".
        Returns the port it listens on."""
        with open(os.path.join(TOP, "docs", "haproxy.cfg")) as f:
            text = f.read()
        port = free_port()
        text = re.sub(r"(?m)^    bind :80$", f"    bind 127.0.0.1:{port}", text)
        text = re.sub(r"(?m)^    server web1 \S+$",
                      f"    server web1 127.0.0.1:{backend} source {BALANCER}", text)
        text = re.sub(r"(?m)^    server web2 \S+\n", "", text)
        text = text.replace("uri / ", "uri /1k.bin ")
        if "no PROXY" in self.config.balancer:
            text = text.replace(" send-proxy-v2", "")
        if "no door" in self.config.balancer:
            text, n = re.subn(r"(?m)^    tcp-request connection reject .*\n", "", text)
            assert n == 1, "docs/haproxy.cfg: no per-source limit to drop"
        conf = os.path.join(self.session.tmp, f"{tag}.haproxy.cfg")
        with open(conf, "w") as f:
            f.write(text)
        out = os.path.join(self.session.tmp, f"{tag}.haproxy.log")
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        with open(out, "w") as logf:
            self.balancer = self.session.procs.spawn([haproxy, "-db", "-f", conf], cpu=0,
                                                     stdout=logf, stderr=logf)
        return self._wait_connect(port)

    def _unclog(self, tag):
        c, s = self.config, self.session
        self.logpath = os.path.join(s.tmp, f"{tag}.log")
        cmd = [s.unclog, "-c", os.path.join(TEMPLATES, "unclog.conf"),
               "--listen", "127.0.0.1:0", "--root", FIXTURES, "--threads", "4",
               "--workers", str(c.workers), "--scheduler", c.scheduler,
               "--partition", c.setting,
               # gzip_partition has no auto: partition_min's 64k, its default.
               "--gzip-partition", "64k" if c.setting == "auto" else c.setting,
               "--access-log", "off",
               # fifo rows are the seed's server: the kernel's own send buffer.
               *(("--send-buffer", "off") if c.scheduler == "fifo" else ()), *c.flags,
               "--file-cache", "on" if c.cache else "off",
               "--loop-reads", "on" if c.loop else "off",
               "--sendfile", "auto" if c.sendfile else "off",
               *(("--proxy-protocol-from", BALANCER)
                 if c.balancer and "no PROXY" not in c.balancer else ())]
        return cmd, None, self.logpath, None

    def _nginx(self, tag):
        prefix = os.path.join(self.session.tmp, tag + ".nginx")
        os.makedirs(prefix, exist_ok=True)
        port = free_port()
        with open(os.path.join(TEMPLATES, "nginx.conf")) as f:
            text = string.Template(f.read()).substitute(
                prefix=prefix, port=port, root=FIXTURES,
                variant=NGINX_VARIANTS[self.config.setting])
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(text)
        self.logpath = os.path.join(prefix, "error.log")
        cmd = ["nginx", "-c", conf, "-p", prefix + "/", "-e", self.logpath,
               "-g", "daemon off; master_process off;"]
        return cmd, None, os.path.join(prefix, "stdout.log"), port

    def _templated(self, tag):
        """lighttpd or h2o: its template filled in under tmp/, in the foreground."""
        name = self.config.server
        prefix = os.path.join(self.session.tmp, f"{tag}.{name}")
        os.makedirs(prefix, exist_ok=True)
        port = free_port()
        # h2o started as root would switch to nobody, who may not read the fixtures.
        user = "user: root" if os.geteuid() == 0 else ""
        with open(os.path.join(TEMPLATES, TEMPLATED[name])) as f:
            text = string.Template(f.read()).substitute(prefix=prefix, port=port,
                                                        root=FIXTURES, user=user)
        conf = os.path.join(prefix, TEMPLATED[name])
        with open(conf, "w") as f:
            f.write(text)
        self.logpath = os.path.join(prefix, "error.log")
        cmd = ["lighttpd", "-D", "-f", conf] if name == "lighttpd" else ["h2o", "-c", conf]
        return cmd, None, os.path.join(prefix, "stdout.log"), port

    def _node(self, tag):
        self.logpath = os.path.join(self.session.tmp, f"{tag}.log")
        cmd = ["node", os.path.join(HERE, "peers", self.config.setting + ".js"),
               "--port", "0", "--root", FIXTURES]
        return cmd, dict(os.environ, UV_THREADPOOL_SIZE="4"), self.logpath, None

    def _wait(self, ready, failure, timeout=10.0):
        """ready()'s port once it has one; RuntimeError(failure()) if the server dies first."""
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            port = ready()
            if port:
                return port
            time.sleep(0.02)
        raise RuntimeError(failure())

    def _wait_listening(self):
        """The port, once every process (an unclog's workers) has logged it."""
        pat = re.compile(r"listening on http://127\.0\.0\.1:(\d+)/")
        admin = re.compile(r"listening on .*, admin http://127\.0\.0\.1:(\d+)/")

        def ready():
            with open(self.logpath, errors="replace") as f:
                text = f.read()
            found = pat.findall(text)
            self.admin_port = next((int(p) for p in admin.findall(text)), None)
            return int(found[0]) if len(found) >= self.config.workers else None
        return self._wait(ready, lambda: f"{self.label} did not start; see {self.logpath}:\n"
                                         f"{tail(self.logpath)}")

    def _wait_connect(self, port):
        def ready():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return port
            except OSError:
                return None
        return self._wait(ready, lambda: f"{self.label} did not start listening on port {port}")

    def check(self):
        """A sanity request or two, so a broken server fails loudly, not as odd numbers."""
        status, body = http(self.port, "/1k.bin")
        if status != 200 or len(body) != 1024:
            raise RuntimeError(f"{self.label}: GET /1k.bin gave {status}, {len(body)} bytes")
        if self.gzip:
            try:
                status, body = http(self.port, "/gzip", body=b"hello " * 200)
                if status != 200 or body[:2] != b"\x1f\x8b":
                    raise RuntimeError(f"status {status}")
            except Exception as e:
                self.session.warnings.add(
                    f"{self.label}: POST /gzip does not work ({e}); gzip probe skipped")
                self.gzip = False

    def save_stats(self, path):
        """unclog's /stats after a run, for the record (tmp/)."""
        try:
            _, body = http(self.admin_port or self.port, "/stats", timeout=5)
            with open(path, "wb") as f:
                f.write(body)
        except Exception as e:  # informative only
            self.session.warnings.add(f"{self.label}: GET /stats failed: {e}")

    def stop(self):
        """SIGTERM, grace, SIGKILL; an unclog master's workers go with it."""
        if self.balancer is not None:
            self.session.procs.stop(self.balancer)  # haproxy -db ends by the signal itself
            self.balancer = None
        if self.proc is None:
            return
        rc, orphans = self.session.procs.stop(self.proc)
        self.proc = None
        warn = self.session.warnings.add
        if rc != 0 and self.config.server == "unclog":
            warn(f"{self.label}: exit status {rc} after SIGTERM (expected 0); log {self.logpath}")
        for pid in orphans:
            warn(f"{self.label}: worker pid {pid} outlived its master; killed")


@contextlib.contextmanager
def running(config, session, tag):
    """A fresh, checked server process for config, stopped on the way out."""
    server = Server(config, session)
    try:
        server.start(tag)
        server.check()
        yield server
    finally:
        server.stop()
