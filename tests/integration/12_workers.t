#!/usr/bin/env python3
# workers = 2: a master and two workers share one listening socket. Both
# answer over a series of new connections (/stats says which); a worker
# killed with SIGKILL is replaced; SIGHUP reaches every worker; SIGTERM to the
# master stops them all, with exit status 0 and no process left behind.
import os
import signal

from harness import KiB, Server, is_, like, ok, poll, run

CONNECTIONS = 400


def alive(pid):
    # A zombie is not running: only its parent's wait is missing.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone, or going while read
        return False


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            out += [int(p) for p in f.read().split()]
    return sorted(out)


def who(srv):
    """(worker, pid) of the worker that answered a new connection."""
    s = srv.stats()
    return s["worker"], s["pid"]


def survey(srv, want):
    """New connections until every worker in WANT answered; returns {worker: pid}."""
    seen = {}
    for _ in range(CONNECTIONS):
        w, pid = who(srv)
        seen[w] = pid
        if set(seen) >= want:
            break
    return seen


def main():
    srv = Server(files={"x.txt": b"x"}, args=["--workers", "2", "--threads", "2"],
                 name="two-worker server")
    srv.start()
    ok(poll(lambda: len(children(srv.pid)) == 2), "the master has two children",
       "children %r" % children(srv.pid))
    workers = children(srv.pid)
    seen = survey(srv, {1, 2})
    is_(sorted(seen), [1, 2], "both workers answer over a series of new connections")
    is_(sorted(seen.values()), workers, "the pids /stats reports are the master's children")

    victim = seen[1]
    os.kill(victim, signal.SIGKILL)
    ok(poll(lambda: not alive(victim)), "the killed worker is gone")
    ok(poll(lambda: len(children(srv.pid)) == 2 and victim not in children(srv.pid)),
       "the master forks a replacement", "children %r" % children(srv.pid))
    again = survey(srv, {1, 2})
    ok(again.get(1) not in (None, victim), "worker 1 answers again, from a new pid",
       "seen %r" % again)
    is_(again.get(2), seen[2], "worker 2 was left alone")
    like(srv.stderr(), r"worker 1 \(pid %d\) was killed by signal 9" % victim,
         "the master logs the death")

    with open(srv.conf_path, "a") as f:
        f.write("partition = 16k\n")
    srv.send_signal(signal.SIGHUP)
    ok(poll(lambda: srv.stderr().count("reloaded the configuration") >= 2),
       "SIGHUP to the master reaches both workers")
    after = {}
    for _ in range(CONNECTIONS):
        s = srv.stats()
        after[s["worker"]] = s["partition"]
        if len(after) == 2:
            break
    is_(after, {1: 16 * KiB, 2: 16 * KiB}, "every worker serves the reloaded partition")

    pids = children(srv.pid)
    srv.stop(signal.SIGTERM)
    ok(not any(alive(p) for p in pids), "no worker is left after the master exits",
       "pids %r" % pids)


run(main)
