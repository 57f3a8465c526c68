#!/usr/bin/env python3
# A response that ends its connection (Connection: close, or a graceful
# stop) must reach the client whole even when the client has sent more
# bytes meanwhile: closing a socket with unread input sends an RST, which
# can destroy the tail of the response still in flight (RFC 9112 9.6). The
# server half-closes and drains instead.
import signal
import time

from harness import KiB, MiB, Conn, Server, is_, ok, random_bytes, run, split_response

BIG = random_bytes(8 * MiB, 26)


def fetch_with_extra(srv, headers, stop=False):
    """GET /big.bin, then another request while the answer is under way.
    Returns (how the connection ended, the first answer's body)."""
    with Conn(srv.port, rcvbuf=64 * KiB) as c:
        c.request("GET", "/big.bin", headers=headers)
        time.sleep(0.2)  # the response is under way, the client reads nothing yet
        c.request("GET", "/big.bin")
        if stop:
            srv.send_signal(signal.SIGTERM)
        data, end = c.read_to_end()
    return end, split_response(data)[1][:len(BIG)]


def main():
    with Server(files={"big.bin": BIG}) as srv:
        end, body = fetch_with_extra(srv, {"Connection": "close"})
        is_(end, "closed", "Connection: close with more bytes sent meanwhile: closed, no reset")
        ok(body == BIG, "  and the whole body arrives", "%d bytes" % len(body))
    with Server(files={"big.bin": BIG}) as srv:
        end, body = fetch_with_extra(srv, {}, stop=True)
        is_(end, "closed", "SIGTERM during a response, more bytes sent meanwhile: no reset")
        ok(body == BIG, "  and the whole body arrives", "%d bytes" % len(body))
        srv.wait_exit("after SIGTERM")


run(main)
