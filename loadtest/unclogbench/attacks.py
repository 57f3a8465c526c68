"""Scenario 4: the attacks between clients (issue 17), unclog and the peers.

One address attacks (127.0.0.1), another is the victim (127.0.0.2, build/probe
--from); both connect to 127.0.0.1. With --attackers N (N > 1) the attack comes
from N addresses, 127.0.1.1 ... 127.0.1.N, each with 1/N of the shape's
connections (issue 39: a small botnet): slow.py takes the list and spreads its
connections itself; build/probe binds one address, so N probes run, each with
its share, and their JSON lines are summed. No attack uses wrk (it cannot bind
a source address): every shape is build/probe or slow.py. Each attack gets a fresh server: first the
victim alone, then the attacker starts and, after its lead, the victim runs
again for as long. Rows are dicts of ATTACK_FIELDS plus "config"; report.py
makes the table, plots.py the plot.
"""

import dataclasses
import os
import time

from . import log
from .load import (FLOOD, SMALL, SMALL_FILES, make_small_fixtures, prewarm, small_paths,
                   start_probe_args, start_slow)
from .scenarios import alternate, cpu_stall_us
from .servers import attack_peers, unclog

ATTACKER, VICTIM = "127.0.0.1", "127.0.0.2"
SPREAD_NET = "127.0.1."  # --attackers N > 1: 127.0.1.1 ... 127.0.1.N
MAX_ATTACKERS = 254
VICTIM_RATE = 100  # the victim's GETs per second
WARMUP = 0.5  # seconds the victim's probe sends before it counts (probe.c: --warmup)
VICTIM_GET = "/96k.bin"  # larger than the small-file cache takes (64k)
HOG = 4500  # more than unclog's max_connections (4096) from one address
PACE = 32  # the paced victim's 16 MiB GETs per second: 537 MB/s, under half of what the
# server moves under the bulk attack (about 2 GB/s here), above a tenth of it


BULK = ("--flood", "10", "--get", "/flood/16m-0*.bin", "--files", str(len(FLOOD)))


SLOW = 2  # seconds between a slow attacker's steps on one connection
SLOW_BODY_PEERS = "/1k.bin"  # the trickled body's path on the peers (they have no /gzip)


def slow(shape, path):
    """slow.py's arguments: HOG connections of SHAPE on PATH, a step every SLOW s."""
    return ("--shape", shape, "--conns", str(HOG), "--path", path, "--interval", str(SLOW))


@dataclasses.dataclass(frozen=True)
class Attack:
    name: str  # the key in the CSV: hog, silent, head, body, reader, files, gzip, bulk, paced
    short: str  # the plot's panel title
    title: str  # the table's words for the attack
    attacker: tuple  # build/probe's arguments, or slow.py's (slow)
    victim: str  # a key of VICTIMS
    lead: float  # seconds the attacker runs before the victim starts
    gzip: bool = False  # needs POST /gzip (unclog, Node.js)
    holds: bool = False  # takes connections, not work: 503s and closes are its lot
    slow: bool = False  # the attacker is slow.py
    on_peers: tuple = None  # the attacker's arguments on the peers, when they differ

    def attacker_for(self, server):
        return self.on_peers if self.on_peers and server.config.server != "unclog" \
            else self.attacker


ATTACKS = (
    Attack("hog", "connection hog",
           f"connection hog: {HOG:,} keep-alive connections, one GET /1k.bin on each every 3 s",
           ("--hog", str(HOG), "--hog-interval", "3", "--get", "/1k.bin"), "get-close", 2.0,
           holds=True),
    # a client that only connects: no request, so nothing to answer, and each
    # connection the server closes is opened again at once
    Attack("silent", "silent hog",
           f"silent hog: {HOG:,} connections that never send a byte, each reopened as soon "
           "as it closes", ("--hog", str(HOG), "--hog-silent", "--get", "/1k.bin"),
           "get-close", 2.0, holds=True),
    # the slow shapes: each connection costs the attacker a few bytes every SLOW s
    Attack("head", "trickled head",
           f"trickled head: {HOG:,} connections, each sending a GET's head one header line "
           f"every {SLOW} s, reopened when closed", slow("head", "/1k.bin"), "get-close", 2.0,
           holds=True, slow=True),
    Attack("body", "trickled body",
           f"trickled body: {HOG:,} connections, each POSTing Content-Length: 16 MiB one byte "
           f"every {SLOW} s (to /gzip; on the peers to {SLOW_BODY_PEERS}), reopened when closed",
           slow("body", "/gzip"), "get-close", 2.0, holds=True, slow=True,
           on_peers=slow("body", SLOW_BODY_PEERS)),
    Attack("reader", "slow reader",
           f"slow reader: {HOG:,} connections, each GET /16m.bin through a 1 KiB receive "
           f"buffer, 512 bytes read every {SLOW} s, reopened when closed",
           slow("read", "/16m.bin"), "get-close", 2.0, holds=True, slow=True),
    # issue 39 item 1: the same slow readers against a victim that downloads, not one
    # that asks for small files: do the attackers' stalled responses hold the memory
    # the victim's large responses need?
    Attack("stalled", "stalled download",
           f"stalled download: {HOG:,} connections, each GET /16m.bin through a 1 KiB "
           f"receive buffer, 512 bytes read every {SLOW} s, reopened when closed",
           slow("read", "/16m.bin"), "bulk", 2.0, holds=True, slow=True),
    Attack("files", "small-file flood",
           f"small-file flood: 64 connections over {SMALL_FILES:,} distinct 8 KiB files",
           ("--flood", "64", "--get", SMALL, "--files", str(SMALL_FILES)), "get", 1.0),
    Attack("gzip", "/gzip flood", "/gzip flood: 32 connections POSTing 64 KiB bodies",
           ("--flood", "32", "--gzip", "--body-size", "65536"), "get", 1.0, gzip=True),
    Attack("bulk", "bulk (16 MiB)",
           f"bulk: 10 connections looping over the {len(FLOOD)} 16 MiB flood files",
           BULK, "bulk", 1.0),
    # issue 17's case for bulk: a victim whose demand is below half the server's throughput
    Attack("paced", "bulk, paced victim",
           "bulk, the victim's demand bounded: the same 10 connections looping 16 MiB",
           BULK, "paced", 1.0),
)

