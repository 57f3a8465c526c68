#!/usr/bin/env python3
# An access log on standard output that nobody reads (a pipe whose reader
# stalled) must not stop the server: lines wait in a bounded queue, the
# rest are dropped and counted, and SIGTERM still ends the process with 0.
# A second signal during a graceful stop closes every connection at once.
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import BIN, SLOW, Server, is_, like, ok, run  # noqa: E402


def fetch(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW) as s:
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def stalled_stdout():
    root = tempfile.mkdtemp(prefix="unclog-test-")
    with open(os.path.join(root, "a.txt"), "wb") as f:
        f.write(b"a\n")
    # stdout is a pipe we never read; stderr goes to a file.
    err_path = os.path.join(root, "stderr.log")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([BIN, "-c", "/dev/null", "--listen", "127.0.0.1:0",
                                 "--access-log", "-", root], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err)
    port = None
    for _ in range(500):
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(err_path).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.02)
    ok(port is not None, "the server started with its log on a pipe")
    if port is None:
        proc.kill()
        return
    answered = sum(b" 200 OK" in fetch(port) for _ in range(3000))
    is_(answered, 3000, "3000 requests answered while nobody reads the log pipe")
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15 * SLOW)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    is_(proc.returncode, 0, "SIGTERM: exit 0 with the pipe still full")
    stderr = open(err_path).read()
    like(stderr, r"access log: \d+ lines lost", "the lost lines are counted")
    ok("Sanitizer" not in stderr and "runtime error" not in stderr, "no sanitizer report",
       stderr[-2000:])
    proc.stdout.close()


def second_signal():
    srv = Server().start()
    srv.sparse_file("big.bin", 256 << 20)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)  # the response is stalled: we read nothing
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    ok(srv.alive(), "after SIGTERM the server waits for the stalled response")
    srv.proc.send_signal(signal.SIGINT)
    try:
        srv.proc.wait(timeout=10 * SLOW)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()
    is_(srv.proc.returncode, 0, "a second signal ends the wait, exit status 0")
    err = srv.stderr()
    ok("Sanitizer" not in err and "runtime error" not in err, "no sanitizer report", err[-2000:])
    s.close()
    harness._live_servers.remove(srv)
    srv.proc = None
    srv.stopped_clean = True
    srv.cleanup()


def main():
    stalled_stdout()
    second_signal()


run(main)
