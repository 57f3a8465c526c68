"""make loadtest-cluster (issue 43): three unclog machines behind HAProxy, in
network namespaces on one box.

The network (netns.py, 192.0.2.0/24 on one bridge): web1..web3 (.11-.13),
each unclog with its defaults, --threads 4, proxy_protocol_from = the
balancer; the balancer (.2) running docs/haproxy.cfg (bind and server lines
filled in, a third server line, its check at /1k.bin, a stats socket for
the runtime API); a victim host (.100), an attacker host (.101), four
attacker hosts for a spread attack (.111-.114), two rate-limited hosts (tbf
10 Mbit/s .120 and 1 Mbit/s .121, both ways) and a users host (.130-.133)
for the lost-backend and rolling-restart parts (users.py).

Parts, each a table in cluster.md:
  attacks   every attack of attacks.ATTACKS from the attacker host, then
            spread over the four (each a quarter of its connections), the
            victim's probe through the balancer; its failures and p99
  slow      the rate-limited hosts' downloads alone and beside a bulk flood:
            their rates, and the backends' memory held (/stats)
  kill      a backend SIGKILLed under the users: requests lost before
            HAProxy's check took it out, lost after (0), its return
  rolling   docs/load-balancing.md's rolling restart of all three under
            the users: drain, scur 0, SIGTERM, start, ready, UP; 0 failed
"""

import csv
import http.client
import json
import os
import re
import shutil
import socket
import sys
import time

from . import FIXTURES, PKG, TEMPLATES, TOP, log
from .attacks import ATTACKS, VICTIMS, WARMUP, attacker_row, victim_row
from .load import FLOOD, Tool, make_small_fixtures, prewarm, small_paths
from .netns import Network, in_ns

LB = "192.0.2.2"
WEBS = {"web1": "192.0.2.11", "web2": "192.0.2.12", "web3": "192.0.2.13"}
PORT = 8080
VICTIM, ATTACKER = "192.0.2.100", "192.0.2.101"
# The attacker host's other addresses: the slow part's flood comes from one on each
# rate-limited host's backend (balance source decides which that is).
ATTACKER_MORE = [f"192.0.2.{i}" for i in range(102, 110)]
SPREAD = ["192.0.2.111", "192.0.2.112", "192.0.2.113", "192.0.2.114"]
SLOW_HOSTS = [("slow10", "192.0.2.120", "10mbit", "/16m.bin"),
              ("slow1", "192.0.2.121", "1mbit", "/1m.bin")]
USERS = ["192.0.2.130", "192.0.2.131", "192.0.2.132", "192.0.2.133"]
PARTS = ("attacks", "slow", "kill", "rolling")
SHARED = ("--hog", "--flood", "--conns")  # the attacker arguments a spread attack divides


