#!/usr/bin/env python3
# The small-file cache: hot small files are answered from memory, and a
# change to the file (rewrite in place with the same size and mtime, atomic
# rename over it, delete, hard link) is seen by the very next request,
# because every lookup first drains the server's inotify queue. That holds
# too when the file is renamed over between a request's open and its fill.
import os
import socket
import threading

from harness import KiB, MiB, Conn, Server, is_, note, ok, poll, random_bytes, run, text_bytes


def cache_stats(srv):
    return srv.stats()["file_cache"]


def opens(srv):
    return srv.stats()["jobs"]["open"]["submitted"]


def sender_writes(srv):
    """Writes the sender's share admitted: at once, or after their turn."""
    send = srv.stats()["send"]
    return send["at_once"] + send["deferred"]


def check_hits(srv):
    srv.write_file("hot.txt", b"hot file\n")
    is_(srv.get("/hot.txt").body, b"hot file\n", "first GET: the file")
    writes = sender_writes(srv)
    before, opened = cache_stats(srv), opens(srv)
    for i in range(5):
        is_(srv.get("/hot.txt").body, b"hot file\n", "GET %d from the cache: the file" % i)
    after = cache_stats(srv)
    ok(after["hits"] >= before["hits"] + 5, "five lookups hit", "%r -> %r" % (before, after))
    is_(opens(srv), opened, "hits submit no open job")
    # A body from memory takes its turn with the sender as a pumped one
    # does: the five hits (and the /stats answers between) are its writes.
    ok(sender_writes(srv) >= writes + 5, "cache hits are written through the sender's share")
    get, head = srv.get("/hot.txt"), srv.head("/hot.txt")
    strip = lambda r: sorted((k, v) for k, v in r.headers if k.lower() != "date")
    is_(strip(head), strip(get), "HEAD from the cache: the same headers as GET")
    is_(head.body, b"", "HEAD from the cache: no body")


def check_changes(srv):
    path = srv.write_file("c.txt", b"version 1\n")
    is_(srv.get("/c.txt").body, b"version 1\n", "cached: version 1")
    srv.get("/c.txt")
    st = os.stat(path)
    with open(path, "r+b") as f:  # same size, then the same mtime: only inotify can tell
        f.write(b"version 2\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    is_(srv.get("/c.txt").body, b"version 2\n", "rewritten in place (same size and mtime)")
    srv.get("/c.txt")

    tmp = srv.write_file("c.txt.tmp", b"version 3, renamed over\n")
    os.rename(tmp, path)
    is_(srv.get("/c.txt").body, b"version 3, renamed over\n", "atomic rename over the file")
    srv.get("/c.txt")

    os.unlink(path)
    is_(srv.get("/c.txt").status, 404, "deleted: 404")
    srv.write_file("c.txt", b"version 4\n")
    is_(srv.get("/c.txt").body, b"version 4\n", "created again: the new file")

    srv.write_file("one.txt", b"linked 1\n")
    os.link(srv.path("one.txt"), srv.path("two.txt"))
    is_(srv.get("/one.txt").body, b"linked 1\n", "hard link, first name")
    is_(srv.get("/two.txt").body, b"linked 1\n", "hard link, second name")
    with open(srv.path("one.txt"), "r+b") as f:
        f.write(b"linked 2\n")
    is_(srv.get("/two.txt").body, b"linked 2\n", "hard link: a change through the other name")
    is_(srv.get("/one.txt").body, b"linked 2\n", "hard link: and through this one")

    wrong = 0
    for i in range(100):
        data = b"round %03d\n" % i
        srv.write_file("loop.txt", data)
        if srv.get("/loop.txt").body != data:
            wrong += 1
    is_(wrong, 0, "100 rewrites, each seen by the next GET")


def check_bypass(srv):
    big = text_bytes(80 * KiB)
    srv.write_file("big.txt", big)
    srv.get("/big.txt")
    opened = opens(srv)
    is_(srv.get("/big.txt").body, big, "a file over file_cache_max_file: the file")
    is_(opens(srv), opened + 1, "  and it is opened again (not cached)")

    srv.write_file("page.html", text_bytes(4 * KiB))
    srv.get("/page.html")
    resp = srv.get("/page.html", headers={"Accept-Encoding": "gzip"})
    is_(resp.header("Content-Encoding"), "gzip", "a client accepting gzip still gets gzip")
    resp = srv.get("/page.html", headers={"Range": "bytes=0-9"})
    is_((resp.status, len(resp.body)), (206, 10), "a Range request still gets its range")


def rename_during_fill(attempt):
    """One pool thread, first come first served, every file read 2 s long:
    a small file's open (which reads its body for the cache in the same job)
    waits behind a read of a big download. The file is renamed over while
    it waits; the response and a later GET must get the new file. Returns
    whether the open was still waiting at the rename (the race was set up),
    and the bodies of the two GETs."""
    args = ["--loop-reads", "off", "--threads", "1", "--scheduler", "fifo", "--emulate-disk", "2s",
            "--partition", "512k", "--file-cache-max-file", "64k"]
    # Every read of big.bin has more than 256 KiB left: bulk. The opens are
    # the only short jobs, so short_started counts them.
    files = {"big.bin": random_bytes(4 * MiB, 36), "r.txt": b"old body\n"}
    with Server(files=files, args=args, name="race %d" % attempt) as srv:
        download = Conn(srv.port)
        download.request("GET", "/big.bin")
        reader = threading.Thread(target=download.read_to_end, daemon=True)
        reader.start()
        poll(lambda: srv.stats()["jobs"]["read"]["submitted"] >= 1)
        first = Conn(srv.port, timeout=30)
        first.request("GET", "/r.txt")
        poll(lambda: srv.stats()["jobs"]["open"]["submitted"] == 2)
        srv.write_file("r.txt.new", b"new body, renamed over\n")
        os.rename(srv.path("r.txt.new"), srv.path("r.txt"))
        st = srv.stats()
        waiting = st["scheduler"]["short_started"] == 1 and st["jobs"]["open"]["completed"] == 1
        first_body = first.read_response().body
        first.close()
        with Conn(srv.port, timeout=30) as c:
            body = c.roundtrip("GET", "/r.txt").body
        download.sock.shutdown(socket.SHUT_RDWR)  # the reader sees the end
        reader.join()
        download.close()
    return waiting, first_body, body


def check_rename_during_fill():
    for attempt in range(3):
        waiting, first_body, body = rename_during_fill(attempt)
        if waiting:
            break
        note("attempt %d: the open ran before the rename; again" % attempt)
    ok(waiting, "the file was renamed over while its open waited for the pool")
    is_((first_body, body), (b"new body, renamed over\n",) * 2,
        "renamed over before the open: the GET waiting and the next one get the new file")


def main():
    with Server(args=["--loop-reads", "off", "--file-cache-max-file", "64k"]) as srv:
        check_hits(srv)
        check_changes(srv)
        check_bypass(srv)
        ok(cache_stats(srv)["entries"] > 0, "the cache holds entries")
    with Server(files={"a.txt": b"a\n"}, args=["--loop-reads", "off", "--file-cache", "off"]) as srv:
        for _ in range(3):
            srv.get("/a.txt")
        st = cache_stats(srv)
        is_((st["enabled"], st["hits"], st["entries"]), (False, 0, 0), "--file-cache off: unused")
    check_rename_during_fill()


run(main)
