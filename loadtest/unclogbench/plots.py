"""The plots: MODE-sweep.dat from the clogging rows, then the gnuplot scripts in
loadtest/plots/ (each loads common.gp), their parameters given with -e."""

import os
import shutil
import subprocess

from . import PLOTS, MiB
from .report import MB_S_VICTIMS, attack_summary, clog_summary, total
from .servers import unclog

SWEEP_COLUMNS = ["x", "alone_get_p99", "warm_get_p99", "warm_gzip_p99", "cold_get_p99",
                 "cold_gzip_p99", "warm_flood_mb_s", "cold_flood_mb_s"]
SERIES = ("whole", "64k")  # the partitions drawn in MODE-latency-over-time.svg


def size_bytes(p):
    if p == "whole":
        return 64 * MiB  # drawn one step right of 16m, labelled "whole"
    units = {"k": 1024, "m": MiB}
    return int(p[:-1]) * units[p[-1]] if p[-1] in units else int(p)


def gp_string(s):
    return "'" + str(s).replace("'", "''") + "'"


def gnuplot(out, script, target, warnings, **params):
    """Runs loadtest/plots/SCRIPT in out with params as gnuplot variables."""
    assign = "; ".join(f"{k} = {gp_string(v)}" for k, v in params.items())
    r = subprocess.run(["gnuplot", "-e", f"out = {gp_string(target)}; {assign}",
                        os.path.join(PLOTS, script)], cwd=out, text=True, capture_output=True,
                       env=dict(os.environ, GNUPLOT_LIB=PLOTS))
    path = os.path.join(out, target)
    if r.returncode != 0 or not os.path.exists(path):
        warnings.add(f"gnuplot failed for {target}: {r.stderr.strip()[:300]}")
        return []
    return [path]


def write_sweep(path, parts, s):
    """The medians the sweep plots draw, one line per unclog partition."""
    with open(path, "w") as f:
        f.write("# unclog partition sweep, medians over rounds; x = partition bytes"
                " (whole drawn at 64 MiB)\n# " + " ".join(SWEEP_COLUMNS) + " label\n")
        for p in parts:
            g = lambda ph, k: s.get((unclog(p), ph), {}).get(k)
            vals = [size_bytes(p), g("alone", "get_p99_ms"), g("warm", "get_p99_ms"),
                    g("warm", "gzip_p99_ms"), g("cold", "get_p99_ms"), g("cold", "gzip_p99_ms"),
                    g("warm", "flood_mb_s"), g("cold", "flood_mb_s")]
            f.write(" ".join("NaN" if v is None else f"{v:g}" for v in vals) + f" {p}\n")


def write_frontier(path, configs, s):
    """One point per configuration: warm flood MB/s and the worse probe p99."""
    with open(path, "w") as f:
        f.write("# flood_mb_s p99_ms group label (group 0 unclog fifo, 1 fair, 2 peers)\n")
        for c in configs:
            warm = s.get((c, "warm"), {})
            p99 = [v for v in (warm.get("get_p99_ms"), warm.get("gzip_p99_ms")) if v is not None]
            if warm.get("flood_mb_s") is None or not p99:
                continue
            group = 2 if c.server != "unclog" else 1 if c.scheduler == "fair" else 0
            label = c.label.replace("unclog ", "")
            f.write(f"{warm['flood_mb_s']:g} {max(p99):g} {group} \"{label}\"\n")


def plot(mode, rate, out, rows, warnings):
    """Draws the three SVGs of a quick or full run; returns the paths made."""
    if not shutil.which("gnuplot"):
        warnings.add("gnuplot not installed: no plots (apt-get install gnuplot-nox)")
        return []
    configs, s = clog_summary(rows)
    parts = sorted(dict.fromkeys(c.partition for c in configs
                                 if c.server == "unclog" and c.scheduler == "fifo"),
                   key=size_bytes)
    dat = f"{mode}-sweep.dat"
    write_sweep(os.path.join(out, dat), parts, s)
    axis = dict(dat=dat, xtics=", ".join(f'"{p}" {size_bytes(p)}' for p in parts),
                xrange=f"{size_bytes(parts[0]) / 1.3:g}:{size_bytes(parts[-1]) * 1.3:g}"
                if parts else "*:*")
    peers = [(c.label, s.get((c, "warm"), {}).get("get_p99_ms"))
             for c in configs if c.server != "unclog" or c.scheduler == "fair"]
    peers = [(label, v) for label, v in peers if v is not None]
    made = gnuplot(out, "p99-vs-partition.gp", f"{mode}-p99-vs-partition.svg", warnings,
                   peer_values=" ".join(f"{v:g}" for _, v in peers),
                   peer_titles=" ".join(f'"{label}"' for label, _ in peers), **axis)
    made += gnuplot(out, "flood-vs-partition.gp", f"{mode}-flood-vs-partition.svg", warnings,
                    **axis)
    write_frontier(os.path.join(out, f"{mode}-frontier.dat"), configs, s)
    made += gnuplot(out, "frontier.gp", f"{mode}-frontier.svg", warnings,
                    dat=f"{mode}-frontier.dat")
    # Latency over time: round 1, warm flood, GET probe; the probe's series copied out of tmp/.
    series = []
    for p in SERIES:
        row = next((r for r in rows if r["config"] == unclog(p) and r["phase"] == "warm"), None)
        src = row and os.path.join(out, row["series"])
        if src and os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, f"{mode}-series-{p}.csv"))
            series.append(p)
    if series:
        made += gnuplot(out, "latency-over-time.gp", f"{mode}-latency-over-time.svg", warnings,
                        series=" ".join(f"{mode}-series-{p}.csv" for p in series),
                        partitions=" ".join(series), interval=f"{1000 / rate:g}")
    return made


