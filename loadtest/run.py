#!/usr/bin/env python3
"""unclog's threadpool-fairness experiment, end to end (see loadtest/README.md).

    python3 loadtest/run.py short   # make loadtest SHORT=1: 3 configs, 1 round, 48 s
    python3 loadtest/run.py quick   # make loadtest:      a few partitions, 8 min
    python3 loadtest/run.py full    # make loadtest-full: the whole sweep + peers, 58 min
    python3 loadtest/run.py bench   # make bench:         unclog vs nginx speed check
    python3 loadtest/run.py full --only attacks   # make loadtest-attacks: scenario 4 alone
    python3 loadtest/run.py full --only attacks --attacks reader,stalled --attackers 64
        # issue 39: the slow readers from 64 addresses (127.0.1.1-64), the stalled downloads

Every server it starts is pinned to CPU 0 and every load generator (wrk, the
probe, the page-cache evictor) to CPU 1 when there are two CPUs (but for bench's
workers row, which pins nothing); configurations are alternated round after
round and the tables report medians. Everything it starts is stopped by PID,
also on Ctrl-C and on errors. Python 3 standard library only; the code is in
loadtest/unclogbench/.

The times above: one run each on 2026-12-05/06, on a 2-core VM busy with other
test suites (loadtest/README.md, "How long": 48 s, 468 s, 3,477 s).
"""

import argparse
import datetime
import os
import shutil
import socket
import sys
import time

from unclogbench import RESULTS, TOP, attacks, log, report
from unclogbench.load import make_fixtures
from unclogbench.plots import plot, plot_attacks
from unclogbench.procs import Processes, Warnings
from unclogbench.scenarios import MODES, PARTS, Session, bench, fairness


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=list(MODES))
    ap.add_argument("--unclog", default=os.path.join(TOP, "build", "unclog"))
    ap.add_argument("--probe", default=os.path.join(TOP, "build", "probe"))
    ap.add_argument("--out", help="results directory (default build/results/DATE-HOST; a run"
                    " to commit: loadtest/results/DATE-HOST)")
    ap.add_argument("--rounds", type=int, help="override the mode's rounds")
    ap.add_argument("--partitions", help="comma-separated partitions, e.g. 4k,64k,whole")
    ap.add_argument("--fair", help="comma-separated partitions for unclog fair rows, e.g. auto")
    ap.add_argument("--rate", type=float, default=None, help="probe requests/s (each probe)")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip the peers (nginx, Node.js, lighttpd, h2o)")
    ap.add_argument("--only", help="comma-separated parts of short, quick or full to run: "
                    + ",".join(PARTS) + " (the report is then MODE-PARTS.md)")
    ap.add_argument("--attacks", help="comma-separated attacks of scenario 4 to run: "
                    "hog,silent,head,body,reader,stalled,files,gzip,bulk,paced (default all);"
                    " stalled: 4,500 slow readers of /16m.bin against a victim downloading "
                    "16 MiB files back to back (its MB/s against alone)")
    ap.add_argument("--attackers", type=int, default=1,
                    help="spread each attack over N addresses, 127.0.1.1 ... 127.0.1.N, "
                    "each with 1/N of its connections (default 1: from 127.0.0.1); the "
                    "victim stays on 127.0.0.2")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache variant")
    ap.add_argument("--behind-haproxy", action="store_true",
                    help="the attacks with Debian's haproxy in front of unclog, running "
                    "docs/haproxy.cfg: with the PROXY protocol, and without it (every client "
                    "one), beside unclog direct; no peers")
    ap.add_argument("--nice", type=int, default=-10 if os.geteuid() == 0 else 0,
                    help="nice value for everything started (default -10 as root, else 0)")
    ap.add_argument("--replot", action="store_true",
                    help="redraw the plots from the results directory's MODE-clog.csv")
    args = ap.parse_args()
    if args.out:
        args.out = os.path.abspath(args.out)  # the servers run in directories of their own
    return args


