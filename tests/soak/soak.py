#!/usr/bin/env python3
"""make soak: a bounded hostile-load soak of unclog (tests/soak/README.md).

One server on 127.0.0.1, port 0, a temp root of generated files. For a fixed
time, at once: well-behaved clients whose every byte is checked, and hostile
ones. The server's RSS and fd count are sampled every 250 ms. Only invariants
are checked, never timings (a shared 2-core machine). Exit 0 pass, 1 fail.
"""

import argparse
import hashlib
import json
import os
import random
import resource
import select
import selectors
import signal
import socket
import struct
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.dont_write_bytecode = True
import harness  # noqa: E402 - needs the path above
from harness import (KiB, MiB, Conn, ProtocolError, Server, build_request, gunzip,  # noqa: E402
                     parse_byteranges, random_bytes, split_response, statuses, text_bytes)

IO_TIMEOUT = 20  # a well-behaved client waiting this long for a byte: the server hung
HOSTILE_TIMEOUT = 10
JOIN_TIMEOUT = IO_TIMEOUT + 5  # clients finish what they are doing once told to stop
FD_SLACK = 4  # fds libuv may open on demand
RSS_SLACK_MIB = 32  # what the heap may keep after the server's 1 s trim
ABORT_RSS_MIB = 3072  # stop the load early rather than take the machine down
GZIP_MAX = 16 * MiB  # gzip_max_body and max_body, the defaults
# Short send and body timeouts cut hostile connections several times within a
# run; a well-behaved client never leaves the server waiting that long.
SERVER_ARGS = ["--send-timeout", "5s", "--body-timeout", "5s"]

# Never changed during the run: every byte of their answers is checked.
STABLE = {"s1.txt": lambda: text_bytes(700), "s2.bin": lambda: random_bytes(9 * KiB, 2),
          "s3.html": lambda: text_bytes(48 * KiB), "s4.bin": lambda: random_bytes(300 * KiB, 4),
          "t3.txt": lambda: text_bytes(3 * MiB), "l4.bin": lambda: random_bytes(4 * MiB, 5),
          "l16.bin": lambda: random_bytes(16 * MiB, 6)}
# Shrunk, grown and replaced while served, up to these sizes: only framing is checked.
MUTATED = {"m-small.txt": 60 * KiB, "m-big.bin": 4 * MiB}


class Wrong(Exception):
    """A wrong answer: an error for any kind of client."""


class Tally:
    """Outcomes of one kind of client: ok, refused (expected), errors."""

    def __init__(self, name, strict):
        self.name, self.strict, self.samples = name, strict, []  # strict: well-behaved
        self.n = dict(requests=0, ok=0, refused=0, errors=0)
        self.lock = threading.Lock()

    def add(self, outcome, why=None):
        with self.lock:
            self.n["requests"] += 1
            self.n[outcome] += 1
            if outcome == "errors" and len(self.samples) < 5:
                self.samples.append(why)