def short_label(c):
    """unclog rows by scheduler and partition ("unclog fair auto"), peers by their label."""
    if c.server != "unclog":
        return c.label
    return f"unclog {c.scheduler} {c.partition}" + (" -cache" if not c.cache else "")


def write_attacks(path, rows, attacks, figures):
    """One block per attack (gnuplot's index): config, victim alone, victim attacked."""
    s = attack_summary(rows, figures)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    with open(path, "w") as f:
        for attack in attacks:
            bulk = attack.victim in MB_S_VICTIMS
            key = "victim_mb_s" if bulk else "victim_p99_ms"
            f.write(f"# {attack.name}: config, victim {key} alone, attacked\n")
            for c in configs:
                alone, under = (s.get((c, attack.name, ph)) for ph in ("alone", "attacked"))
                if not (alone and under):
                    continue
                vals, label = [], short_label(c)
                for m in (alone, under):
                    ok = bulk or total(m["rows"], "victim_ok") > 0
                    # a p99 of 0 (nothing answered) has no place on a log scale
                    vals.append(m[key] if ok and (bulk or m[key]) else None)
                failed = total(under["rows"], "victim_failed")
                label += f" ({failed} failed)" if failed else ""
                f.write(f'"{label}" ' + " ".join("NaN" if v is None else f"{v:g}"
                                                 for v in vals) + "\n")
            f.write("\n\n")


def draw_attacks(out, svg, dat, rows, attacks, write, warnings, **params):
    """SVG by attacks.gp: one panel per attack of ATTACKS that ROWS ran, its data
    written to DAT by WRITE(path, attacks); bulk panels in MB/s."""
    if not shutil.which("gnuplot"):
        warnings.add("gnuplot not installed: no plots (apt-get install gnuplot-nox)")
        return []
    ran = {r["attack"] for r in rows}
    attacks = [a for a in attacks if a.name in ran]  # --attacks may have left some out
    if not attacks:
        return []
    write(os.path.join(out, dat), attacks)
    titles = " ".join(f'"{a.short}"' for a in attacks)
    bulk = [str(i + 1) for i, a in enumerate(attacks) if a.victim in MB_S_VICTIMS]
    return gnuplot(out, "attacks.gp", svg, warnings, dat=dat, titles=titles,
                   bulk=" ".join(bulk), **params)


def plot_attacks(mode, out, rows, attacks, figures, warnings):
    """MODE-attacks.svg: the victim alone and attacked, per server, one panel per attack."""
    return draw_attacks(out, f"{mode}-attacks.svg", f"{mode}-attacks.dat", rows, attacks,
                        lambda path, ran: write_attacks(path, rows, ran, figures), warnings)


CLUSTER_SPREADS = (("one", "one attacker host"), ("spread", "spread over 4 hosts"))


def cluster_value(m, bulk):
    """The victim's MB/s or p99 ms of one phase of cluster.json, None where there is none
    (a p99 with nothing answered, or of 0, has no place on a log scale)."""
    v = m.get("victim_mb_s" if bulk else "victim_p99_ms")
    if v in (None, "") or not (bulk or (float(m.get("victim_ok") or 0) > 0 and float(v))):
        return None
    return float(v)


def write_cluster_attacks(path, rows, attacks):
    """attacks.gp's blocks for make loadtest-cluster: one per attack, a line per spread of
    the attack (one host, four), the victim alone then attacked."""
    by_name = {r["attack"]: r for r in rows}
    with open(path, "w") as f:
        for attack in attacks:
            r, bulk = by_name[attack.name], attack.victim in MB_S_VICTIMS
            key = "victim_mb_s" if bulk else "victim_p99_ms"
            f.write(f"# {attack.name}: attacker hosts, victim {key} alone, attacked\n")
            for phase, label in CLUSTER_SPREADS:
                vals = [cluster_value(r["alone"], bulk), cluster_value(r[phase], bulk)]
                failed = int(r[phase].get("victim_failed") or 0)
                label += f" ({failed} failed)" if failed else ""
                f.write(f'"{label}" ' + " ".join("NaN" if v is None else f"{v:g}"
                                                 for v in vals) + "\n")
            f.write("\n\n")


def plot_cluster_attacks(out, rows, attacks, warnings):
    """cluster-attacks.svg from cluster.json's attacks: one panel per attack, the victim
    alone, under one attacker host and spread over four (attacks.gp)."""
    return draw_attacks(out, "cluster-attacks.svg", "cluster-attacks.dat", rows, attacks,
                        lambda path, ran: write_cluster_attacks(path, rows, ran), warnings,
                        heading="The victim through the balancer: alone, "
                        "and while one attacker host or four attack")
