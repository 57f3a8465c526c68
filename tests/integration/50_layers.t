#!/usr/bin/env python3
# The code's rooms and the one-way rules between them (docs/DESIGN.md,
# "Rooms"), read from the #include lines of every .c and .h:
#   server/base  uses nothing of ours;  server/pool  uses base;
#   server/http  uses base and pool;    server/ (top) uses any room of server/;
#   handlers/    use only the public API (PUBLIC below), never struct server;
#   main.c       sits above everything.
# And no include circle anywhere: a file never reaches itself.
import os
import re

from harness import REPO, is_, ok, run

ROOMS = {
    "server/base": set(),
    "server/pool": {"server/base"},
    "server/http": {"server/base", "server/pool"},
    "server/workers": {"server/base", "server/pool", "server/http"},
    "server": {"server/base", "server/pool", "server/http", "server/workers"},
    "handlers": {"handlers"},
    "main.c": {"handlers", "server", "server/base", "server/pool", "server/http",
               "server/workers"},
}
# What a handler may include from the core: the module API, the connection,
# pool submissions, sources and zlib states, and the base helpers.
PUBLIC = {"server/module.h", "server/http/conn.h", "server/pool/gateway.h", "server/pool/pump.h",
          "server/pool/zstates.h",
          "server/base/config.h", "server/base/loghist.h", "server/base/timeline.h",
          "server/base/snapshot.h", "server/base/http_date.h", "server/base/log.h",
          "server/base/util.h"}


def room(path):
    parts = path.split("/")
    if parts[0] == "server":
        return "/".join(parts[:2]) if len(parts) > 2 else "server"
    return parts[0]


def sources():
    for top in ("server", "handlers"):
        for d, _, names in os.walk(os.path.join(REPO, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, n), REPO)
    yield "main.c"


def includes(path):
    with open(os.path.join(REPO, path)) as f:
        return re.findall(r'^#include "([^"]+)"', f.read(), re.M)


def main():
    graph = {p: includes(p) for p in sources()}
    bad = []
    for path, incs in graph.items():
        for inc in incs:
            if room(inc) == room(path):
                continue
            if room(path) == "handlers":
                if room(inc) != "handlers" and inc not in PUBLIC:
                    bad.append("%s includes %s (not public)" % (path, inc))
            elif room(inc) not in ROOMS[room(path)]:
                bad.append("%s includes %s (%s may not use %s)" % (path, inc, room(path),
                                                                   room(inc)))
    is_(bad, [], "every #include keeps the one-way rules of the rooms (%d files)" % len(graph))

    # Circles between units: a unit is a .c with its .h (an _internal.h is a
    # unit of its own); an edge is an include of another unit's header from
    # either file of the unit.
    unit = lambda p: p.rsplit(".", 1)[0]
    edges = {}
    for path, incs in graph.items():
        edges.setdefault(unit(path), set()).update(unit(i) for i in incs if unit(i) != unit(path))
    circles = []

    def visit(u, stack, seen):
        for v in sorted(edges.get(u, ())):
            if v in stack:
                circles.append(" -> ".join(stack[stack.index(v):] + [v]))
            elif v not in seen:
                seen.add(v)
                visit(v, stack + [v], seen)

    for u in sorted(edges):
        visit(u, [u], {u})
    ok(not circles, "no include circle between units", *sorted(set(circles))[:10])


run(main)