def rst_close(sock):
    """Close with an RST (SO_LINGER 0): the server sees a reset, not an EOF."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def check_unfinished(data, allowed, what):
    """The answer to a body that never ended: statuses in `allowed`, and no
    complete 2xx (/gzip streams: a 200 head may come, never its end)."""
    codes, done = statuses(data), False
    if codes and 200 <= codes[0] < 300:
        head, rest = split_response(data)
        done = rest.endswith(b"0\r\n\r\n") if head.header("Transfer-Encoding") \
            else len(rest) >= int(head.header("Content-Length", "0"))
    if done or not set(codes) <= set(allowed):
        raise Wrong("%s: answered %r%s" % (what, codes, ", complete" if done else ""))


# ---------------------------------------------------------- well-behaved -----


def good_get(ctx, t, rng):
    """A keep-alive series of GET (whole, gzip, one or two ranges) and HEAD,
    byte-exact: whole bodies by sha256, ranges against the file's bytes."""
    with Conn(ctx.port, timeout=IO_TIMEOUT) as c:
        for _ in range(rng.randint(1, 6)):
            name = rng.choice(list(STABLE))
            want, path, kind = ctx.files[name], "/" + name, rng.randrange(4)
            if kind < 2:
                resp = c.roundtrip("GET", path, headers={"Accept-Encoding": "gzip"} if kind else {})
                body = gunzip(resp.body) if resp.header("Content-Encoding") == "gzip" else resp.body
                if resp.status != 200 or body is None or \
                        hashlib.sha256(body).digest() != ctx.sha[name]:
                    raise Wrong("GET %s%s: status %d, %d bytes that are not the file"
                                % (path, " (gzip)" * kind, resp.status, len(resp.body)))
            elif kind == 2:  # two ranges make a multipart/byteranges answer
                cuts = sorted(rng.sample(range(len(want)), rng.choice((2, 4))))
                ranges = list(zip(cuts[::2], cuts[1::2]))
                spec = "bytes=" + ",".join("%d-%d" % r for r in ranges)
                resp = c.roundtrip("GET", path, headers={"Range": spec})
                parts = parse_byteranges(resp) if len(ranges) > 1 else \
                    [({"content-range": resp.header("Content-Range")}, resp.body)]
                if resp.status != 206 or [(h.get("content-range"), b) for h, b in parts] != \
                        [("bytes %d-%d/%d" % (a, b, len(want)), want[a:b + 1]) for a, b in ranges]:
                    raise Wrong("GET %s, Range %s: status %d, wrong parts" % (path, spec,
                                                                             resp.status))
            else:
                resp = c.roundtrip("HEAD", path)
                if (resp.status, resp.header("Content-Length")) != (200, str(len(want))):
                    raise Wrong("HEAD %s: %d, Content-Length %s"
                                % (path, resp.status, resp.header("Content-Length")))
            t.add("ok")


def good_gzip(ctx, t, rng):
    """A keep-alive series of POST /gzip of 0 B .. 2 MiB (mostly small),
    Content-Length or chunked at random cuts, decompressed and compared."""
    with Conn(ctx.port, timeout=IO_TIMEOUT) as c:
        for _ in range(rng.randint(1, 3)):
            size = rng.choice([0, rng.randrange(4 * KiB), rng.randrange(256 * KiB),
                               rng.randrange(2 * MiB + 1)])
            off = rng.randrange(len(ctx.pool) - size + 1)
            body = ctx.pool[off:off + size]
            cuts = sorted(rng.sample(range(1, size), min(size - 1, rng.randint(0, 20)))) \
                if size > 1 else []
            chunks = [body[a:b] for a, b in zip([0] + cuts, cuts + [size])]
            kw = {"chunks": chunks} if rng.random() < 0.5 else {"body": body}
            resp = c.roundtrip("POST", "/gzip", **kw)
            if resp.status != 200 or gunzip(resp.body) != body:
                raise Wrong("POST /gzip of %d B (%s): status %d, %d B that do not gunzip to it"
                            % (size, list(kw)[0], resp.status, len(resp.body)))
            t.add("ok")


# --------------------------------------------------------------- hostile -----


def mutated_get(ctx, t, rng):
    """GET a file that changes meanwhile: complete and consistently framed,
    or cut short, or a 500 that closes when it shrank before the first byte
    went; never more bytes than announced, never broken framing."""
    name = rng.choice(list(MUTATED))
    headers = {"Connection": "close"}
    if rng.random() < 0.3:
        headers["Range"] = "bytes=%d-" % rng.randrange(64 * KiB)
    if name.endswith(".txt") and rng.random() < 0.5:
        headers["Accept-Encoding"] = "gzip"
    with Conn(ctx.port, timeout=IO_TIMEOUT) as c:
        c.request("GET", "/" + name, headers=headers)
        try:
            resp = c.read_response()
        except ProtocolError as e:
            if c.eof and str(e).startswith("connection closed"):
                return t.add("refused")  # cut short: the file shrank under the response
            raise Wrong("GET /%s %r: %s" % (name, headers, e))
        extra = c.read_to_end()[0]
        if resp.status == 500 and not extra and resp.header("Connection") == "close":
            return t.add("refused")  # it shrank before the first byte: the server says so
        if resp.status not in (200, 206, 416) or extra or \
                (resp.header("Content-Encoding") == "gzip" and gunzip(resp.body) is None):
            raise Wrong("GET /%s %r: status %d, %d bytes after it, or invalid gzip"
                        % (name, headers, resp.status, len(extra)))
        t.add("ok")


