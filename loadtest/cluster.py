#!/usr/bin/env python3
"""make loadtest-cluster: three unclog machines behind HAProxy in network
namespaces on one box (issue 43; unclogbench/cluster.py says what it builds
and measures). Needs root, `ip netns`, tc's tbf and haproxy; refuses to run,
with the reason, without them. Everything it starts is stopped by PID and
every namespace deleted on exit, on Ctrl-C (SIGINT, SIGTERM, SIGHUP) and on
failure. Writes build/results/DATE-HOST/cluster.md, cluster.json and, with
gnuplot, cluster-attacks.svg; --replot DIR redraws that plot from DIR's
cluster.json (no root, nothing run).

    python3 loadtest/cluster.py [--parts attacks,slow,kill,rolling]
                                [--attacks hog,...] [--victim S] [--out DIR]
    python3 loadtest/cluster.py --replot DIR
"""

import argparse
import datetime
import json
import os
import shutil
import socket
import sys
import time

from unclogbench import RESULTS, TOP, log, report
from unclogbench.attacks import ATTACKS, VICTIMS
from unclogbench.cluster import (ATTACKER, ATTACKER_MORE, LB, PARTS, SLOW_HOSTS, SPREAD, USERS, VICTIM, WEBS,
                                 Cluster, run_attacks, run_kill, run_rolling, run_slow)
from unclogbench.load import make_fixtures
from unclogbench.netns import Network, unavailable
from unclogbench.plots import plot_cluster_attacks
from unclogbench.procs import Processes, Warnings
from unclogbench.scenarios import Session


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unclog", default=os.path.join(TOP, "build", "unclog"))
    ap.add_argument("--probe", default=os.path.join(TOP, "build", "probe"))
    ap.add_argument("--out", help="results directory (default build/results/DATE-HOST)")
    ap.add_argument("--parts", default=",".join(PARTS), help="some of " + ",".join(PARTS))
    # The stalled-download shape (issue #39's open gap) is left out by default:
    # the published cluster runs have the nine others; --attacks names it.
    ap.add_argument("--attacks", default=",".join(a.name for a in ATTACKS if a.name != "stalled"),
                    help="some of " + ",".join(a.name for a in ATTACKS) + " (default: all but stalled)")
    ap.add_argument("--victim", type=float, default=8.0,
                    help="seconds of the victim's probe per attack phase (default 8)")
    ap.add_argument("--nice", type=int, default=-10 if os.geteuid() == 0 else 0)
    ap.add_argument("--replot", metavar="DIR",
                    help="redraw cluster-attacks.svg from DIR's cluster.json; runs nothing")
    args = ap.parse_args()
    args.parts = args.parts.split(",")
    args.attacks = args.attacks.split(",")
    if set(args.parts) - set(PARTS) or set(args.attacks) - {a.name for a in ATTACKS}:
        sys.exit("--parts or --attacks: unknown name")
    return args


def cell(r, key, digits="auto"):
    v = r.get(key)
    return report.fmt(float(v), digits) if v not in (None, "") else "–"


def victim_cell(r):
    """p99 ms (or MB/s for the bulk victims) and the failures."""
    v = cell(r, "victim_mb_s") + " MB/s" if r.get("victim_mb_s") not in (None, "") \
        else cell(r, "victim_p99_ms") + " ms"
    return f"{v}, {r.get('victim_failed', 0)} failed"


