#!/usr/bin/env python3
# sendfile = auto (issue 41): a file's body that goes as it is moves from
# the page cache to the socket with sendfile(2), a piece at a time on the
# pool, holding no buffer memory (docs/design/sendfile.md). Counters and
# bytes, never timings:
#   - a 100 MB file (sparse) is byte-exact through sendfile, the sendfile
#     counters rise and the buffered ones do not;
#   - single ranges (start, middle, suffix) are byte-exact through it;
#   - a file truncated while it is sent ends its response cleanly: fewer
#     bytes, the connection closed, counted; the server answers the next;
#   - emulate_disk delays the pieces (its counter rises);
#   - sendfile = off keeps the pump: its counters rise, sendfile's stay 0;
#   - stalled sendfile downloads hold no budget while another client's
#     download runs to its end, and are byte-exact once read;
#   - HEAD, gzip on the fly and multipart ranges keep their paths;
#   - a reload (SIGHUP) turns it on for the responses that follow.
import hashlib
import os
import signal

from harness import (KiB, MiB, Conn, Server, in_parallel, is_, ok, poll, random_bytes, run,
                     text_bytes)

BIG = 100 * 1000 * 1000
DATA = random_bytes(3 * MiB + 321, 71)
ARGS = ["--file-cache", "off", "--sendfile", "auto"]


def sendfile(srv):
    return srv.stats()["sendfile"]


def buffered(srv):
    return srv.stats()["buffered_bytes"]


def hashed_get(srv, target):
    """GET TARGET, hashing its body as it comes: (status, length, sha256)."""
    with Conn(srv.port, timeout=60) as c:
        c.request("GET", target)
        head = c.read_head()
        left = int(head.header("content-length"))
        h, got = hashlib.sha256(), 0
        while got < left:
            chunk = c.read_exact(min(left - got, 4 * MiB))
            h.update(chunk)
            got += len(chunk)
        return head.status, got, h.hexdigest()


def test_big():
    with Server(args=ARGS) as srv:
        srv.sparse_file("big.bin", BIG)
        want = hashlib.sha256(b"\0" * BIG).hexdigest()
        before = sendfile(srv)
        status, got, digest = hashed_get(srv, "/big.bin")
        is_(status, 200, "100 MB: 200")
        is_(got, BIG, "100 MB: every byte")
        is_(digest, want, "100 MB: byte-identical (sha256)")
        # The last piece's job may come back after its bytes reached us.
        ok(poll(lambda: sendfile(srv)["bytes"] - before["bytes"] == BIG),
           "sendfile.bytes rose by the file's size", sendfile(srv))
        after = sendfile(srv)
        is_(after["responses"] - before["responses"], 1, "sendfile.responses rose by one")
        ok(after["pieces"] - before["pieces"] >= BIG // MiB,
           "in pieces of partition_max at most: %d" % (after["pieces"] - before["pieces"]))
        is_(buffered(srv), 0, "no byte went through the pump's buffers")


def test_ranges():
    with Server(files={"data.bin": DATA}, args=ARGS) as srv:
        size = len(DATA)
        cases = [("start", "bytes=0-99999", 0, 99999),
                 ("middle", "bytes=1048000-2500000", 1048000, 2500000),
                 ("suffix", "bytes=-70000", size - 70000, size - 1)]
        for name, spec, first, last in cases:
            before = sendfile(srv)["responses"]
            resp = srv.get("/data.bin", headers={"Range": spec})
            is_(resp.status, 206, "%s range: 206" % name)
            is_(resp.header("Content-Range"), "bytes %d-%d/%d" % (first, last, size),
                "%s range: Content-Range" % name)
            ok(resp.body == DATA[first:last + 1], "%s range: byte-identical" % name,
               "got %d bytes" % len(resp.body))
            is_(sendfile(srv)["responses"] - before, 1, "%s range: went by sendfile" % name)
        resp = srv.get("/data.bin")
        ok(resp.status == 200 and resp.body == DATA, "the whole file: byte-identical")
        is_(buffered(srv), 0, "no byte went through the pump's buffers")


def test_truncated():
    size = 32 * MiB
    args = ARGS + ["--send-buffer", "4k", "--partition", "64k"]
    with Server(files={"shrinks.bin": random_bytes(size, 72), "ok.txt": b"fine\n"},
                args=args) as srv:
        with Conn(srv.port, rcvbuf=4096, source="127.0.0.2", timeout=30) as c:
            c.request("GET", "/shrinks.bin")
            head = c.read_head()
            is_(head.header("content-length"), str(size), "the head promises 32 MiB")
            ok(poll(lambda: sendfile(srv)["waiting"] == 1),
               "the download waits for its client", sendfile(srv))
            os.truncate(srv.path("shrinks.bin"), 1 * MiB)
            body, end = c.read_to_end()
            ok(len(body) < size, "fewer bytes than promised came: %d" % len(body))
            ok(end in ("closed", "reset"), "the connection closed (%s)" % end)
        is_(sendfile(srv)["truncated"], 1, "sendfile.truncated counts it")
        resp = Conn(srv.port, source="127.0.0.3").roundtrip("GET", "/ok.txt")
        ok(resp.status == 200 and resp.body == b"fine\n", "the next request is answered")
        ok(poll(srv.settled), "nothing is left in flight", sendfile(srv))