def mutator(ctx, rng):
    """Shrink, grow or replace (rename over) a mutated file, 10 times a second."""
    while not ctx.stop.wait(0.1):
        name = rng.choice(list(MUTATED))
        path, top = os.path.join(ctx.root, name), MUTATED[name]
        size, op, n = os.path.getsize(path), rng.randrange(3), rng.randrange(top + 1)
        if op == 0 or (op == 1 and size >= top):
            os.truncate(path, rng.randrange(size + 1))
        elif op == 1:
            with open(path, "ab") as f:
                f.write(ctx.pool[:rng.randrange(top - size + 1)])
        else:
            with open(path + ".new", "wb") as f:
                f.write(ctx.pool[len(ctx.pool) - n:])
            os.replace(path + ".new", path)
        ctx.mutations += 1


def hostile_reset(ctx, t, rng):
    """Read part of a big response (a file, a gzip'd file, /gzip), then reset."""
    method, path, kw = rng.choice([("GET", "/l16.bin", {}), ("GET", "/t3.txt", {}),
                                   ("POST", "/gzip", {"body": ctx.pool[:2 * MiB]})])
    c = Conn(ctx.port, timeout=HOSTILE_TIMEOUT)
    try:  # Connection: close, so that a response shorter than `want` ends at once
        c.request(method, path, headers={"Connection": "close", "Accept-Encoding": "gzip"}, **kw)
        want = rng.randrange(1, 4 * MiB)
        while len(c.buf) < want and c.fill():
            pass
        if c.buf and not c.buf.startswith(b"HTTP/1.1 200 "):
            raise Wrong("reset client: answer %r" % bytes(c.buf[:40]))
    finally:
        rst_close(c.sock)
    t.add("ok")


def hostile_stalled_read(ctx, t, rng):
    """Request 16 MiB, read nothing for 1-10 s, close. send_timeout cuts some."""
    with Conn(ctx.port, timeout=HOSTILE_TIMEOUT, rcvbuf=16 * KiB) as c:
        c.request("GET", "/l16.bin")
        ctx.stop.wait(rng.uniform(1, 10))
        # A reset from the server leaves the unread bytes readable: ask for the error.
        cut = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0
    t.add("refused" if cut else "ok")


def hostile_slow(ctx, t, rng):
    """Dribble a request head, or a /gzip body, 8 bytes every 0.5 s: either it
    completes and is answered right, or the header timeout cuts it (408)."""
    body = rng.randbytes(rng.randrange(16, 160)) if rng.random() < 0.5 else None
    raw = build_request("POST", "/gzip", body=body) if body else \
        build_request("GET", "/s1.txt", headers={"X-Pad": "p" * rng.randrange(250)})
    start = len(raw) - len(body) if body else 0
    with Conn(ctx.port, timeout=HOSTILE_TIMEOUT) as c:
        try:
            c.send(raw[:start])
            for i in range(start, len(raw), 8):
                if ctx.stop.wait(0.5):
                    return
                c.send(raw[i:i + 8])
        except OSError:
            pass  # the server closed: read what it said
        resp = c.read_response() if c.fill() else None
        if resp is None or resp.status == 408:
            return t.add("refused")
        if resp.status != 200 or (gunzip(resp.body) if body else resp.body) != \
                (body or ctx.files["s1.txt"]):
            raise Wrong("slow %s: status %d, wrong body" % ("body" if body else "head",
                                                           resp.status))
    t.add("ok")


