#!/usr/bin/env python3
# A cluster in network namespaces (issue 43): two unclog "machines", each in
# a namespace of its own with proxy_protocol_from = the balancer's address,
# Debian's haproxy running docs/haproxy.cfg in a third (its bind and server
# lines filled in, a stats socket added for its runtime API) and a client
# host in a fourth, all on one bridge, with the addresses the docs use
# (192.0.2.0/24, TEST-NET-1). The client host's addresses are what the
# backends see: in their access logs and in /stats' top clients (asked from
# inside each backend's namespace, on its loopback). Then the rolling
# restart of docs/load-balancing.md, one backend after the other, while the
# client host does keep-alive GETs and POST /gzip through the balancer:
# drain it in haproxy, wait until haproxy has no connection open to it,
# SIGTERM, start it again, set it ready, wait until haproxy's check has it
# UP. Not one request fails, each backend's stop exits 0, the other backend
# serves the client while one is down, and each takes its clients back
# after its restart. Counts, never timings.
#
# The namespaces (named after this test's pid, so that parallel runs do not
# meet) and every process in them are removed on every way out. Skipped
# with the reason when not root, when `ip netns add` fails or without
# haproxy, unless UNCLOG_REQUIRE_NETNS=1 (CI), which makes that a failure.
import csv
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

from harness import (REPO, Conn, Server, diag, gunzip, is_, note, ok, poll, random_bytes, run,
                     skip_test, terminate, text_bytes)

PREFIX = "uc61-%d" % os.getpid()
BALANCER = "192.0.2.2"  # docs/haproxy.cfg's own addresses
WEBS = {"web1": "192.0.2.11", "web2": "192.0.2.12"}
PORT = 8080
# The client host's addresses, one per load thread. haproxy's `balance source`
# (consistent hashing) puts 192.0.2.50, .51 and .53 on web1, .52 on web2:
# both backends have clients to lose and to take back.
CLIENTS = ["192.0.2.50", "192.0.2.51", "192.0.2.52", "192.0.2.53"]
PER_CONN = 6  # requests on one keep-alive connection before the client closes it
DATA = random_bytes(64 * 1024, 60)
TEXT = text_bytes(16 * 1024)
FILES = {"index.html": b"home", "data.bin": DATA}

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def sh(*args):
    """Run a command to completion; raises with its output if it fails."""
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        raise RuntimeError("%s: status %d: %s" % (" ".join(args), p.returncode,
                                                  (p.stdout + p.stderr).strip()))
    return p.stdout


def enter(ns):
    """Moves the calling thread (only it) into network namespace NS: sockets
    it opens from now on belong there."""
    fd = os.open("/run/netns/" + ns, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "setns %s: %s" % (ns, os.strerror(err)))
    finally:
        os.close(fd)


