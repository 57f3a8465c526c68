#!/usr/bin/env python3
# Shutdown: SIGTERM and SIGINT end the server with status 0 and a clean
# sanitizer report, idle or with open connections, stalled downloads and
# threadpool work in flight.
import signal
import threading
import time

from harness import KiB, MiB, Conn, Server, build_request, is_, ok, random_bytes, run

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


run(main)
