#!/usr/bin/env python3
# Timeouts, each on its own per-connection deadline: a request head trickled
# byte by byte (slowloris) is cut with 408 at header_timeout from its first
# byte; a stalled body gets 408 at body_timeout of silence, a trickled one
# at body_max_time from its head; an idle new or
# keep-alive connection is closed without a word; a client that stops
# reading its response is dropped at send_timeout and its fd released, while
# a slow reader that keeps reading is served in full. Times are small here;
# the checks are hang guards, never thresholds.
import time

from harness import (SLOW, KiB, MiB, Conn, Server, build_request, exchange, is_, ok, poll, run,
                     statuses)

CONF = {"header_timeout": "600ms", "body_timeout": "600ms", "keepalive_timeout": "400ms",
        "send_timeout": "1s"}
FILES = {"x.txt": b"hello"}
BIG = 64 * MiB
SLOW_FILE = 8 * MiB


def trickle(port, raw, gap):
    """Send raw one byte every gap seconds until the server answers or
    closes. Returns (bytes sent, everything received, how it ended)."""
    with Conn(port) as c:
        sent = 0
        try:
            while sent < len(raw):
                c.send(raw[sent:sent + 1])
                sent += 1
                if c.wait_closed(gap) != "open":
                    break
        except OSError:
            pass
        data, end = c.read_to_end()
        return sent, data, end


def test_header_timeout(srv):
    raw = build_request("GET", "/x.txt", headers={"X-Slow": "s" * 300})
    sent, data, end = trickle(srv.port, raw, 0.05)
    is_(statuses(data), [408], "slowloris: a head trickled byte by byte gets 408")
    ok(b"Connection: close" in data, "slowloris: the 408 says Connection: close")
    ok(sent < len(raw), "slowloris: cut before the head was complete",
       "sent %d of %d bytes" % (sent, len(raw)))
    is_(end, "closed", "slowloris: then the connection is closed")

    data, end = exchange(srv.port, b"GET /x.txt HTTP/1.1\r\nHost: a\r\n", timeout=10)
    is_((statuses(data), end), ([408], "closed"), "half a head, then silence: 408 and close")


def test_idle(srv):
    data, end = exchange(srv.port, b"", timeout=10)
    is_((data, end), (b"", "closed"), "a connection that sends nothing is closed without a word")
    with srv.conn() as c:
        resp = c.roundtrip("GET", "/x.txt")
        is_(resp.status, 200, "keep-alive: a first request")
        is_(c.wait_closed(10 * SLOW), "closed", "keep-alive: closed when idle, without a word")
    with srv.conn() as c:
        for i in range(5):
            time.sleep(0.1)
            resp = c.roundtrip("GET", "/x.txt")
            if not ok(resp.status == 200, "keep-alive: request %d after a short pause" % (i + 1)):
                break


def test_body_timeout(srv):
    head = b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n"
    data, end = exchange(srv.port, head + b"0123456789", timeout=10)
    is_((statuses(data), end), ([408], "closed"), "a body that stops coming: 408 and close")
    data, end = exchange(srv.port, head, timeout=10)
    is_((statuses(data), end), ([408], "closed"), "a body that never comes: 408 and close")

    # Silence is what counts, not the total time: a slow but steady body is read.
    body = b"b" * 20
    raw = build_request("POST", "/gzip", body=body, headers={"Connection": "close"})
    split = raw.index(b"\r\n\r\n") + 4
    pieces = [raw[:split]] + [body[i:i + 1] for i in range(len(body))]
    data, end = exchange(srv.port, pieces, pause=0.05, timeout=10)
    is_(statuses(data), [200], "a body sent one byte every 50 ms (1 s in all) is served")


def test_send_timeout(srv):
    base_fds = srv.fd_count()
    stalled = Conn(srv.port, rcvbuf=16 * KiB)
    stalled.request("GET", "/big.bin")
    gone = poll(lambda: srv.stats()["connections"]["active"] == 1, 15)
    ok(gone, "a client that reads nothing of 64 MiB is dropped",
       repr(srv.stats()["connections"]))
    fds = poll(lambda: srv.fd_count() <= base_fds, 10)
    ok(fds, "its socket and file are closed", "fds %d, baseline %d" % (srv.fd_count(), base_fds))
    got = len(stalled.read_to_end()[0])
    stalled.close()
    ok(got < BIG, "it got part of the file, not all of it", "got %d bytes" % got)

    # A slow reader that keeps taking bytes is never cut.
    with Conn(srv.port, rcvbuf=64 * KiB) as c:
        c.request("GET", "/slow.bin", headers={"Connection": "close"})
        got = 0
        c.sock.settimeout(10 * SLOW)
        try:
            while True:
                chunk = c.sock.recv(256 * KiB)
                if not chunk:
                    break
                if got // MiB != (got + len(chunk)) // MiB:
                    time.sleep(0.15)
                got += len(chunk)
        except OSError as e:
            ok(False, "slow reader: no error (%s)" % e)
        ok(got > SLOW_FILE, "a reader pausing 150 ms after every MiB gets all 8 MiB",
           "got %d bytes" % got)

    resp = srv.get("/x.txt")
    is_((resp.status, resp.body), (200, b"hello"), "the server still answers")


def test_body_max_time():
    """A body steady enough for body_timeout but not done within
    body_max_time gets 408 and the connection closes; one done in time is
    served."""
    conf = dict(CONF, body_timeout="2s", body_max_time="1s", admin="on")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with Server(files=FILES, conf=conf) as srv:
        for target, route, headers in (("/gzip", "a streamed body (/gzip)", {}),
                                       ("/settings", "a body read whole (/settings)", form)):
            body = b"log_level=info&" * 3
            raw = build_request("POST", target, body=body, headers=headers)
            split = raw.index(b"\r\n\r\n") + 4
            with Conn(srv.admin_port if target == "/settings" else srv.port) as c:
                c.send(raw[:split])  # the head at once: header_timeout is not what cuts
                sent = 0
                try:
                    while sent < len(body) and c.wait_closed(0.1) == "open":
                        c.send(body[sent:sent + 1])
                        sent += 1
                except OSError:
                    pass
                data, end = c.read_to_end()
            ok(sent < len(body), "%s sent one byte every 100 ms (4.5 s in all) is cut short"
               % route, "sent %d" % sent)
            is_((statuses(data), end), ([408], "closed"), "%s: 408 and close" % route)
        raw = build_request("POST", "/gzip", body=b"b" * 5, headers={"Connection": "close"})
        split = raw.index(b"\r\n\r\n") + 4
        pieces = [raw[:split]] + [raw[i:i + 1] for i in range(split, len(raw))]  # 0.5 s
        data, end = exchange(srv.port, pieces, pause=0.1, timeout=10)
        is_(statuses(data), [200], "a body done within body_max_time is served")


def main():
    srv = Server(files=FILES, conf=CONF)
    srv.sparse_file("big.bin", BIG)
    srv.sparse_file("slow.bin", SLOW_FILE)
    with srv:
        test_header_timeout(srv)
        test_idle(srv)
        test_body_timeout(srv)
        test_send_timeout(srv)
    test_body_max_time()


run(main)
