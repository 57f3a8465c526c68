#!/usr/bin/env python3
# Live settings: GET and POST /settings with `admin = on`, from loopback
# clients only; values validated as in the config file, all or nothing; a
# change reaches responses in flight at their next piece; emulate_disk
# makes every file read take at least its latency. Counters, not timings.
import json
import re
import socket
import subprocess

from harness import (BIN, KiB, MiB, Conn, Server, is_, like, ok, poll, random_bytes, run,
                     run_with_conf, skip_test)

BIG = random_bytes(16 * MiB, 21)


def settings(srv, form=None, host="127.0.0.1"):
    """GET, or POST FORM to, /settings: (status, JSON or text)."""
    with Conn(srv.port, host=host) as c:
        if form is None:
            r = c.roundtrip("GET", "/settings")
        else:
            r = c.roundtrip("POST", "/settings", body=form.encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    body = r.body.decode()
    return r.status, json.loads(body) if r.status == 200 else body


def admin_off():
    with Server() as srv:
        is_(settings(srv)[0], 403, "admin off: GET /settings is 403")
        is_(settings(srv, "partition=4k")[0], 403, "admin off: POST /settings is 403")
        is_(srv.stats()["partition"], "auto", "and nothing changed")


def local_address():
    """A non-loopback address of this machine, or None."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout
    except OSError:
        return None
    return next((a for a in out.split() if "." in a and not a.startswith("127.")), None)


def changes():
    with Server(files={"big.bin": BIG}, args=["--admin", "on", "--listen", "0.0.0.0:0"]) as srv:
        status, s = settings(srv)
        is_(status, 200, "admin on, loopback: GET /settings")
        is_((s["partition"], s["scheduler"], s["emulate_disk"]), ("auto", "fair", "off"),
            "it shows the running values")
        status, s = settings(srv, "partition=64k&scheduler=fifo")
        is_((status, s["partition"], s["scheduler"]), (200, "64k", "fifo"),
            "POST partition=64k&scheduler=fifo answers the new values")
        st = srv.stats()
        is_((st["partition"], st["scheduler"]["mode"]), (65536, "fifo"), "/stats agrees")
        is_(sorted(st["settings_changed_ms"]), ["partition", "scheduler"],
            "/stats records when each changed")

        status, text = settings(srv, "partition=4k&scheduler=nope")
        is_(status, 400, "a bad value: 400")
        err = run_with_conf("scheduler = nope\n")[2]
        like(err, r"scheduler: 'nope' is not one of fifo\|fair", "the config file says the same")
        is_(text.strip(), "scheduler: 'nope' is not one of fifo|fair", "with the same message")
        is_(settings(srv)[1]["partition"], "64k", "all or nothing: partition=4k was not applied")
        is_(settings(srv, "threads=2"), (400, "threads: not live: it changes with a restart\n"),
            "a restart key: 400, saying so")
        is_(settings(srv, "max_body=1m"),
            (400, "max_body: not live: it changes with a reload (SIGHUP)\n"),
            "a reload key: 400, saying so")
        # The one key table: every key --help calls live is in /settings and
        # takes a live change; no other key is there.
        out = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
        live = sorted(re.findall(r"^\s+--([a-z-]+) .*; live: POST /settings\)$", out, re.M))
        live = [k.replace("-", "_") for k in live]
        status, s = settings(srv)
        is_(sorted(k for k in s if k not in ("admin", "changed_ms")), live,
            "/settings shows exactly the %d keys --help calls live" % len(live))
        form = "&".join("%s=%s" % (k, s[k]) for k in live)
        is_(settings(srv, form)[0], 200, "each takes its own value as a live change")
        is_(settings(srv, "bogus=1")[1].strip(), "unknown key 'bogus'", "an unknown key: 400")
        is_(settings(srv, "emulate_disk=" + "%38ms")[1]["emulate_disk"], "8ms",
            "values are form-decoded")
        settings(srv, "emulate_disk=off")

        other = local_address()
        if other is None:
            skip_test("a non-loopback client gets 403", "no non-loopback address here")
        else:
            is_(settings(srv, host=other)[0], 403, "a client from %s (not loopback): 403" % other)
            is_(settings(srv, "partition=4k", host=other)[0], 403, "its POST too")


def in_flight():
    """A download stalled at 1m pieces reads its rest in 4k pieces once the
    partition changes: the change reaches it at its next piece."""
    args = ["--admin", "on", "--partition", "1m", "--file-cache", "off", "--send-buffer", "4k"]
    with Server(files={"big.bin": BIG}, args=args) as srv:
        with Conn(srv.port, rcvbuf=16 * KiB) as c:
            c.request("GET", "/big.bin")
            head = c.read_head()
            is_(head.status, 200, "a 16 MiB download starts at 1m pieces")
            got = c.read_exact(MiB)
            sent = srv.stats()["bytes_sent"]
            ok(sent >= MiB, "bytes_sent counts a download as it goes: %d mid-response" % sent)
            before = srv.stats()["jobs"]["read"]["completed"]
            is_(settings(srv, "partition=4k")[0], 200, "partition=4k mid-download")
            got += c.read_exact(16 * MiB - len(got))
        is_(got, BIG, "the download is byte-exact")
        reads = srv.stats()["jobs"]["read"]["completed"] - before
        ok(reads >= (16 - 1 - 2) * MiB // (4 * KiB),
           "the rest took 4k pieces: %d reads after the change" % reads)


def disk():
    """emulate_disk=50ms: every read job runs at least 50 ms."""
    with Server(files={"big.bin": BIG}, args=["--admin", "on", "--partition", "4m",
                                               "--file-cache", "off"]) as srv:
        is_(settings(srv, "emulate_disk=50ms")[1]["emulate_disk"], "50ms", "emulate_disk=50ms")
        is_(srv.get("/big.bin").body, BIG, "a download under it is byte-exact")
        reads = srv.stats()["jobs"]["read"]
        ok(reads["completed"] >= 4 and reads["running_us_total"] >= reads["completed"] * 50000,
           "each of its %d reads ran at least 50 ms" % reads["completed"], reads)
        is_(srv.stats()["emulate_disk"], "50ms", "/stats shows it")


def main():
    admin_off()
    changes()
    in_flight()
    disk()


run(main)
