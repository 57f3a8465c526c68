"""Helpers for the hardening tests (2x_*.t): raw exchanges with hostile bytes,
polling with hang guards, and process figures from /proc.

Imported next to harness.py; nothing in harness depends on it.
"""

import os
import re
import socket
import time

from harness import SLOW, Conn, Server


def poll(pred, timeout, interval=0.05):
    """Call pred until it returns something true or timeout*SLOW seconds
    pass (a hang guard, not a timing check). Returns pred's last value."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def exchange(port, raw, timeout=5, pause=None):
    """Send raw (bytes, or a list of pieces sent `pause` seconds apart), then
    read until the server closes. Returns (data, end) where end is "closed",
    "reset" or "open" (nothing more within timeout*SLOW seconds). A server
    that closes while we still send is fine: we read what it said."""
    pieces = raw if isinstance(raw, list) else [raw]
    data = bytearray()
    with Conn(port, timeout=timeout * SLOW) as c:
        try:
            for i, piece in enumerate(pieces):
                if i and pause:
                    time.sleep(pause)
                c.sock.sendall(piece)
        except OSError:
            pass
        end = read_to_end(c.sock, data)
    return bytes(data), end


def read_to_end(sock, data):
    """Append what sock receives to data until the peer closes. Returns how
    it ended: "closed", "reset", or "open" (the socket's timeout passed)."""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return "closed"
            data += chunk
    except socket.timeout:
        return "open"
    except ConnectionResetError:
        return "reset"


def statuses(data):
    """The status codes of every response head in data, in order."""
    return [int(m) for m in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", data)]


def cpu_seconds(pid):
    """User plus system CPU time of a process, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / float(os.sysconf("SC_CLK_TCK"))


class WrappedServer(Server):
    """A Server started through a wrapper command, e.g. ["prlimit",
    "--nofile=64:64", "--"], which must exec the server (same pid)."""

    def __init__(self, wrapper, **kw):
        super().__init__(**kw)
        self.wrapper = list(wrapper)

    def command(self):
        return self.wrapper + super().command()