def attacks_section(rows, where, seconds, plots=()):
    out = ["## Attacks through the balancer\n",
           f"The victim host ({VICTIM}, on {where.get(VICTIM)}) probes through HAProxy for "
           f"{seconds:g} s per phase: alone, under the attack from one host ({ATTACKER}, on "
           f"{where.get(ATTACKER)}), and under the same attack spread over four hosts, each "
           f"with a quarter of its connections ({', '.join(f'{a} on {where.get(a)}' for a in SPREAD)})."
           " Cells: the victim's p99 (or MB/s for a bulk victim) and its failed requests; "
           "the attackers' 503s and failures summed. One round.\n"]
    table = []
    for r in rows:
        vic = VICTIMS[ATTACKS[[a.name for a in ATTACKS].index(r["attack"])].victim][1]
        table.append([r["title"], vic, victim_cell(r["alone"]), victim_cell(r["one"]),
                      f"{r['one'].get('attacker_refused')} / {r['one'].get('attacker_errors')}",
                      victim_cell(r["spread"]),
                      f"{r['spread'].get('attacker_refused')} / "
                      f"{r['spread'].get('attacker_errors')}"])
    out.append(report.table(["attack", "victim", "alone", "one attacker host",
                             "its 503s / failures", "spread over 4 hosts", "their 503s / failures"],
                            table))
    out += [f"![{os.path.basename(p)}]({os.path.basename(p)})\n" for p in plots]
    return out


def slow_section(rows):
    out = ["## Rate-limited hosts\n",
           "Each host downloads its file on one connection, back to back, through its link "
           "(tbf both ways; Mbit/s counts body bytes, partial downloads included); alone, "
           "then beside a bulk flood on their backends (10 connections looping 16 MiB files, "
           "from the attacker host's addresses that hash there). Memory: the most each "
           "backend's budget held (/stats memory.held) and its RSS, sampled every second "
           "of the phase.\n"]
    table = []
    for r in rows:
        mem = ", ".join(f"{n} {r['held'][n] / 2**20:.1f} MiB / {r['rss'][n]:.0f} MiB"
                        for n in WEBS)
        flood = f"{r['flood']}: {r['flood_mb_s']} MB/s" if r["flood"] else "none"
        table.append([f"{r['host']} ({r['link']}) on {r['backend']}", r["path"], flood,
                      f"{r['mbit_s']:.2f}", r["requests"], r["errors"], mem])
    out.append(report.table(["host (link)", "file", "flood from (backend)", "Mbit/s",
                             "downloads", "probe errors", "held / RSS per backend"], table))
    return out


def kill_section(r):
    return ["## A backend killed\n",
            f"The users host ({len(USERS)} addresses, one thread each: keep-alive "
            "connections of 6 requests, GET 96 KiB and POST /gzip 16 KiB in turn) runs; "
            f"{r['backend']} (serving {r['users_on_it']} of them) is SIGKILLed; HAProxy's check "
            "(inter 2s fall 3 rise 2) takes it out; 2 s later it starts again.\n",
            report.table(["what", "value"], [
                ["requests lost before the check took it out", r["lost_before_down"]],
                ["requests lost after", r["lost_after_down"]],
                ["requests lost before the kill", r["lost_before_kill"]],
                ["seconds from the kill to DOWN", r["down_after_s"]],
                ["seconds from its start to UP", r["up_after_start_s"]],
                [f"requests {r['backend']} served in the "
                 "seconds after its return", r["served_after_return"]],
                ["the users' requests served / failed", f"{r['users_ok']} / {r['users_failed']}"],
            ])]


def rolling_section(r):
    out = ["## Rolling restart\n",
           "docs/load-balancing.md's recipe, one backend after the other, under the same "
           "users: drain it (runtime API), wait until HAProxy has no connection open to it "
           "(scur 0), SIGTERM, start it, set it ready, wait until the check has it UP.\n",
           report.table(["backend", "drain to scur 0, s", "exit status", "SIGTERM to exit, s",
                         "start to UP, s"],
                        [[s["backend"], s["drained_s"], s["exit"], s["stopped_s"], s["up_s"]]
                         for s in r["steps"]]),
           f"\nThe users' requests through it: **{r['ok']} served, {r['failed']} failed**.\n"]
    return out


def replot(out):
    """Redraws cluster-attacks.svg from a finished run's cluster.json."""
    path = os.path.join(out, "cluster.json")
    if not os.path.exists(path):
        sys.exit(f"{path}: no such file")
    with open(path) as f:
        rows = json.load(f).get("attacks") or []
    warnings = Warnings()
    made = plot_cluster_attacks(out, rows, ATTACKS, warnings)
    if not made:
        sys.exit(f"nothing to replot in {out}")
    for p in made:
        log(f"written: {os.path.relpath(p, TOP)}")
    return 0