# The victim's probe per kind, and what the table reports of it.
VICTIMS = {
    "get-close": (("--get", VICTIM_GET, "--rate", str(VICTIM_RATE), "--close",
                   "--warmup", str(WARMUP)),
                  f"GET 96 KiB at {VICTIM_RATE}/s, a new connection each: p99 ms"),
    "get": (("--get", VICTIM_GET, "--rate", str(VICTIM_RATE), "--warmup", str(WARMUP)),
            f"GET 96 KiB at {VICTIM_RATE}/s, keep-alive: p99 ms"),
    "bulk": (("--flood", "1", "--get", "/16m.bin"),
             "its own 16 MiB downloads on one connection, back to back: MB/s"),
    "paced": (("--get", "/16m.bin", "--rate", str(PACE), "--max-conns", "1",
               "--warmup", str(WARMUP)),
              f"its own 16 MiB downloads at {PACE}/s ({PACE * 16.777216:.0f} MB/s) on one "
              "connection: MB/s that came in time"),
}

ATTACK_FIELDS = ["label", "kind", "round", "attack", "phase", "attackers",
                 "victim_scheduled", "victim_ok", "victim_failed", "victim_refused",
                 "victim_p50_ms", "victim_p99_ms", "victim_max_ms", "victim_mb_s",
                 "victim_lag_max_ms", "attacker_req_s", "attacker_mb_s", "attacker_requests",
                 "attacker_errors", "attacker_refused", "attacker_server_closed",
                 "attacker_conns_opened", "cpu_pressure_pct", "series"]
ATTACK_FIGURES = ATTACK_FIELDS[6:-1]  # the columns that have medians


def attacker_addresses(n):
    """The addresses an attack comes from: 127.0.0.1 alone, or 127.0.1.1 ... 127.0.1.N."""
    if not 1 <= n <= MAX_ATTACKERS:
        raise ValueError(f"--attackers: 1 to {MAX_ATTACKERS}, not {n}")
    return [ATTACKER] if n == 1 else [f"{SPREAD_NET}{i}" for i in range(1, n + 1)]


def start_attacker(session, server, attack, seconds):
    """The attack from the session's attacker addresses."""
    # One process whatever the addresses (connection i from the (i mod n)-th):
    # the attack costs the load generator's CPU what it costs from one address,
    # and the victim's probe, on the same CPU, is not starved by 64 of them.
    sources = ",".join(attacker_addresses(session.settings.get("attackers", 1)))
    args = attack.attacker_for(server)
    if attack.slow:
        return start_slow(session, server.port, args, seconds, sources)
    return start_probe_args(session, server.port, args, seconds, sources)


def configs(session):
    """unclog's defaults, its fifo 64k "damage" row, and the mode's peers."""
    s = session.settings
    defaults = unclog("auto", scheduler="fair", cache=True, loop=True)  # (access log off)
    if s.get("behind_haproxy"):
        # The defaults direct, behind the balancer with the PROXY protocol, and
        # behind it without (every client is the balancer's one address).
        # Without the balancer's per-source limit ("no door", for the attacks
        # that hold connections; the others hold fewer than it lets through),
        # unclog alone decides who keeps a connection: with the PROXY protocol
        # it still sees who is who, without it every client is one.
        return [defaults] + [dataclasses.replace(defaults, balancer=b) for b in
                             ("haproxy", "haproxy, no PROXY",
                              "haproxy, no door", "haproxy, no PROXY, no door")]
    rows = [defaults,
            unclog("64k", cache=True)]  # scheduler fifo, partition 64k, the seed's send buffer
    return rows + attack_peers(session.warnings, s["attack_peers"])


