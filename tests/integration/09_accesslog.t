#!/usr/bin/env python3
# Access log in Common Log Format: to a file (flushed within a moment or at
# shutdown), to stdout with `-`, and not at all with `off`.
import datetime
import os
import re
import time

from harness import Server, is_, like, note, ok, poll, run

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


run(main)
