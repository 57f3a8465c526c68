"""Hosts in network namespaces on one bridge, for make loadtest-cluster.

A switch namespace holds the bridge; each host is a namespace with a veth
(eth0) to it, its addresses (192.0.2.0/24) and its loopback up, and may have
its link rate-limited both ways with tbf. Every namespace is named after the
run's PID and deleted by teardown(), which the caller runs on every way out.
"""

import ctypes
import os
import subprocess
import threading

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def sh(*args):
    """Runs a command to completion; raises with its output if it fails."""
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: status {p.returncode}: "
                           f"{(p.stdout + p.stderr).strip()}")
    return p.stdout


def unavailable(prefix):
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    try:
        sh("ip", "netns", "add", f"{prefix}-probe")
    except Exception as e:  # noqa: B902 - the reason is the message
        return f"ip netns add fails: {e}"
    sh("ip", "netns", "del", f"{prefix}-probe")
    return None


def enter(ns):
    """Moves the calling thread (only it) into network namespace NS."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def in_ns(ns, fn, *args):
    """fn(*args) on a thread of its own inside NS: its result, or its exception raised."""
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
    def __init__(self, prefix):
        self.prefix = prefix
        self.made = []
        self.switch = self._add("sw")
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")

    def _add(self, name):
        ns = f"{self.prefix}-{name}"
        sh("ip", "netns", "add", ns)
        self.made.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def host(self, name, addrs, rate=None):
        """A host namespace with ADDRS (/24) on eth0; RATE ("10mbit") limits its link both
        ways (tbf on its eth0 and on the switch's port towards it)."""
        ns = self._add(name)
        port = f"v{name}"
        sh("ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        sh("ip", "-n", self.switch, "link", "set", port, "master", "br0", "up")
        for a in addrs:
            sh("ip", "-n", ns, "addr", "add", f"{a}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        if rate:
            for where, dev in ((self.switch, port), (ns, "eth0")):
                sh("ip", "netns", "exec", where, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                   "rate", rate, "burst", "32kb", "latency", "100ms")
        return ns

    def exec(self, ns, cmd):
        """cmd run inside NS (ip netns exec execs it: the same PID)."""
        return ["ip", "netns", "exec", ns, *cmd]

    def teardown(self):
        """Deletes every namespace made (their processes must be gone); the failures."""
        failed = []
        for ns in reversed(self.made):
            try:
                sh("ip", "netns", "del", ns)
            except Exception as e:  # noqa: B902 - delete the others still
                failed.append(f"{ns}: {e}")
        self.made = []
        return failed
