#!/usr/bin/env python3
# Shutdown: SIGTERM and SIGINT end the server with status 0 and a clean
# sanitizer report, idle or with open connections, stalled downloads and
# threadpool work in flight. A /gzip response whose status is still held
# (its first slot not full, its body not in) when the signal comes is
# answered, not dropped: 200 if its body comes in the grace time, else 503
# with Connection: close once the grace is over.
import signal
import threading
import time

from harness import (KiB, MiB, Conn, Server, build_request, gunzip, is_, ok, poll, random_bytes,
                     run, text_bytes)

FILES = {"x.txt": b"hello"}


def new_server(name):
    srv = Server(files=FILES, args=["--partition", "4k", "--threads", "2"], name=name)
    srv.sparse_file("huge.bin", 1024 * MiB)
    return srv.start()


def send_quietly(conn, raw):
    try:
        conn.send(raw)
    except OSError:
        pass


def held_gzip(name):
    """A server, and a /gzip upload whose status it holds: two slices of
    compressible text deflated (counted by /stats), far from filling the
    first output slot, and the rest of the body not sent. Returns the
    server, the connection and the rest of the request."""
    srv = Server(files=FILES, args=["--gzip-partition", "4k"], name=name).start()
    body = text_bytes(MiB)
    raw = build_request("POST", "/gzip", body=body)
    head_len = len(raw) - len(body)
    upload = Conn(srv.port)
    upload.send(raw[:head_len + 8 * KiB])
    ok(poll(lambda: srv.stats()["jobs"]["gzip"]["completed"] == 2),
       "%s: two slices deflated, the status held" % name)
    return srv, upload, raw[head_len + 8 * KiB:], body


def test_held_gzip():
    srv, upload, rest, body = held_gzip("server stopped while a /gzip body comes in time")
    srv.send_signal(signal.SIGTERM)
    upload.send(rest)
    resp = upload.read_response()
    is_((resp.status, gunzip(resp.body)), (200, body),
        "body in within the grace time: 200, the whole body gzipped")
    upload.close()
    srv.wait_exit("after SIGTERM")

    srv, upload, rest, body = held_gzip("server stopped while a /gzip body stalls")
    srv.send_signal(signal.SIGTERM)
    resp = upload.read_response()  # once the grace is over
    is_(resp.status, 503, "body not in within the grace time: 503, not a silent close")
    ok("close" in resp.tokens("Connection"), "and Connection: close")
    upload.close()
    srv.wait_exit("after SIGTERM")


def main():
    srv = new_server("idle server")
    ok(srv.alive(), "idle server runs")
    srv.stop(signal.SIGTERM)

    srv = new_server("SIGINT server")
    is_(srv.get("/x.txt").body, b"hello", "a request before SIGINT")
    srv.stop(signal.SIGINT)

    srv = new_server("busy server")
    conns = []
    idle = Conn(srv.port)  # keep-alive connection, idle after one request
    is_(idle.roundtrip("GET", "/x.txt").body, b"hello", "keep-alive connection made a request")
    conns.append(idle)
    half = Conn(srv.port)  # half a request
    half.send(b"GET /x.txt HTTP/1.1\r\nHost: a\r\n")
    conns.append(half)
    for _ in range(3):  # downloads stalled on a full socket, reads in flight
        c = Conn(srv.port, rcvbuf=16 * KiB)
        c.request("GET", "/huge.bin")
        conns.append(c)
    body = random_bytes(4 * MiB, 31)  # a gzip upload, half sent
    upload = Conn(srv.port)
    upload.send(build_request("POST", "/gzip", body=body)[:2 * MiB])
    conns.append(upload)
    # A gzip upload streaming through the pool. Its client reads nothing, so
    # the server stops taking the body once the socket is full: send from a
    # thread, which the close at the end wakes.
    big_gzip = Conn(srv.port)
    raw = build_request("POST", "/gzip", body=body)
    threading.Thread(target=send_quietly, args=(big_gzip, raw), daemon=True).start()
    conns.append(big_gzip)
    time.sleep(0.3)
    srv.stop(signal.SIGTERM)
    for c in conns:
        c.close()

    # A signal arriving in the middle of steady traffic.
    srv = new_server("loaded server")
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                with Conn(srv.port, timeout=2) as c:
                    c.roundtrip("GET", "/x.txt")
            except Exception:  # refused, reset or cut short by the shutdown
                pass

    workers = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
    for w in workers:
        w.start()
    time.sleep(0.5)
    srv.stop(signal.SIGTERM)
    stop.set()
    for w in workers:
        w.join(5)

    test_held_gzip()


run(main)
