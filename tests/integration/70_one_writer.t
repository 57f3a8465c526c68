#!/usr/bin/env python3
# HTTP output has one owner: server/http/ (docs/DESIGN.md, "Rooms").
#   - No file under server/pool/ writes HTTP framing (a string with CRLF in
#     it, Transfer-Encoding, a chunk-size format) or calls a socket write
#     (uv_write, uv_try_write, write, writev, send, sendmsg, sendfile): the
#     pool fills buffers and hands them up.
#   - No file under server/http/ names a field of the pump's structs
#     (`pump->held`, `c->pump.sent`, `env->pump->...`, `->sender->...`):
#     it asks the pump with its functions.
# Read from the sources with their comments taken out.
import os
import re

from harness import REPO, is_, ok, run

SOCKET_WRITE = re.compile(r"\b(uv_write|uv_try_write|write|writev|send|sendmsg|sendfile)\s*\(")
FRAMING = [
    (re.compile(r'"(?:[^"\\\n]|\\.)*\\r\\n(?:[^"\\\n]|\\.)*"'), "a string with CRLF"),
    (re.compile(r"Transfer-Encoding", re.I), "Transfer-Encoding"),
    (re.compile(r'"%z?x'), "a chunk-size format"),
]
PUMP_FIELD = [
    (re.compile(r"\bpump\s*(->|\.)\s*[A-Za-z_]\w*(?!\s*\()"), "a field of a pump"),
    (re.compile(r"->\s*sender\s*->"), "a field through ->sender->"),
]


def code(path):
    """PATH's text without its comments (strings kept)."""
    with open(os.path.join(REPO, path)) as f:
        text = f.read()
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def files(room):
    top = os.path.join(REPO, room)
    return sorted(os.path.relpath(os.path.join(top, n), REPO) for n in os.listdir(top)
                  if n.endswith((".c", ".h")))


def hits(path, patterns):
    found = []
    for no, line in enumerate(code(path).split("\n"), 1):
        if line.lstrip().startswith("#include"):
            continue
        for rx, what in patterns:
            for m in rx.finditer(line):
                found.append("%s:%d: %s: %s" % (path, no, what, m.group(0).strip()))
    return found


def main():
    pool, http = files("server/pool"), files("server/http")
    ok(pool and http, "server/pool and server/http have sources (%d and %d)" % (len(pool),
                                                                                len(http)))
    framing = [h for p in pool for h in hits(p, FRAMING)]
    is_(framing, [], "no file under server/pool/ writes HTTP framing")
    writes = [h for p in pool for h in hits(p, [(SOCKET_WRITE, "a socket write")])]
    is_(writes, [], "no file under server/pool/ calls a socket write")
    fields = [h for p in http for h in hits(p, PUMP_FIELD)]
    is_(fields, [], "no file under server/http/ names a field of the pump's structs")
    # The checks themselves see what they look for.
    sample = 'static const char crlf[] = "\\r\\n";\nuv_try_write(s, b, 1);\nc->pump.sent++;\n'
    seen = [rx.search(sample) is not None for rx, _ in FRAMING[:1] + PUMP_FIELD[:1]]
    ok(all(seen) and SOCKET_WRITE.search(sample), "the patterns find a CRLF string, a socket "
       "write and a pump field")


run(main)