def share(args, n):
    """An attacker's arguments with its connection count divided among N hosts."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a in SHARED:
            out[i + 1] = str(-(-int(out[i + 1]) // n))
    return out


def haproxy_config(tmp):
    """docs/haproxy.cfg with the cluster's bind and server lines, its check at /1k.bin (the
    fixtures have no index) and a stats socket: (path of the file, path of the socket)."""
    with open(os.path.join(TOP, "docs", "haproxy.cfg")) as f:
        text = f.read()
    text, n = re.subn(r"(?m)^    bind :80$", f"    bind {LB}:80", text)
    assert n == 1, "docs/haproxy.cfg has one 'bind :80' line"
    lines = re.findall(r"(?m)^    server \S+ \S+\n", text)
    assert lines, "docs/haproxy.cfg has server lines"
    servers = "".join(f"    server {name} {addr}:{PORT}\n" for name, addr in WEBS.items())
    text = text.replace("".join(lines), servers)
    text = text.replace("uri / ", "uri /1k.bin ")
    sock = os.path.join(tmp, "haproxy.sock")
    text = text.replace("global\n", f"global\n    stats socket {sock} mode 600 level admin\n", 1)
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as f:
        f.write(text)
    return path, sock


class Cluster:
    """The network, the three backends and the balancer of one run."""

    def __init__(self, session, net):
        self.session, self.net = session, net
        self.ns = {}
        self.procs = {}  # backend name -> Popen
        self.ns["lb"] = net.host("lb", [LB])
        for name, addr in WEBS.items():
            self.ns[name] = net.host(name, [addr])
        self.ns["victim"] = net.host("victim", [VICTIM])
        self.ns["attacker"] = net.host("attacker", [ATTACKER] + ATTACKER_MORE)
        for i, addr in enumerate(SPREAD):
            self.ns[f"spread{i + 1}"] = net.host(f"spread{i + 1}", [addr])
        for name, addr, rate, _ in SLOW_HOSTS:
            self.ns[name] = net.host(name, [addr], rate=rate)
        self.ns["users"] = net.host("users", USERS)
        for name in WEBS:
            self.start(name)
        conf, self.sock = haproxy_config(session.tmp)
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        with open(os.path.join(session.tmp, "haproxy.log"), "w") as logf:
            self.haproxy = session.procs.spawn(net.exec(self.ns["lb"], [haproxy, "-db", "-f",
                                                                        conf]),
                                               stdout=logf, stderr=logf)
        self.wait(lambda: all(self.status(n) == "UP" for n in WEBS), 30,
                  "haproxy has every backend UP")

    # ---- backends

    def start(self, name):
        """unclog on NAME's namespace, port 8080 on every address; waits until it listens."""
        s = self.session
        logpath = os.path.join(s.tmp, f"{name}.log")
        cmd = [s.unclog, "-c", os.path.join(TEMPLATES, "unclog.conf"), "--listen",
               f"0.0.0.0:{PORT}", "--root", FIXTURES, "--threads", "4", "--access-log", "off",
               "--proxy-protocol-from", LB]
        with open(logpath, "a") as logf:
            self.procs[name] = s.procs.spawn(self.net.exec(self.ns[name], cmd), stdout=logf,
                                             stderr=logf)
        self.wait(lambda: self.stats(name, quiet=True), 10, f"{name} answers /stats")

    def stats(self, name, quiet=False):
        """NAME's /stats, asked on its admin door (admin_listen = auto: its own
        loopback, port PORT + 1; None if quiet and it does not answer)."""
        def ask():
            c = http.client.HTTPConnection("127.0.0.1", PORT + 1, timeout=5)
            try:
                c.request("GET", "/stats")
                return json.loads(c.getresponse().read())
            finally:
                c.close()
        try:
            return in_ns(self.ns[name], ask)
        except (OSError, ValueError, http.client.HTTPException):
            if quiet:
                return None
            raise

    def rss_mib(self, name):
        try:
            with open(f"/proc/{self.procs[name].pid}/status") as f:
                return int(re.search(r"VmRSS:\s*(\d+)", f.read())[1]) / 1024
        except (OSError, TypeError):
            return 0.0

    # ---- the balancer's runtime API

    def command(self, line):
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
        try:
            text = self.command("show stat")
        except OSError:
            return {}
        rows = csv.DictReader(text.lstrip("# ").splitlines())
        return {r["svname"]: r for r in rows if r["pxname"] == "unclog" and r["svname"] in WEBS}

    def status(self, name):
        return self.servers().get(name, {}).get("status")

    @staticmethod
    def wait(pred, timeout, what):
        """Polls pred until true; raises naming WHAT after timeout seconds (a hang guard)."""
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise RuntimeError(f"gave up waiting: {what}")
            time.sleep(0.05)

    # ---- load

    def tool(self, host, cmd, seconds):
        return Tool(self.session, self.net.exec(self.ns[host], cmd), seconds, cpu=None)

    def probe(self, host, source, args, seconds, timeout=10):
        cmd = [self.session.probe, "--host", LB, "--port", "80", *args, "--duration",
               f"{seconds:g}", "--from", source, "--timeout", str(timeout)]
        return self.tool(host, cmd, seconds)

    def slow(self, host, source, args, seconds):
        cmd = [sys.executable, os.path.join(PKG, "slow.py"), "--host", LB, "--port", "80",
               *args, "--duration", f"{seconds:g}", "--from", source]
        return self.tool(host, cmd, seconds)

    def users(self, seconds):
        cmd = [sys.executable, os.path.join(PKG, "users.py"), "--host", LB, "--port", "80",
               "--from", ",".join(USERS), "--duration", f"{seconds:g}"]
        return self.tool("users", cmd, seconds)

    def placement(self):
        """Which backend serves each client address (balance source): every host asks at
        once for a second, then each backend's /stats top clients say."""
        hosts = [("victim", VICTIM)] + [("attacker", a) for a in [ATTACKER] + ATTACKER_MORE] + \
            [(f"spread{i + 1}", a) for i, a in enumerate(SPREAD)] + \
            [(n, a) for n, a, _, _ in SLOW_HOSTS] + [("users", a) for a in USERS]
        tools = [self.probe(h, a, ("--get", "/1k.bin", "--rate", "20"), 1.5) for h, a in hosts]
        time.sleep(1.0)
        where = {}
        for name in WEBS:
            for row in self.stats(name)["connections"]["top_clients"].values():
                where[row["client"]] = name
        for t in tools:
            t.json()
        return {a: where.get(a, "?") for _, a in hosts}