def main():
    args = parse_args()
    if args.replot:
        return replot(os.path.abspath(args.replot))
    prefix = f"ucl-{os.getpid()}"
    why = unavailable(prefix)
    if why is None and not (shutil.which("haproxy") or os.path.exists("/usr/sbin/haproxy")):
        why = "haproxy is not installed (apt-get install haproxy)"
    if why is None and not shutil.which("tc"):
        why = "tc is not installed (iproute2)"
    for exe in (args.unclog, args.probe):
        if why is None and not os.access(exe, os.X_OK):
            why = f"{exe} missing: run make {os.path.relpath(exe, TOP)}"
    if why:
        sys.exit(f"make loadtest-cluster cannot run here: {why}")
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(RESULTS, f"{day}-{socket.gethostname()}")
    tmp = os.path.join(out, "tmp", "cluster")
    os.makedirs(tmp, exist_ok=True)
    started = time.time()
    log(f"unclog load test, cluster in namespaces {prefix}-*; results in "
        f"{os.path.relpath(out, TOP)}")
    make_fixtures()
    warnings = Warnings()
    settings = dict(parts=args.parts, attacks=args.attacks, victim=args.victim, slow=20,
                    kill_lead=5)
    sections, record = [], {}
    with Processes(nice=args.nice) as procs:
        session = Session("cluster", settings, procs, warnings, args.unclog, args.probe, 100,
                          out, tmp)
        info = report.environment(session, args.nice, settings)
        info["pinning"] = "none: every process of the cluster shares both CPUs"
        net = Network(prefix)
        try:
            cl = Cluster(session, net)
            where = cl.placement()
            record["placement"] = where
            log("  placement (balance source): " + ", ".join(f"{a} {w}" for a, w in
                                                              where.items()))
            if "attacks" in args.parts:
                rows = run_attacks(cl, settings, args.attacks)
                record["attacks"] = rows
                made = plot_cluster_attacks(out, rows, ATTACKS, warnings)
                sections += attacks_section(rows, where, args.victim, made)
            if "slow" in args.parts:
                rows = run_slow(cl, settings, where)
                record["slow"] = rows
                sections += slow_section(rows)
            if "kill" in args.parts:
                r = run_kill(cl, settings, where)
                record["kill"] = r
                sections += kill_section(r)
            if "rolling" in args.parts:
                r = run_rolling(cl, settings)
                record["rolling"] = r
                sections += rolling_section(r)
                if r["failed"]:
                    warnings.add(f"rolling restart: {r['failed']} failed requests: "
                                 f"{r['failures'][:3]}")
        finally:
            procs.stop_all()
            for failure in net.teardown():
                warnings.add(f"namespace not deleted: {failure}")
    info["network"] = (f"namespaces on one bridge: balancer {LB}, backends "
                       f"{', '.join(f'{n} {a}' for n, a in WEBS.items())}; victim {VICTIM}, "
                       f"attacker {ATTACKER} (and {ATTACKER_MORE[0]}-{ATTACKER_MORE[-1]}), spread {', '.join(SPREAD)}, "
                       + ", ".join(f"{n} {a} ({r})" for n, a, r, _ in SLOW_HOSTS)
                       + f", users {', '.join(USERS)}")
    parts = report.document("cluster", info, sections, warnings, time.time() - started)
    parts[1] = ("One round; figures of one machine's cores shared by every host, so noisy. "
                "See loadtest/README.md and docs/load-balancing.md.\n")
    path = os.path.join(out, "cluster.md")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    with open(os.path.join(out, "cluster.json"), "w") as f:
        json.dump(record, f, indent=1, default=str)
    log("")
    log("\n".join(parts[4:]))
    log(f"written: {os.path.relpath(path, TOP)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