def test_emulate_disk():
    with Server(files={"data.bin": DATA}, args=ARGS) as srv:
        srv.get("/data.bin")
        is_(sendfile(srv)["emulated"], 0, "emulate_disk off: no piece delayed")
    with Server(files={"data.bin": DATA}, args=ARGS + ["--emulate-disk", "2ms"]) as srv:
        resp = srv.get("/data.bin")
        ok(resp.status == 200 and resp.body == DATA, "emulate_disk 2ms: byte-identical")
        ok(poll(srv.settled), "the last piece is back")
        sf = sendfile(srv)
        ok(sf["responses"] == 1 and sf["emulated"] > 0,
           "emulate_disk 2ms: sendfile pieces delayed: %d of %d" % (sf["emulated"],
                                                                     sf["pieces"]), sf)


def test_off():
    with Server(files={"data.bin": DATA}, args=ARGS + ["--sendfile", "off"]) as srv:
        resp = srv.get("/data.bin")
        ok(resp.status == 200 and resp.body == DATA, "sendfile off: byte-identical")
        resp = srv.get("/data.bin", headers={"Range": "bytes=100-200000"})
        ok(resp.status == 206 and resp.body == DATA[100:200001], "sendfile off: a range")
        sf = sendfile(srv)
        is_([sf["responses"], sf["bytes"], sf["pieces"]], [0, 0, 0],
            "sendfile off: its counters stay 0")
        is_(buffered(srv), len(DATA) + 200000 - 100 + 1, "the pump's buffered bytes rose")


def test_stalled():
    stalled_n = 4
    size = 8 * MiB
    data = random_bytes(size, 73)
    args = ARGS + ["--send-buffer", "4k", "--max-buffer-memory", "8m", "--loop-reads", "off"]
    with Server(files={"big.bin": data}, args=args) as srv:
        stalled = [Conn(srv.port, source="127.0.0.2", rcvbuf=4096, timeout=60)
                   for _ in range(stalled_n)]
        for c in stalled:
            c.request("GET", "/big.bin")
        ok(poll(lambda: sendfile(srv)["waiting"] == stalled_n),
           "127.0.0.2's %d downloads wait for their client" % stalled_n, sendfile(srv))
        mem = srv.stats()["memory"]
        ok(mem["held"] == 0, "and hold no budget", mem)
        victim = Conn(srv.port, source="127.0.0.3", timeout=60)
        resp = victim.roundtrip("GET", "/big.bin")
        ok(resp.status == 200 and resp.body == data,
           "127.0.0.3's download runs to its end, byte-identical")
        victim.close()
        st = srv.stats()
        is_(st["sendfile"]["waiting"], stalled_n, "127.0.0.2's still wait")
        ok(st["memory"]["held"] == 0, "still no budget held", st["memory"])
        bodies = in_parallel(lambda i: stalled[i].read_response().body, stalled_n)
        is_(sum(b != data for b in bodies), 0, "the stalled downloads, read at last, are exact")
        for c in stalled:
            c.close()
        is_(buffered(srv), 0, "no byte went through the pump's buffers")


def test_other_paths():
    text = text_bytes(600 * KiB)
    with Server(files={"data.bin": DATA, "page.txt": text}, args=ARGS) as srv:
        resp = srv.head("/data.bin")
        ok(resp.status == 200 and resp.header("content-length") == str(len(DATA)),
           "HEAD: the length, no body")
        is_(sendfile(srv)["responses"], 0, "HEAD: no sendfile")
        resp = srv.get("/page.txt", headers={"Accept-Encoding": "gzip"})
        is_(resp.header("content-encoding"), "gzip", "gzip on the fly: still gzip")
        is_(sendfile(srv)["responses"], 0, "gzip on the fly: no sendfile")
        resp = srv.get("/data.bin", headers={"Range": "bytes=0-9,2000000-2000009"})
        ok(resp.status == 206 and resp.media_type == "multipart/byteranges",
           "two ranges: multipart")
        is_(sendfile(srv)["responses"], 0, "multipart ranges: no sendfile")
        ok(buffered(srv) > 0, "they went through the pump's buffers")


def test_reload():
    with Server(files={"data.bin": DATA}, conf={"sendfile": "off", "file_cache": "off"},
                defaults=True) as srv:
        srv.get("/data.bin")
        is_(sendfile(srv)["responses"], 0, "sendfile = off in the file: the pump")
        with open(srv.conf_path, "w") as f:
            f.write("sendfile = auto\nfile_cache = off\n")
        before = srv.stderr().count("reload")
        srv.send_signal(signal.SIGHUP)
        ok(poll(lambda: srv.stderr().count("reload") > before), "SIGHUP: reloaded")
        resp = srv.get("/data.bin")
        ok(resp.status == 200 and resp.body == DATA, "after the reload: byte-identical")
        is_(sendfile(srv)["responses"], 1, "after the reload: by sendfile")


def main():
    test_big()
    test_ranges()
    test_truncated()
    test_emulate_disk()
    test_off()
    test_stalled()
    test_other_paths()
    test_reload()


run(main, timeout=300)