def hostile_oversized(ctx, t, rng):
    """A Content-Length over the limit (413 before the body), or a chunked
    body that grows past it (413, or a close while we still send)."""
    with Conn(ctx.port, timeout=HOSTILE_TIMEOUT) as c:
        pick = rng.randrange(4)
        if pick < 3:
            length, head = rng.choice([GZIP_MAX + 1, 10 ** 15]), (b"GET /s1.txt", b"POST /gzip")
            c.send(head[pick > 0] + b" HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % length)
            status = c.read_response().status
            if status != 413:
                raise Wrong("%s, Content-Length %d: status %d" % (head[pick > 0], length, status))
            return t.add("refused")
        # Zeros: /gzip streams, and with incompressible bytes its answer, which
        # we do not read yet, would stop it reading long before the limit.
        c.send(b"POST /gzip HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(GZIP_MAX // (256 * KiB) + 4):
                c.send(b"40000\r\n" + ctx.zeros[:256 * KiB] + b"\r\n")
        except socket.timeout:
            return t.add("refused")  # the server stopped reading (its budget): not wrong
        except OSError:
            pass
        data, end = c.read_to_end()
        check_unfinished(data, (200, 413), "chunked body over the limit")
        if end == "open":
            raise Wrong("chunked body over the limit: connection left open")
    t.add("refused")


def hostile_truncated(ctx, t, rng):
    """Announce N body bytes, send fewer, then an EOF or a reset."""
    n = rng.randrange(2, 256 * KiB)
    with Conn(ctx.port, timeout=HOSTILE_TIMEOUT) as c:
        c.send(build_request("POST", "/gzip", headers={"Content-Length": str(n)})
               + ctx.pool[:rng.randrange(n)])
        if rng.random() < 0.5:
            return rst_close(c.sock) or t.add("refused")
        c.sock.shutdown(socket.SHUT_WR)
        data, end = c.read_to_end()
        check_unfinished(data, (200, 400, 408), "truncated body")
        if end == "open":
            raise Wrong("truncated body: connection left open")
    t.add("refused")


def hostile_stalled_gzip(ctx, t, rng):
    """Announce 16 MiB to /gzip, send 15, then wait, neither sending the rest
    nor reading: the body timeout ends it (408, or a cut once /gzip streams)."""
    with Conn(ctx.port, timeout=HOSTILE_TIMEOUT) as c:
        c.send(b"POST /gzip HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % GZIP_MAX)
        try:
            for _ in range(15):
                c.send(ctx.zeros)
        except socket.timeout:
            pass  # the server stopped reading (its memory budget): stall here
        p = select.poll()  # wait for the close or reset without reading a byte
        p.register(c.sock, select.POLLRDHUP)
        while not p.poll(500):
            if ctx.stop.is_set():
                return t.add("ok")  # still stalled at the end
        c.sock.settimeout(1)
        check_unfinished(c.read_to_end()[0], (200, 408), "stalled /gzip body")
    t.add("refused")


def idle_keeper(ctx, t, count):
    """Hold `count` connections that send nothing; when the server closes one
    (header timeout), open another. 503 (max_connections) is an error."""
    sel = selectors.DefaultSelector()
    try:
        while not ctx.stop.is_set():
            for _ in range(min(100, count - len(sel.get_map()))):  # let the server accept
                try:
                    s = socket.create_connection(("127.0.0.1", ctx.port), timeout=HOSTILE_TIMEOUT)
                    sel.register(s, selectors.EVENT_READ)
                except OSError as e:
                    t.add("errors", "idle connect: %s" % e)
            for key, _ in sel.select(0.5 if len(sel.get_map()) >= count else 0.02):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                sel.unregister(key.fileobj)
                key.fileobj.close()
                t.add("errors" if 503 in statuses(data) else "refused", "idle: %r" % data[:40])
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
            t.add("ok")


# ------------------------------------------------------------ the run -----

# kind, client, well-behaved, threads (short, full), what "refused" means for it
CLIENTS = [
    ("get", good_get, True, (2, 2), ""), ("gzip", good_gzip, True, (2, 2), ""),
    ("mutated", mutated_get, False, (2, 2), "cut short or 500"),
    ("reset", hostile_reset, False, (1, 1), ""),
    ("stalled-read", hostile_stalled_read, False, (4, 8), "cut by send_timeout"),
    ("slow-send", hostile_slow, False, (4, 8), "408 or closed"),
    ("oversized", hostile_oversized, False, (1, 1), "413 or closed"),
    ("truncated", hostile_truncated, False, (1, 1), "closed or 4xx"),
    ("stalled-gzip", hostile_stalled_gzip, False, None, "408 or closed"),
    ("idle", None, False, None, "closed by the server")]


def run_kind(ctx, fn, t, rng):
    """Repeat one client until told to stop. A connection error is an error
    for a well-behaved client and an expected refusal for a hostile one.
    Hostile clients pause in between: a soak, not a flood on 2 cores."""
    while not ctx.stop.wait(0 if t.strict else 0.05):
        try:
            fn(ctx, t, rng)
        except Wrong as e:
            t.add("errors", str(e))
        except (OSError, ProtocolError) as e:
            t.add("errors" if t.strict else "refused", "%s: %s" % (type(e).__name__, e))
        except Exception as e:  # noqa: B902 - a bug in the client counts, loudly
            t.add("errors", "%s: %s" % (type(e).__name__, e))


def start_clients(ctx, opt):
    threads = [threading.Thread(target=idle_keeper, args=(ctx, ctx.tally["idle"], opt.idle)),
               threading.Thread(target=mutator, args=(ctx, random.Random(opt.seed)))]
    for kind, fn, _, counts, _ in CLIENTS:
        n = opt.stalled_gzip if kind == "stalled-gzip" else counts and counts[not opt.short]
        for i in range(n or 0):
            rng = random.Random("%d-%s-%d" % (opt.seed, kind, i))
            threads.append(threading.Thread(target=run_kind, name="%s-%d" % (kind, i),
                                            args=(ctx, fn, ctx.tally[kind], rng)))
    for th in threads:
        th.daemon = True
        th.start()
    return threads


def sampler(ctx, pid):
    """RSS (MiB) and fd count of the server every 250 ms."""
    while not ctx.done.wait(0.25):
        try:
            rss, fds = harness.proc_rss_kib(pid) / 1024, harness.proc_fd_count(pid)
        except (OSError, RuntimeError):
            if not ctx.done.is_set():
                ctx.aborted = "the server is gone: load stopped early"
            return ctx.stop.set()
        ctx.samples.append((rss, fds))
        if rss > ABORT_RSS_MIB and not ctx.stop.is_set():
            ctx.aborted = "RSS %.0f MiB > %d MiB: load stopped early" % (rss, ABORT_RSS_MIB)
            ctx.stop.set()


def figures(srv):
    return srv.rss_kib() / 1024, srv.fd_count()


def make_server(ctx, opt):
    args = SERVER_ARGS + ["--max-buffer-memory", "%dm" % opt.budget_mib]
    srv = Server(args=args, name="unclog")  # harness: port 0, access log to a file
    for name, data in ctx.files.items():
        srv.write_file(name, data)
    for name, top in MUTATED.items():
        srv.write_file(name, ctx.pool[:top // 2])
    return srv


def load(ctx, srv, opt):
    """Warm-up and baseline, the load, the settling. Returns the figures."""
    rng = random.Random(0)
    for _ in range(4):  # every path, so lazily made buffers and the file cache count
        good_get(ctx, Tally("warm-up", True), rng)
        good_gzip(ctx, Tally("warm-up", True), rng)
    time.sleep(1.5)  # a heap trim tick or two
    r = argparse.Namespace(base=figures(srv), final=(0, 0), answers=False, memory=None,
                           zlib=None)
    threading.Thread(target=sampler, args=(ctx, srv.pid), daemon=True).start()
    threads = start_clients(ctx, opt)
    ctx.stop.wait(opt.duration)
    ctx.stop.set()
    deadline = time.monotonic() + JOIN_TIMEOUT
    for th in threads:
        th.join(max(0, deadline - time.monotonic()))
    r.stuck = [th.name for th in threads if th.is_alive()]
    ctx.done.set()
    samples = ctx.samples or [r.base]
    r.peak = (max(s[0] for s in samples), max(s[1] for s in samples))
    r.alive = srv.alive()
    if r.alive:
        # fds first (connections closing), then a few of the server's 1 s heap trims.
        harness.poll(lambda: figures(srv)[1] <= r.base[1] + FD_SLACK, opt.settle)
        time.sleep(2.5)
        harness.poll(lambda: figures(srv)[0] <= r.base[0] + RSS_SLACK_MIB, 5, interval=0.25)
        r.final = figures(srv)
        try:
            resp = srv.get("/s2.bin")
            r.answers = (resp.status, resp.body) == (200, ctx.files["s2.bin"])
            st = srv.stats()
            r.memory, r.zlib = st.get("memory"), st.get("zlib")
        except (OSError, ProtocolError, ValueError):
            pass
    return r


def verdicts(ctx, opt, r, status):
    good = [t for t in ctx.tally.values() if t.strict]
    wrong = sum(t.n["errors"] for t in ctx.tally.values() if not t.strict)
    return [
        ("well-behaved clients: no errors", all(t.n["errors"] == 0 < t.n["ok"] for t in good),
         ", ".join("%s %d errors in %d" % (t.name, t.n["errors"], t.n["requests"]) for t in good)),
        ("hostile clients: no wrong answers", wrong == 0, "%d" % wrong),
        ("every client finished", not r.stuck, ", ".join(r.stuck) or "all"),
        ("peak RSS <= ceiling", r.peak[0] <= opt.rss_ceiling_mib,
         "%.1f MiB, ceiling %d MiB" % (r.peak[0], opt.rss_ceiling_mib)),
        ("fds back near the baseline", r.alive and r.final[1] <= r.base[1] + FD_SLACK,
         "%d, baseline %d" % (r.final[1], r.base[1])),
        ("RSS back near the baseline", r.alive and r.final[0] <= r.base[0] + RSS_SLACK_MIB,
         "%.1f MiB, baseline %.1f MiB" % (r.final[0], r.base[0])),
        ("server alive and answers GET", r.answers, "alive" if r.alive else "dead"),
        ("server exits 0 on SIGTERM", status == 0 and r.alive, "status %s" % status)]


def report(ctx, opt, r, checks):
    row = "%-14s %9s %9s %9s %7s  %s"
    print("\n" + row % ("client", "requests", "ok", "refused", "errors", "refused means"))
    for kind, _, strict, _, meaning in CLIENTS:
        n = ctx.tally[kind].n
        print(row % (kind + " *" * (not strict), n["requests"], n["ok"], n["refused"],
                     n["errors"], meaning))
    print("(* hostile; %d file mutations)\n" % ctx.mutations)
    row = "%-14s %9s %9s %9s  %s"
    print(row % ("server", "baseline", "peak", "final", "limits"))
    print(row % ("RSS MiB", "%.1f" % r.base[0], "%.1f" % r.peak[0], "%.1f" % r.final[0],
                 "peak <= %d, final <= baseline + %d" % (opt.rss_ceiling_mib, RSS_SLACK_MIB)))
    print(row % ("fds", r.base[1], r.peak[1], r.final[1], "final <= baseline + %d" % FD_SLACK))
    if r.memory:
        print("/stats memory: %s" % json.dumps(r.memory))
    if r.zlib:
        print("/stats zlib: %s" % json.dumps(r.zlib))
    for t in ctx.tally.values():
        for why in t.samples:
            print("error (%s): %s" % (t.name, why))
    if ctx.aborted:
        print("note: " + ctx.aborted)
    for name, good, detail in checks:
        print("%-4s %s (%s)" % ("ok" if good else "FAIL", name, detail))
    failed = [name for name, good, _ in checks if not good]
    print("soak: " + ("PASS" if not failed else "FAIL: " + "; ".join(failed)))
    return not failed


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--short", action="store_true", help="22 s of load instead of 120 s (CI)")
    p.add_argument("--duration", type=float, help="seconds of load")
    p.add_argument("--stalled-gzip", type=int, help="stalled 16 MiB /gzip bodies (16; full 64)")
    p.add_argument("--idle", type=int, help="idle connections (500; full 2000)")
    p.add_argument("--budget-mib", type=int, default=64, help="--max-buffer-memory, MiB")
    p.add_argument("--rss-ceiling-mib", type=int, help="peak RSS limit (budget + 96)")
    p.add_argument("--seed", type=int, default=1)
    opt = p.parse_args()
    full = not opt.short
    opt.duration = opt.duration or (120 if full else 22)
    opt.stalled_gzip = (64 if full else 16) if opt.stalled_gzip is None else opt.stalled_gzip
    opt.idle = (2000 if full else 500) if opt.idle is None else opt.idle
    opt.settle = 20 if full else 8
    opt.rss_ceiling_mib = opt.rss_ceiling_mib or opt.budget_mib + 96
    return opt


def main():
    opt = options()
    t0 = time.monotonic()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile = hard if hard != resource.RLIM_INFINITY else 65536
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))  # the server inherits it
    if opt.idle + opt.stalled_gzip + 200 > nofile:
        opt.idle = max(0, nofile - opt.stalled_gzip - 200)
        print("note: ulimit -n %d: only %d idle connections" % (nofile, opt.idle))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # so that the finally runs
    ctx = argparse.Namespace(stop=threading.Event(), done=threading.Event(), samples=[],
                             aborted=None, mutations=0,
                             tally={c[0]: Tally(c[0], c[2]) for c in CLIENTS})
    ctx.files = {name: make() for name, make in STABLE.items()}
    ctx.sha = {name: hashlib.sha256(data).digest() for name, data in ctx.files.items()}
    ctx.pool = random_bytes(2 * MiB, 7) + text_bytes(2 * MiB)  # /gzip bodies, file contents
    ctx.zeros = bytes(MiB)
    srv = make_server(ctx, opt)
    ctx.root, status = srv.root, None
    try:
        srv.start()
        ctx.port = srv.port
        print("soak: unclog pid %d, port %d, %s; %.0f s of load, %d stalled /gzip, %d idle"
              % (srv.pid, srv.port, " ".join(srv.args), opt.duration, opt.stalled_gzip, opt.idle),
              flush=True)
        r = load(ctx, srv, opt)
    finally:
        ctx.stop.set()
        ctx.done.set()
        if srv.proc is not None and not srv.alive():
            status = srv.proc.returncode  # it died during the run
        elif srv.alive():
            srv.proc.send_signal(signal.SIGTERM)
            try:
                status = srv.proc.wait(10)
            except BaseException:  # noqa: B902 - hung, or a second Ctrl-C: kill it by its pid
                srv.proc.kill()
                srv.proc.wait()
        srv.stopped_clean = status == 0  # then harness removes the temp dir at exit
    passed = report(ctx, opt, r, verdicts(ctx, opt, r, status))
    srv.stopped_clean &= passed
    if not srv.stopped_clean:
        print("kept %s (the server's log: stderr.log)" % srv.tmp)
    print("soak: %.1f s in all" % (time.monotonic() - t0))
    return 0 if passed else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("soak: interrupted")