# ---- the parts ---------------------------------------------------------------

def attack_phase(cl, attack, hosts, seconds):
    """The victim for SECONDS after the attack's lead, from HOSTS [(ns, addr)] (none: alone)."""
    tools = []
    for host, addr in hosts:
        args = share(attack.attacker, len(hosts))
        length = attack.lead + WARMUP + seconds + 0.5
        start = cl.slow if attack.slow else cl.probe
        tools.append(start(host, addr, args, length))
    if hosts:
        time.sleep(attack.lead)
    args, _ = VICTIMS[attack.victim]
    row = victim_row(cl.probe("victim", VICTIM, args, seconds).json(), attack.victim)
    figures = [attacker_row(t.json()) for t in tools]
    for key in ("attacker_requests", "attacker_errors", "attacker_refused"):
        row[key] = sum(f[key] for f in figures) if figures else ""
    return row


def run_attacks(cl, s, chosen):
    make_small_fixtures()
    rows, alone = [], {}
    spread = [(f"spread{i + 1}", a) for i, a in enumerate(SPREAD)]
    for attack in [a for a in ATTACKS if a.name in chosen]:
        prewarm(["/1k.bin", "/96k.bin", "/16m.bin", *FLOOD] +
                (small_paths() if attack.name == "files" else []))
        if attack.victim not in alone:
            alone[attack.victim] = attack_phase(cl, attack, [], s["victim"])
            log(f"  victim alone ({attack.victim}): {brief(alone[attack.victim])}")
        row = {"attack": attack.name, "title": attack.title, "alone": alone[attack.victim]}
        for key, hosts in (("one", [("attacker", ATTACKER)]), ("spread", spread)):
            row[key] = attack_phase(cl, attack, hosts, s["victim"])
            log(f"  {attack.name:6} {key:6}: {brief(row[key])}")
            time.sleep(1.0)  # the attackers' connections close before the next phase
        rows.append(row)
    return rows


def brief(r):
    v = (f"{r['victim_mb_s']} MB/s" if r.get("victim_mb_s") not in (None, "")
         else f"p99 {r.get('victim_p99_ms')} ms")
    return f"victim {v}, failed {r.get('victim_failed')}"


def run_slow(cl, s, where):
    """The rate-limited hosts' downloads, alone then beside a bulk flood on their backends
    (from the attacker host's addresses that balance source puts there)."""
    rows = []
    bulk = next(a for a in ATTACKS if a.name == "bulk")
    backends = {where.get(addr) for _, addr, _, _ in SLOW_HOSTS}
    sources = [next((a for a in [ATTACKER] + ATTACKER_MORE if where.get(a) == b), None)
               for b in sorted(backends)]
    sources = [a for a in sources if a]
    for phase in ("alone", "beside a bulk flood"):
        floods = ([cl.probe("attacker", a, share(bulk.attacker, len(sources)), s["slow"] + 2)
                   for a in sources] if phase != "alone" else [])
        if floods:
            time.sleep(1.0)
        tools = [(name, addr, rate, path,
                  cl.probe(name, addr, ("--flood", "1", "--get", path), s["slow"], timeout=60))
                 for name, addr, rate, path in SLOW_HOSTS]
        held = {n: 0 for n in WEBS}
        peak_rss = {n: 0.0 for n in WEBS}
        end = time.monotonic() + s["slow"]
        while time.monotonic() < end:
            for n in WEBS:
                st = cl.stats(n, quiet=True)
                if st:
                    held[n] = max(held[n], st["memory"]["held"])
                peak_rss[n] = max(peak_rss[n], cl.rss_mib(n))
            time.sleep(1.0)
        flood_mb_s = sum(f.json()["mb_s"] for f in floods)
        for name, addr, rate, path, t in tools:
            r = t.json()
            rows.append(dict(phase=phase, host=name, backend=where.get(addr), link=rate,
                             path=path, mbit_s=round(r["mb_s"] * 8, 2), requests=r["requests"],
                             errors=r["errors"], held=dict(held), rss=dict(peak_rss),
                             flood=" ".join(f"{a} ({where.get(a)})" for a in sources)
                             if floods else "", flood_mb_s=round(flood_mb_s, 1)))
            log(f"  slow {phase}: {name} ({rate}) {r['mb_s'] * 8:.2f} Mbit/s, "
                f"errors {r['errors']}")
    return rows


