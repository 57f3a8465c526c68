#!/usr/bin/env python3
# Access log in Common Log Format: to a file (flushed within a moment or at
# shutdown), to stdout with `-`, and not at all with `off`. A stop right
# after a request, stdout a pipe that is read, prints the line and counts
# nothing lost (25_stalled_log.t has a pipe nobody reads, which loses lines).
import datetime
import os
import re
import signal
import time

from harness import Server, build_request, exchange, is_, like, note, ok, poll, run, statuses

CLF_DATE = r"\[\d\d/(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]"
PREFIX = r"^127\.0\.0\.1 - - " + CLF_DATE + " "

EXPECTED = [
    ("GET /x.txt", PREFIX + r'"GET /x\.txt HTTP/1\.1" 200 5$'),
    ("GET /missing.txt", PREFIX + r'"GET /missing\.txt HTTP/1\.1" 404 (\d+|-)$'),
    ("HEAD /x.txt", PREFIX + r'"HEAD /x\.txt HTTP/1\.1" 200 (0|-|5)$'),
    ("GET /x.txt?v=1", PREFIX + r'"GET /x\.txt\?v=1 HTTP/1\.1" 200 5$'),
    ("POST /gzip", PREFIX + r'"POST /gzip HTTP/1\.1" 200 \d+$'),
    ("HTTP/1.0 GET", PREFIX + r'"GET /x\.txt HTTP/1\.0" 200 5$'),
]


def make_requests(srv):
    with srv.conn() as conn:
        conn.roundtrip("GET", "/x.txt")
        conn.roundtrip("GET", "/missing.txt")
        conn.roundtrip("HEAD", "/x.txt")
        conn.roundtrip("GET", "/x.txt?v=1")
        conn.roundtrip("POST", "/gzip", body=b"some body")
    with srv.conn() as conn:
        conn.roundtrip("GET", "/x.txt", version="HTTP/1.0")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def check_lines(text, where):
    lines = text.splitlines()
    for desc, pattern in EXPECTED:
        ok(any(re.search(pattern, line) for line in lines), "%s: a CLF line for %s" % (where, desc),
           "pattern %s" % pattern, "log:\n" + text[-3000:])
    like(text, r"^127\.0\.0\.1 ", "%s: first line starts with the client address" % where)
    m = re.search(r"\[([^]]+)\]", text)
    try:
        when = datetime.datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S %z").timestamp()
    except (AttributeError, ValueError):
        when = 0
    # Not a timing check: a time zone mix-up is hours off.
    ok(abs(when - time.time()) < 600, "%s: the time stamp is now (%s)"
       % (where, m.group(1) if m else None))


def quick_stop(sig):
    """A request, then at once (before the once-a-second flush) the signal."""
    name = signal.Signals(sig).name
    srv = Server(files={"x.txt": b"hello"}, args=["--access-log", "-"], stdout_pipe=True,
                 name="stdout-pipe server stopped by " + name).start()
    data, _ = exchange(srv.port, build_request("GET", "/x.txt", headers={"Connection": "close"}))
    is_(statuses(data), [200], "%s: the request before the stop answered" % name)
    srv.send_signal(sig)
    out = srv.proc.stdout.read().decode("utf-8", "replace")  # until the server's exit
    srv.wait_exit("after " + name)
    like(out, PREFIX + r'"GET /x\.txt HTTP/1\.1" 200 5\n\Z',
         "%s right after a request: the access line is on the pipe" % name)
    ok("lines lost" not in srv.stderr(), "%s: no line counted as lost" % name, srv.stderr())


def lost_lines_counted():
    """stdout a pipe nobody reads while more is logged than the pipe and the
    queue hold (lines of 1.6 KB): the stop warns, and every line is on the
    pipe or counted lost, only a chunk (64 KiB) cut short counted too many."""
    n, target = 2000, "/x.txt?" + "q" * 1500
    srv = Server(files={"x.txt": b"hello"}, args=["--access-log", "-"], stdout_pipe=True,
                 name="server logging to a pipe read after the stop").start()
    with srv.conn() as c:
        answered = sum(c.roundtrip("GET", target).status == 200 for _ in range(n))
    is_(answered, n, "%d requests answered while nobody reads the log pipe" % n)
    srv.send_signal(signal.SIGTERM)
    lines = srv.proc.stdout.read().count(b"\n")
    srv.wait_exit("after SIGTERM, the pipe full")
    m = re.search(r"access log: (\d+) lines lost", srv.stderr())
    lost = int(m.group(1)) if m else 0
    ok(m and lost > 0, "the stop says how many lines were lost", srv.stderr()[-1000:])
    per_chunk = 64 * 1024 // (len(target) + 60)
    ok(n <= lines + lost <= n + per_chunk, "%d lines on the pipe + %d lost: all %d, counted once"
       " (but a chunk cut short: %d lines at most)" % (lines, lost, n, per_chunk))


def main():
    files = {"x.txt": b"hello"}
    with Server(files=files) as srv:
        make_requests(srv)
        if poll(lambda: len(read(srv.access_log).splitlines()) >= len(EXPECTED), 3):
            note("access log flushed while running")
            check_lines(read(srv.access_log), "log file, running")
        else:
            note("access log not flushed after 3 s; checking after shutdown")
            srv.stop()
            check_lines(read(srv.access_log), "log file, after shutdown")

    with Server(files=files, args=["--access-log", "-"], name="stdout-log server") as srv:
        make_requests(srv)
        srv.stop()  # stdout may be block-buffered until the exit
        check_lines(srv.stdout(), "stdout")

    with Server(files=files, args=["--access-log", "off"], name="no-log server") as srv:
        make_requests(srv)
        srv.stop()
        is_(os.path.exists(srv.access_log), False, "--access-log off: no log file")
        ok(not re.search(r'"GET /x\.txt', srv.stdout() + srv.stderr()),
           "--access-log off: no CLF line on stdout or stderr")

    quick_stop(signal.SIGTERM)
    quick_stop(signal.SIGINT)
    lost_lines_counted()


run(main)