def mode_settings(args):
    """The mode's settings with the command line's overrides (they go in the report)."""
    settings = dict(MODES[args.mode])
    if args.rounds:
        settings["rounds"] = args.rounds
        settings["throughput_rounds"] = min(settings.get("throughput_rounds", 1), args.rounds)
        settings["attack_rounds"] = args.rounds
    if args.partitions:
        settings["partitions"] = args.partitions.split(",")
    if args.fair is not None:
        settings["fair"] = [p for p in args.fair.split(",") if p]
    if args.no_peers:
        settings["peers"] = False
        settings["attack_peers"] = []
    if args.behind_haproxy:
        settings["behind_haproxy"] = True
        settings["attack_peers"] = []
    if args.attacks:
        settings["attacks"] = args.attacks.split(",")
        unknown = set(settings["attacks"]) - {a.name for a in attacks.ATTACKS}
        if unknown:
            sys.exit(f"--attacks: unknown attack {', '.join(sorted(unknown))}; attacks: "
                     + ",".join(a.name for a in attacks.ATTACKS))
    if not 1 <= args.attackers <= attacks.MAX_ATTACKERS:
        sys.exit(f"--attackers: 1 to {attacks.MAX_ATTACKERS}, not {args.attackers}")
    settings["attackers"] = args.attackers
    if args.only and args.mode != "bench":
        settings["only"] = args.only.split(",")
        unknown = set(settings["only"]) - set(PARTS)
        if unknown:
            sys.exit(f"--only: unknown part {', '.join(sorted(unknown))}; parts: "
                     + ",".join(PARTS))
    if args.no_cold:
        settings["cold"] = False
    return settings


def latest_results():
    runs = os.listdir(RESULTS) if os.path.isdir(RESULTS) else []
    runs = [d for d in runs if os.path.isdir(os.path.join(RESULTS, d))]
    if not runs:
        sys.exit(f"no run in {os.path.relpath(RESULTS, TOP)}/: name one with --out DIR")
    return os.path.join(RESULTS, max(runs))


def replot(args, rate):
    """Redraws the plots of a finished run from its MODE-clog.csv and MODE-attacks.csv."""
    out = args.out or latest_results()
    warnings, made = Warnings(), []
    clog, att = (os.path.join(out, f"{args.mode}-{n}.csv") for n in ("clog", "attacks"))
    if os.path.exists(clog):
        made += plot(args.mode, rate, out, report.read_csv(clog), warnings)
    if os.path.exists(att):
        made += plot_attacks(args.mode, out, report.read_csv(att), attacks.ATTACKS,
                             attacks.ATTACK_FIGURES, warnings)
    if not made:
        sys.exit(f"nothing to replot in {out}")
    for path in made:
        log(f"written: {path}")
    return 0


def run_attacks(session):
    """Scenario 4, its table and its plot."""
    s = session.settings
    log("attacks between clients (scenario 4)")
    rows = attacks.run_attacks(session)
    made = plot_attacks(session.mode, session.out, rows, attacks.ATTACKS,
                        attacks.ATTACK_FIGURES, session.warnings)
    return report.attacks_section(rows, attacks.ATTACKS, attacks.VICTIMS,
                                  attacks.ATTACK_FIGURES, s["attack_rounds"],
                                  s["attack_victim"], made)


def report_name(mode, settings):
    """bench.md, MODE.md, or MODE-PARTS.md when --only left parts out."""
    if mode == "bench":
        return "bench.md"
    only = settings["only"]
    return f"{mode}.md" if set(only) == set(PARTS) else f"{mode}-{'-'.join(only)}.md"


def check_tools(args):
    for tool in ["wrk"] + (["nginx"] if args.mode == "bench" else []):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            sys.exit(f"{tool} not found: apt-get install wrk gnuplot-nox nginx-light")
    os.environ["PATH"] += os.pathsep + "/usr/sbin"
    for exe in (args.unclog, args.probe):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} missing: run make {os.path.relpath(exe, TOP)}")


def main():
    args = parse_args()
    settings = mode_settings(args)
    rate = args.rate or settings.get("rate", 200)
    if args.replot:
        return replot(args, rate)
    check_tools(args)
    day = datetime.date.today().isoformat()
    out = args.out or os.path.join(RESULTS, f"{day}-{socket.gethostname()}")
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    started = time.time()
    log(f"unclog load test, mode {args.mode}; results in {os.path.relpath(out, TOP)}")
    make_fixtures()
    warnings = Warnings()
    with Processes(nice=args.nice) as procs:
        session = Session(args.mode, settings, procs, warnings, args.unclog, args.probe,
                          rate, out, tmp)
        info = report.environment(session, args.nice, settings)
        if args.mode == "bench":
            sections = bench(session)
        else:
            sections = fairness(session)
            if "attacks" in settings["only"]:
                sections += run_attacks(session)
    parts = report.document(args.mode, info, sections, warnings, time.time() - started)
    path = os.path.join(out, report_name(args.mode, settings))
    with open(path, "w") as f:
        f.write("\n".join(parts))
    log("")
    log("\n".join(parts[4:]))
    log(f"written: {os.path.relpath(path, TOP)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
