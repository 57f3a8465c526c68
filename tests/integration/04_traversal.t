#!/usr/bin/env python3
# Path traversal: dot-dot segments, raw and percent-encoded, encoded slashes
# and NULs, and symlinks leading out of the root must never reveal anything
# outside the root (403 or 404; 400 for bytes the parser refuses).
import os

from harness import Conn, ProtocolError, Server, is_, ok, run

SECRET = b"TOPSECRET-outside-the-root"
FILES = {
    "x.txt": b"inside x",
    "a/inner.txt": b"inside a",
    "a/b/deep.txt": b"inside deep",
}


def fetch(srv, target, method="GET"):
    """The response to target sent verbatim, or None when the server refused
    to answer (closed the connection): that is safe too."""
    with Conn(srv.port) as conn:
        conn.send(b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % (method.encode(), target))
        try:
            return conn.read_response(head=(method == "HEAD"))
        except ProtocolError:
            return None


def leaks(body):
    return SECRET in body or b"root:" in body


def expect_refused(srv, target):
    resp = fetch(srv, target)
    if resp is None:
        ok(False, "%r: an answer (connection was closed instead)" % target)
        return
    ok(resp.status in (400, 403, 404), "%r: refused with 403 or 404 (or 400)" % target,
       "got %d, body %r" % (resp.status, resp.body[:200]))
    ok(not leaks(resp.body), "%r: no outside content" % target, "body %r" % resp.body[:200])


def main():
    srv = Server(files=FILES)
    outside = os.path.dirname(srv.root)  # the temp dir, parent of root
    with open(os.path.join(outside, "secret.txt"), "wb") as f:
        f.write(SECRET)
    os.makedirs(os.path.join(outside, "odir"))
    for name in ("index.html", "s.txt"):
        with open(os.path.join(outside, "odir", name), "wb") as f:
            f.write(SECRET)
    srv.symlink("to_passwd", "/etc/passwd")
    srv.symlink("to_secret", os.path.join(outside, "secret.txt"))
    srv.symlink("rel_secret", "../secret.txt")
    srv.symlink("to_odir", os.path.join(outside, "odir"))
    srv.symlink("a/up", "../..")
    srv.symlink("to_x", "x.txt")
    srv.symlink("to_a", "a")
    srv.symlink("loop", "loop")
    srv.symlink("loop1", "loop2")
    srv.symlink("loop2", "loop1")
    srv.symlink("dangling", "does-not-exist")

    with srv:
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, FILES["x.txt"]), "the root works")

        targets = [
            b"/../etc/passwd",
            b"/../../../../../../etc/passwd",
            b"/../secret.txt",
            b"/%2e%2e/%2e%2e/etc/passwd",
            b"/%2e%2e/secret.txt",
            b"/%2E%2E/secret.txt",
            b"/.%2e/secret.txt",
            b"/a/../../secret.txt",
            b"/a/b/../../../secret.txt",
            b"/a/%2e%2e/%2e%2e/secret.txt",
            b"/..%2fsecret.txt",
            b"/%2e%2e%2fsecret.txt",
            b"/a/..%2f..%2fsecret.txt",
            b"/a%2f..%2f..%2fsecret.txt",
            b"//../secret.txt",
            b"/./../secret.txt",
            b"/..\\secret.txt",
            b"/%5c..%5csecret.txt",
            b"/..",
            b"/%2e%2e",
            b"/a/../..",
            b"/x.txt%00",
            b"/x.txt%00.html",
            b"/%00",
            b"/%00/../secret.txt",
            b"/to_passwd",
            b"/to_secret",
            b"/rel_secret",
            b"/to_odir/",
            b"/to_odir/s.txt",
            b"/to_odir/index.html",
            b"/to_odir",
            b"/a/up/secret.txt",
            b"/a/up/odir/s.txt",
            b"/to_a/../../secret.txt",
            b"/%2e%2e/" + os.path.basename(outside).encode() + b"/secret.txt",
            b"/loop",
            b"/loop/x",
            b"/loop1",
            b"/dangling",
        ]
        for target in targets:
            expect_refused(srv, target)
        # Absolute paths smuggled in the request target.
        for target in (b"/" + os.path.join(outside, "secret.txt").encode(),
                       b"/%2f" + os.path.join(outside, "secret.txt").encode()[1:]):
            resp = fetch(srv, target)
            ok(resp is None or (resp.status != 200 and not leaks(resp.body)),
               "%r: not the outside file" % target)

        # HEAD must not reveal it either (e.g. by its size).
        resp = fetch(srv, b"/to_secret", "HEAD")
        ok(resp is not None and resp.status in (403, 404), "HEAD /to_secret: 403 or 404",
           repr(resp))

        # Staying inside the root may work; if so it is the right file.
        for target, body in ((b"/to_x", FILES["x.txt"]), (b"/to_a/inner.txt", FILES["a/inner.txt"]),
                             (b"/a/b/../inner.txt", FILES["a/inner.txt"]),
                             (b"/a/./b/deep.txt", FILES["a/b/deep.txt"]),
                             (b"/../" + os.path.basename(srv.root).encode() + b"/x.txt",
                              FILES["x.txt"])):
            resp = fetch(srv, target)
            ok(resp is not None and (resp.status in (403, 404) or
                                     (resp.status == 200 and resp.body == body)),
               "%r: the inside file, or 403/404" % target, repr(resp))

        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, FILES["x.txt"]), "the root still works afterwards")


run(main)
