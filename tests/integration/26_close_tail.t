#!/usr/bin/env python3
# A response that ends its connection (Connection: close, or a graceful
# stop) must reach the client whole even when the client has sent more
# bytes meanwhile: closing a socket with unread input sends an RST, which
# can destroy the tail of the response still in flight (RFC 9112 9.6). The
# server half-closes and drains instead.
import hashlib
import os
import signal
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import SLOW, MiB, Server, is_, ok, random_bytes, run  # noqa: E402

BIG = random_bytes(8 * MiB, 26)


def fetch_with_extra(srv, headers, stop=False):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n")
    time.sleep(0.2)  # the response is under way, the client reads nothing yet
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    if stop:
        srv.proc.send_signal(signal.SIGTERM)
    data, reset = b"", False
    try:
        while len(data) < len(BIG) + 4096:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        reset = True
    s.close()
    body = data.split(b"\r\n\r\n", 1)[1][:len(BIG)] if b"\r\n\r\n" in data else b""
    return reset, hashlib.sha256(body).hexdigest()


def main():
    want = hashlib.sha256(BIG).hexdigest()
    with Server(files={"big.bin": BIG}) as srv:
        reset, got = fetch_with_extra(srv, b"Connection: close\r\n")
        ok(not reset, "Connection: close with more bytes sent meanwhile: no reset")
        is_(got, want, "  and the whole body arrives")
    srv = Server(files={"big.bin": BIG}).start()
    reset, got = fetch_with_extra(srv, b"", stop=True)
    ok(not reset, "SIGTERM during a response, more bytes sent meanwhile: no reset")
    is_(got, want, "  and the whole body arrives")
    srv.proc.wait(timeout=15 * SLOW)
    is_(srv.proc.returncode, 0, "  and the server exits 0")
    err = srv.stderr()
    ok("Sanitizer" not in err and "runtime error" not in err, "  with no sanitizer report")
    harness._live_servers.remove(srv)
    srv.proc = None
    srv.stopped_clean = True
    srv.cleanup()


run(main)
