#!/usr/bin/env python3
# An access log on standard output that nobody reads (a pipe whose reader
# stalled) must not stop the server: lines wait in a bounded queue, the
# rest are dropped and counted, and SIGTERM still ends the process with 0.
# A second signal during a graceful stop closes every connection at once.
import signal
import time

from harness import KiB, MiB, Conn, Server, build_request, exchange, is_, like, ok, run, statuses

GET_CLOSE = build_request("GET", "/a.txt", headers={"Connection": "close"})


def stalled_stdout():
    srv = Server(files={"a.txt": b"a\n"}, args=["--access-log", "-"], stdout_pipe=True,
                 name="server logging to a full pipe")
    with srv:
        answered = sum(statuses(exchange(srv.port, GET_CLOSE)[0]) == [200] for _ in range(3000))
        is_(answered, 3000, "3000 requests answered while nobody reads the log pipe")
        srv.stop()  # exit 0 with the pipe still full
        like(srv.stderr(), r"access log: \d+ lines lost", "the lost lines are counted")


def second_signal():
    srv = Server(name="server with a stalled download")
    srv.sparse_file("big.bin", 256 * MiB)
    with srv, Conn(srv.port, rcvbuf=4 * KiB) as stalled:
        stalled.request("GET", "/big.bin")  # and we read nothing
        time.sleep(0.3)
        srv.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        ok(srv.alive(), "after SIGTERM the server waits for the stalled response")
        srv.send_signal(signal.SIGINT)
        srv.wait_exit("after a second signal")


def main():
    stalled_stdout()
    second_signal()


run(main)