def in_ns(ns, fn, *args):
    """fn(*args) on a thread of its own inside NS; its result, or its exception raised."""
    out = {}

    def body():
        try:
            enter(ns)
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: B902 - handed to the caller
            out["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class Network:
    """Namespaces on one bridge: a switch namespace holds the bridge, each
    host namespace a veth to it (eth0) and its addresses. teardown() deletes
    every namespace made, whatever else failed."""

    def __init__(self):
        self.made = []
        self.switch = self.add("sw")
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")

    def add(self, name):
        ns = "%s-%s" % (PREFIX, name)
        sh("ip", "netns", "add", ns)
        self.made.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def host(self, name, addrs):
        """A host namespace with ADDRS (a /24 each) on its eth0, wired to the bridge."""
        ns = self.add(name)
        port = "v" + name
        sh("ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        sh("ip", "-n", self.switch, "link", "set", port, "master", "br0", "up")
        for a in addrs:
            sh("ip", "-n", ns, "addr", "add", a + "/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        return ns

    def teardown(self):
        for ns in reversed(self.made):
            try:
                sh("ip", "netns", "del", ns)
            except Exception as e:  # noqa: B902 - delete the others still
                diag("could not delete namespace %s: %s" % (ns, e))
        self.made = []


class Balancer:
    """haproxy running docs/haproxy.cfg in namespace NS: its bind line on
    BALANCER:80, its server lines on WEBS, and a stats socket (the runtime
    API) in TMP. Every other line as the docs have it."""

    def __init__(self, haproxy, ns, tmp):
        text = open(os.path.join(REPO, "docs", "haproxy.cfg")).read()
        text, n = re.subn(r"(?m)^    bind :80$", "    bind %s:80" % BALANCER, text)
        assert n == 1, "docs/haproxy.cfg has one 'bind :80' line"
        servers = re.findall(r"(?m)^    server \S+ \S+$", text)
        assert len(servers) == len(WEBS), "docs/haproxy.cfg lists two servers"
        for line, (name, addr) in zip(servers, WEBS.items()):
            text = text.replace(line, "    server %s %s:%d" % (name, addr, PORT), 1)
        self.sock = os.path.join(tmp, "haproxy.sock")
        text, n = re.subn(r"(?m)^global$", "global\n    stats socket %s mode 600 level admin"
                          % self.sock, text)
        assert n == 1, "docs/haproxy.cfg has a global section"
        self.path = os.path.join(tmp, "haproxy.cfg")
        with open(self.path, "w") as f:
            f.write(text)
        self.log = open(os.path.join(tmp, "haproxy.log"), "wb")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, haproxy, "-db", "-f", self.path],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def command(self, line):
        """One command to the runtime API; its answer."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(self.sock)
            s.sendall(line.encode() + b"\n")
            out = b""
            while True:
                data = s.recv(65536)
                if not data:
                    return out.decode()
                out += data

    def servers(self):
        """`show stat` of backend unclog: {server name: its row}, or {} before the socket is up."""
        try:
            text = self.command("show stat")
        except OSError:
            return {}
        rows = csv.DictReader(text.lstrip("# ").splitlines())
        return {r["svname"]: r for r in rows if r["pxname"] == "unclog" and r["svname"] in WEBS}

    def status(self, name):
        return self.servers().get(name, {}).get("status")

    def stop(self):
        status = terminate(self.proc)
        self.log.close()
        return status in (0, -signal.SIGTERM)


class Load:
    """The client host's users: one thread per address of CLIENTS, inside the
    client namespace, each opening a keep-alive connection through the
    balancer, sending PER_CONN requests on it (GET /data.bin and POST /gzip
    in turn, every answer checked byte for byte), closing it, and again,
    until stop(). Counts what was served and keeps what failed."""

    def __init__(self, ns):
        self.ns = ns
        self.served = {a: 0 for a in CLIENTS}
        self.failures = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.user, args=(a,), daemon=True)
                        for a in CLIENTS]
        for t in self.threads:
            t.start()

    def one(self, conn, i):
        if i % 2 == 0:
            resp = conn.roundtrip("GET", "/data.bin")
            good = resp.status == 200 and resp.body == DATA
        else:
            resp = conn.roundtrip("POST", "/gzip", body=TEXT)
            good = resp.status == 200 and gunzip(resp.body) == TEXT
        if not good:
            raise RuntimeError("%s answered %d with %d bytes" % ("GET" if i % 2 == 0 else "POST",
                                                                 resp.status, len(resp.body)))

    def user(self, source):
        enter(self.ns)
        while not self.done.is_set():
            step = "connect"
            try:
                with Conn(80, host=BALANCER, source=source) as conn:
                    for i in range(PER_CONN):
                        step = "request %d" % (i + 1)
                        self.one(conn, i)
                        with self.lock:
                            self.served[source] += 1
            except Exception as e:  # noqa: B902 - every failure is the finding
                with self.lock:
                    self.failures.append("%s, %s: %s: %s" % (source, step, type(e).__name__, e))

    def count(self):
        with self.lock:
            return sum(self.served.values())

    def everyone(self, n):
        """Whether every address has been served N requests (or something failed)."""
        with self.lock:
            return min(self.served.values()) >= n or self.failures

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(60)


def stats_inside(ns):
    """/stats of the backend in NS, asked on its admin door (admin_listen =
    auto: its own loopback, port PORT + 1)."""
    def ask():
        with Conn(PORT + 1, host="127.0.0.1") as c:
            resp = c.roundtrip("GET", "/stats")
            if resp.status != 200:
                raise RuntimeError("/stats answered %d" % resp.status)
            return json.loads(resp.body)
    return in_ns(ns, ask)


def top_clients(ns):
    return {row["client"] for row in stats_inside(ns)["connections"]["top_clients"].values()}


def log_clients(srv, target="/data.bin"):
    """The client addresses of the access log's lines for TARGET, and how many lines."""
    lines = [l for l in open(srv.access_log).read().splitlines() if '"GET %s ' % target in l]
    return {l.split()[0] for l in lines}, len(lines)


def rolling_restart(lb, web, load):
    """docs/load-balancing.md's recipe for one backend, with the load running."""
    name = web.name
    is_(lb.command("set server unclog/%s state drain" % name).strip(), "",
        "%s: drained in haproxy (runtime API)" % name)
    ok(poll(lambda: lb.servers()[name]["scur"] == "0", 30),
       "%s: haproxy has no connection open to it once its clients closed theirs" % name,
       lb.servers().get(name))
    ok(web.stop(), "%s: stopped by SIGTERM" % name)
    served_down = load.count()
    lines_before = log_clients(web)[1]
    web.start()
    is_(lb.command("set server unclog/%s state ready" % name).strip(), "",
        "%s: set ready again after its start" % name)
    ok(poll(lambda: lb.status(name) == "UP", 30), "%s: UP by haproxy's check" % name,
       lb.servers().get(name))
    ok(load.count() > served_down, "the other backend served the client while %s was down"
       % name, "served %d before, %d after" % (served_down, load.count()))
    ok(poll(lambda: log_clients(web)[1] > lines_before, 30),
       "%s serves its clients again after the restart" % name)


def cluster(haproxy):
    net = Network()
    lb = load = None
    webs = []
    tmp = tempfile.mkdtemp(prefix="unclog-cluster-")
    try:
        lb_ns = net.host("lb", [BALANCER])
        client_ns = net.host("client", CLIENTS)
        for name, addr in WEBS.items():
            ns = net.host(name, [addr])
            srv = Server(files=FILES, name=name, wrapper=["ip", "netns", "exec", ns],
                         conf={"proxy_protocol_from": BALANCER},
                         args=["--listen", "0.0.0.0:%d" % PORT])
            srv.ns = ns
            webs.append(srv.start())
        lb = Balancer(haproxy, lb_ns, tmp)
        ok(poll(lambda: [lb.status(n) for n in WEBS] == ["UP"] * len(WEBS), 30),
           "haproxy (docs/haproxy.cfg) has both backends UP by its check", lb.servers())

        load = Load(client_ns)
        ok(poll(lambda: load.everyone(2 * PER_CONN), 60),
           "each address of the client host is served through the balancer", load.served)
        seen = set()
        for srv in webs:
            # (the access log is flushed once a second)
            clients = poll(lambda: log_clients(srv)[0], 20)
            ok(clients and clients <= set(CLIENTS),
               "%s's access log names the client host's addresses, not the balancer's" % srv.name,
               clients)
            seen |= clients
            note("%s's clients: %s" % (srv.name, " ".join(sorted(clients))))
            ok(poll(lambda: clients <= top_clients(srv.ns), 20),
               "%s's /stats (on its loopback) shows them among its top clients" % srv.name,
               top_clients(srv.ns))
        is_(sorted(seen), CLIENTS, "every address of the client host reached a backend")

        for srv in webs:
            rolling_restart(lb, srv, load)
        load.stop()
        note("%d requests served through the rolling restart" % load.count())
        is_(load.failures[:5], [], "not one request failed through the rolling restart")
        load = None
    finally:
        if load is not None:
            load.stop()
        if lb is not None:
            ok(lb.stop(), "haproxy stops cleanly")
        for srv in webs:
            if srv.alive():
                srv.stop()
        net.teardown()
        shutil.rmtree(tmp, ignore_errors=True)


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    probe = "%s-probe" % PREFIX
    try:
        sh("ip", "netns", "add", probe)
    except Exception as e:  # noqa: B902 - the reason is the message
        return "ip netns add fails: %s" % e
    sh("ip", "netns", "del", probe)
    return None


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main():
    required = os.environ.get("UNCLOG_REQUIRE_NETNS") == "1"
    why = unavailable()
    haproxy = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and
                                          "/usr/sbin/haproxy")
    if why is None and not haproxy:
        why = "haproxy is not installed (apt-get install haproxy)"
    if why is not None:
        if required:
            ok(False, "a cluster in network namespaces can run (UNCLOG_REQUIRE_NETNS=1)", why)
        else:
            skip_test("a cluster in network namespaces behind haproxy", why)
        return
    # A SIGTERM or SIGINT to the test unwinds through cluster()'s clean-up.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    cluster(haproxy)


run(main, timeout=240)
