#!/usr/bin/env python3
# The code's rooms and the one-way rules between them (docs/DESIGN.md,
# "Rooms"), read from the #include lines of every .c and .h:
#   server/base  uses nothing of ours;  server/pool  uses base;
#   server/http  uses base and pool;    server/ (top) uses any room of server/;
#   handlers/    use only the public API (PUBLIC below), never struct server;
#   main.c       sits above everything.
# For handlers the rule holds transitively too: what a file's includes
# include counts as included (for the server's rooms the direct rule implies
# it). A handler sees only PUBLIC headers (and handlers/), however deep; the
# non-public headers a PUBLIC one pulls in today are listed in LEAKS, and
# any other fails.
# The sender (the loop's writes) reaches nothing of pool/.
# And no include circle anywhere: a file never reaches itself.
# Test files: no two integration tests share a number.
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
PUBLIC = {"server/module.h", "server/http/conn.h", "server/http/route.h", "server/pool/gateway.h",
          "server/pool/source.h",
          "server/pool/zstates.h",
          "server/base/config.h", "server/base/pass.h", "server/base/loghist.h", "server/base/timeline.h",
          "server/base/snapshot.h", "server/base/http_date.h", "server/base/log.h",
          "server/base/util.h"}

# Non-public core headers handlers reach today through a PUBLIC header
# (PUBLIC header, header it leaks). Remove an entry when its leak goes; a
# new leak fails. What is left is embedded by value in what a handler
# declares, so its layout must be seen: a handler's pool job embeds the
# scheduler's item (struct gateway_job, and source.h names its class
# through gateway.h), and a /stats wait embeds the figures' wait
# (struct server_refresh).
LEAKS = {
    ("server/module.h", "server/base/fairq.h"),
    ("server/module.h", "server/pool/sched.h"),
    ("server/module.h", "server/workers/figures.h"),
    ("server/pool/gateway.h", "server/base/fairq.h"),
    ("server/pool/gateway.h", "server/pool/sched.h"),
    ("server/pool/source.h", "server/base/fairq.h"),
    ("server/pool/source.h", "server/pool/sched.h"),
}


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

    # Transitively: the headers a file reaches through its includes.
    def closure(path):
        seen, stack = set(), [path]
        while stack:
            for inc in graph.get(stack.pop(), ()):
                if inc not in seen:
                    seen.add(inc)
                    stack.append(inc)
        return seen

    # A handler's view: what each PUBLIC header (or handlers/ header) it
    # includes pulls in. Each non-public core header reached is a leak of
    # the public header the handler entered by.
    leaks = set()
    for path in graph:
        if room(path) != "handlers":
            continue
        for entry in graph[path]:
            if entry not in PUBLIC:
                continue
            for inc in closure(entry):
                if room(inc) != "handlers" and inc not in PUBLIC:
                    leaks.add((entry, inc))
    is_(sorted("%s pulls %s into handlers" % l for l in leaks - LEAKS), [],
        "handlers see, however deep, only public headers (beyond the %d known leaks)"
        % len(LEAKS))
    ok(not (LEAKS - leaks), "every known leak still exists (remove those gone)",
       *sorted("%s no longer pulls %s" % l for l in LEAKS - leaks))

    # The loop's writes are http/'s: the sender and its policy (which client
    # writes next in a pass) reach nothing of pool/, so a write never goes
    # back down into the threadpool's room to ask whose turn it is.
    senders = ["server/http/sender.c", "server/http/sender.h"]
    is_(sorted("%s reaches %s" % (p, i) for p in senders for i in closure(p)
               if room(i) == "server/pool"), [],
        "the sender and its policy reach nothing of server/pool/")

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

    numbers = {}
    for name in sorted(os.listdir(os.path.join(REPO, "tests", "integration"))):
        m = re.match(r"(\d+)_.*\.t$", name)
        if m:
            numbers.setdefault(int(m.group(1)), []).append(name)
    shared = [" and ".join(names) for names in numbers.values() if len(names) > 1]
    is_(shared, [], "no two integration tests share a number (%d tests)" % len(numbers))


run(main)