def run_kill(cl, s, where):
    """SIGKILL the backend with the most users; lost requests before and after the check."""
    counts = {n: sum(1 for a in USERS if where.get(a) == n) for n in WEBS}
    name = max(WEBS, key=lambda n: counts[n])
    users = cl.users(120)
    time.sleep(s["kill_lead"])
    before = cl.stats(name)["requests"]
    t_kill = time.monotonic()
    cl.procs[name].kill()
    cl.procs[name].wait()
    cl.wait(lambda: "DOWN" in (cl.status(name) or ""), 60,
            f"haproxy's check takes {name} out")
    t_down = time.monotonic()
    time.sleep(2.0)
    t_start = time.monotonic()
    cl.start(name)
    cl.wait(lambda: cl.status(name) == "UP", 60, f"haproxy's check has {name} UP again")
    t_up = time.monotonic()
    served0 = cl.stats(name)["requests"]
    time.sleep(s["kill_lead"])
    served1 = cl.stats(name)["requests"]
    users.proc.send_signal(15)
    r = users.json()
    times = [f[3] for f in r["failures"]]  # when each failed request began
    row = dict(backend=name, users_on_it=counts[name], served_before_kill=before,
               lost_before_down=sum(1 for t in times if t_kill <= t <= t_down),
               lost_after_down=sum(1 for t in times if t > t_down),
               lost_before_kill=sum(1 for t in times if t < t_kill),
               down_after_s=round(t_down - t_kill, 2), up_after_start_s=round(t_up - t_start, 2),
               served_after_return=served1 - served0, users_ok=r["ok"], users_failed=r["failed"],
               failures=r["failures"][:10])
    log(f"  kill {name}: lost {row['lost_before_down']} before the check ({row['down_after_s']}"
        f" s), {row['lost_after_down']} after; back UP {row['up_after_start_s']} s after its "
        f"start, then served {row['served_after_return']} requests")
    return row


def run_rolling(cl, s):
    """docs/load-balancing.md's recipe, web1 to web3, under the users."""
    users = cl.users(600)
    time.sleep(s["kill_lead"])
    steps = []
    for name in WEBS:
        t0 = time.monotonic()
        cl.command(f"set server unclog/{name} state drain")
        cl.wait(lambda: cl.servers()[name]["scur"] == "0", 60,
                f"haproxy has no connection open to {name}")
        t_drained = time.monotonic()
        rc, _ = cl.session.procs.stop(cl.procs[name], grace=20)
        t_stopped = time.monotonic()
        cl.start(name)
        cl.command(f"set server unclog/{name} state ready")
        cl.wait(lambda: cl.status(name) == "UP", 60, f"haproxy's check has {name} UP")
        t_up = time.monotonic()
        steps.append(dict(backend=name, drained_s=round(t_drained - t0, 2), exit=rc,
                          stopped_s=round(t_stopped - t_drained, 2),
                          up_s=round(t_up - t_stopped, 2)))
        log(f"  rolling {name}: drained in {steps[-1]['drained_s']} s, exit {rc}, UP "
            f"{steps[-1]['up_s']} s after")
    time.sleep(s["kill_lead"])
    users.proc.send_signal(15)
    r = users.json()
    return dict(steps=steps, ok=r["ok"], failed=r["failed"], failures=r["failures"][:10])