def victim_row(res, kind):
    """The victim's figures from its probe's JSON line."""
    if kind == "bulk":
        return dict(victim_scheduled="", victim_ok=res["requests"],
                    victim_failed=res["errors"], victim_refused=res["refused"],
                    victim_mb_s=res["mb_s"])
    mb_s = dict(victim_mb_s=res["mb_s"]) if kind == "paced" else {}
    return dict(**mb_s, victim_scheduled=res["scheduled"], victim_ok=res["ok"],
                victim_failed=res["errors"] + res["timeouts"], victim_refused=res["refused"],
                victim_p50_ms=res["p50_ms"], victim_p99_ms=res["p99_ms"],
                victim_max_ms=res["max_ms"], victim_lag_max_ms=res["send_lag_max_ms"])


def attacker_row(res):
    return dict(attacker_req_s=res["req_s"], attacker_mb_s=res["mb_s"],
                attacker_requests=res["requests"], attacker_errors=res["errors"],
                attacker_refused=res["refused"], attacker_server_closed=res["server_closed"],
                attacker_conns_opened=res["conns_opened"])


def phase(session, server, attack, attacked, tag):
    """The victim for the mode's seconds, alone or after the attacker's lead; its row."""
    seconds = session.settings["attack_victim"]
    args, _ = VICTIMS[attack.victim]
    csv = os.path.join(session.tmp, f"{tag}-victim.csv") if attack.victim != "bulk" else None
    att = None
    if attacked:
        att = start_attacker(session, server, attack, attack.lead + WARMUP + seconds + 0.5)
        time.sleep(attack.lead)
    row = {"series": os.path.relpath(csv, session.out) if csv else ""}
    row.update(victim_row(start_probe_args(session, server.port, args, seconds, VICTIM,
                                           csv).json(), attack.victim))
    if att:
        row.update(attacker_row(att.json()))
    return row


def brief(row):
    v = (f"victim {row['victim_mb_s']} MB/s" if row.get("victim_mb_s") not in (None, "")
         else f"victim p99 {row['victim_p99_ms']} ms")
    v += f", failed {row['victim_failed']} (503: {row['victim_refused']})"
    if row.get("attacker_req_s") is not None:
        v += (f"; attacker {row['attacker_req_s']} req/s, {row['attacker_mb_s']} MB/s,"
              f" 503: {row['attacker_refused']}, closed by server: "
              f"{row['attacker_server_closed']}")
    log(f"    {row['attack']:5} {row['phase']:8} {v}")


def run_attacks(session):
    """Every configuration, round after round: the attacks, each on a fresh server."""
    make_small_fixtures()
    rows = []

    def body(server, r, attack):
        for attacked in (False, True):
            ph = "attacked" if attacked else "alone"
            stall0, t0 = cpu_stall_us(), time.time()
            row = {"label": server.label, "kind": server.config.server, "round": r,
                   "attack": attack.name, "phase": ph,
                   "attackers": session.settings.get("attackers", 1), "config": server.config,
                   **phase(session, server, attack, attacked, f"{server.tag}-{ph}")}
            if stall0 is not None:
                pct = (cpu_stall_us() - stall0) / ((time.time() - t0) * 1e6) * 100
                row["cpu_pressure_pct"] = f"{pct:.1f}"
                # A bulk victim's own download keeps both CPUs busy: its
                # pressure is the test's, not other work's.
                if not attacked and pct > 20 and attack.victim not in ("bulk", "paced"):
                    session.warnings.add(
                        f"{server.label} {attack.name} round {r}: CPU pressure {pct:.0f}% "
                        "with the victim alone: other work on this machine; expect noise")
            if row.get("attacker_errors") and not attack.holds:  # hogs expect 503s
                session.warnings.add(f"{server.label} {attack.name} round {r}: the attacker "
                                     f"had {row['attacker_errors']} failed requests")
            rows.append(row)
            brief(row)
        if server.config.server == "unclog":
            server.save_stats(os.path.join(session.tmp, f"{server.tag}-stats.json"))

    chosen = session.settings.get("attacks") or [a.name for a in ATTACKS]  # run.py checks them
    for attack in [a for a in ATTACKS if a.name in chosen]:
        prewarm(["/1k.bin", "/96k.bin", "/16m.bin", *FLOOD] +
                (small_paths() if attack.name == "files" else []))
        # of these rows only unclog has POST /gzip; the table says so for the others
        servers = [c for c in configs(session) if (not attack.gzip or c.server == "unclog")
                   and (attack.holds or "no door" not in c.balancer)]
        log(f"  attack: {attack.title}")
        alternate(session, f"attack {attack.name}", f"attack-{attack.name}", servers,
                  session.settings["attack_rounds"],
                  lambda server, r, a=attack: body(server, r, a))
    session.csv(f"{session.mode}-attacks.csv", ATTACK_FIELDS, rows)
    return rows
