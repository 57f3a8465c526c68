#!/usr/bin/env python3
# No call circle between the units of server/ (docs/DESIGN.md, "Rooms"):
# each .c at the top of server/ is a unit, and each folder under it (base,
# pool, http, workers) is one unit as a whole. Unit A calls unit B when a
# file of A names a function that a file of B defines and exports (a call,
# or its address handed on as a callback), comments and strings left out.
# 50_layers.t checks the #include lines; this checks what the code calls,
# which an include does not show: server.c calls listener.c through
# server_internal.h, and listener.c must not call server.c back.
# And inside each room, file by file: the files of a room call one another
# one way only (the connection's files stand in layers, conn_internal.h), so
# what a file calls is read without the files that call it.
import os
import re

from harness import REPO, is_, ok, run

# A definition at file scope: a line that starts with its type (no
# "static"), the name and its parameters, and the body's brace on the next
# line (the house style, which clang-format keeps).
DEFINITION = re.compile(r"^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t\*]*?\b(\w+)\(([^;{}]*?)\)\s*\n\{",
                        re.M)
IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
# Comments, string and character literals: blanked before names are read.
NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def unit(path):
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def sources():
    top = os.path.join(REPO, "server")
    for d, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(".c"):
                yield os.path.relpath(os.path.join(d, n), REPO)


def strip(text):
    return NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def calls(texts, unit_of=unit):
    """{unit: {other unit it calls: [the names]}} from {path: stripped text},
    each path in the unit UNIT_OF names."""
    owner = {}
    for path, text in texts.items():
        for m in DEFINITION.finditer(text):
            owner.setdefault(m.group(1), set()).add(unit_of(path))
    edges = {}
    for path, text in texts.items():
        u = unit_of(path)
        for name in set(IDENTIFIER.findall(text)):
            for v in owner.get(name, ()):
                if v != u:
                    edges.setdefault(u, {}).setdefault(v, []).append(name)
    return owner, edges


def circles(edges):
    found = set()

    def visit(u, stack):
        for v in sorted(edges.get(u, {})):
            if v in stack:
                loop = stack[stack.index(v):]
                k = loop.index(min(loop))
                found.add(tuple(loop[k:] + loop[:k]))
            elif len(stack) < len(edges) + 1:
                visit(v, stack + [v])

    for u in sorted(edges):
        visit(u, [u])
    return sorted(found)


def describe(loop, edges):
    hops = zip(loop, loop[1:] + loop[:1])
    return " -> ".join("%s (%s)" % (a, ", ".join(sorted(edges[a][b])[:3])) for a, b in hops) \
        + " -> " + loop[0]


def main():
    texts = {}
    for path in sources():
        with open(os.path.join(REPO, path)) as f:
            texts[path] = strip(f.read())
    owner, edges = calls(texts)

    # The reading itself works: what is known to be called is seen.
    ok("server_route" in owner and "server/router.c" in edges.get("server/server.c", {}),
       "server.c calls router.c (the reading finds calls)")
    ok("server/workers" in edges.get("server/server.c", {}),
       "server.c calls the workers room")
    ok("server/http" in edges.get("server/listener.c", {}), "listener.c calls the http room")

    found = circles(edges)
    is_([describe(c, edges) for c in found], [],
        "no call circle between the units of server/ (%d units, %d calls between them)"
        % (len(edges), sum(len(v) for v in edges.values())))

    # File by file inside each room of server/.
    rooms = sorted({unit(p) for p in texts if unit(p) != p})
    ok("server/http" in rooms, "the rooms are read", rooms)
    for room in rooms:
        inside = {p: t for p, t in texts.items() if unit(p) == room}
        _, file_edges = calls(inside, lambda p: p)
        if room == "server/http":
            ok("server/http/conn.c" in file_edges.get("server/http/send.c", {}),
               "send.c calls conn.c (the reading finds calls between files)")
        found = circles(file_edges)
        is_([describe(c, file_edges) for c in found], [],
            "no call circle between the files of %s (%d files, %d calls between them)"
            % (room, len(inside), sum(len(v) for v in file_edges.values())))


run(main)
