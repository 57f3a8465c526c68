#!/usr/bin/env python3
# Live settings: GET and POST /settings with `admin = on`, from loopback
# clients only, and only from the server's own page (Host, Origin,
# Sec-Fetch-Site and a POST's Content-Type; 403 naming the rule); values
# validated as in the config file, all or nothing; a change reaches
# responses in flight at their next piece; emulate_disk makes every file
# read take at least its latency. Counters, not timings.
import json
import re
import socket
import subprocess

from harness import (BIN, KiB, MiB, Conn, Server, help_keys, is_, like, ok, poll, random_bytes,
                     run, run_with_conf, skip_test)

BIG = random_bytes(16 * MiB, 21)


def settings(srv, form=None, host="127.0.0.1", port=None):
    """GET, or POST FORM to, /settings on the admin door (or PORT): (status,
    JSON or text)."""
    with Conn(port or srv.admin_port, host=host) as c:
        if form is None:
            r = c.roundtrip("GET", "/settings")
        else:
            r = c.roundtrip("POST", "/settings", body=form.encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    body = r.body.decode()
    return r.status, json.loads(body) if r.status == 200 else body


def admin_off():
    with Server() as srv:
        for what, form in (("GET", None), ("POST", "partition=4k")):
            status, text = settings(srv, form)
            is_(status, 403, "admin off: %s /settings is 403" % what)
            like(text, r"^403 Forbidden: .*admin = on", "admin off: %s says admin = on" % what)
        is_(srv.stats()["settings"]["partition"], "auto", "and nothing changed")


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
        live = sorted(flag[2:].replace("-", "_") for flag, _, desc in help_keys(out)
                      if desc.endswith("; live: POST /settings)"))
        status, s = settings(srv)
        is_(sorted(k for k in s if k not in ("admin", "changed_ms")), live,
            "/settings shows exactly the %d keys --help calls live" % len(live))
        form = "&".join("%s=%s" % (k, s[k]) for k in live)
        is_(settings(srv, form)[0], 200, "each takes its own value as a live change")
        is_(settings(srv, "bogus=1")[1].strip(), "unknown key 'bogus'", "an unknown key: 400")
        is_(settings(srv, "emulate_disk=" + "%38ms")[1]["emulate_disk"], "8ms",
            "values are form-decoded")
        settings(srv, "emulate_disk=off")

        # The public listener has no /settings, from this machine or not.
        is_(settings(srv, port=srv.port)[0], 404, "GET /settings on the public listener: 404")
        is_(settings(srv, "partition=4k", port=srv.port)[0], 404, "its POST too")
        other = local_address()
        if other is None:
            skip_test("a non-loopback client gets 404", "no non-loopback address here")
        else:
            is_(settings(srv, host=other, port=srv.port)[0], 404,
                "a client from %s on the public listener: 404" % other)
            is_(settings(srv, "partition=4k", host=other, port=srv.port)[0], 404,
                "its POST too")


FORM = "application/x-www-form-urlencoded"
ATTACK = "partition=whole&scheduler=fifo&emulate_disk=1s"


def raw(srv, method, headers, body=None, version="HTTP/1.1"):
    """One request with exactly these headers (no Host added), on the admin
    door: (status, body text)."""
    with srv.admin_conn() as c:
        r = c.roundtrip(method, "/settings", headers=headers, body=body, version=version,
                        host=False)
    return r.status, r.body.decode("utf-8", "replace")


def same_origin():
    """Only the server's own page reaches the switch: a page of another
    origin (its Origin, or Sec-Fetch-Site), under another name (DNS
    rebinding: its Host) or posting something other than the dashboard's
    form gets 403 saying which rule, and nothing changes."""
    with Server(args=["--admin", "on"]) as srv:
        here = "127.0.0.1:%d" % srv.admin_port
        refused = [
            ("POST", [("Host", here), ("Origin", "http://evil.example"), ("Content-Type", FORM)],
             "Origin must be http:// and the Host", "a cross-origin form POST"),
            ("POST", [("Host", here), ("Origin", "http://127.0.0.1:1"), ("Content-Type", FORM)],
             "Origin must be", "a POST from another port of the same address"),
            ("POST", [("Host", here), ("Origin", "https://" + here), ("Content-Type", FORM)],
             "Origin must be", "a POST from https:// on the same name and port"),
            ("POST", [("Host", here), ("Origin", "null"), ("Content-Type", FORM)],
             "Origin: null is refused", "Origin: null (a sandboxed page)"),
            ("POST", [("Host", "rebind.evil.example"), ("Origin", "http://rebind.evil.example"),
                      ("Content-Type", FORM)],
             "Host must be localhost, 127.x.y.z or [::1]", "a POST under a foreign Host"),
            ("POST", [("Host", "127.0.0.1.evil.example:%d" % srv.admin_port), ("Content-Type", FORM)],
             "Host must be", "a POST under 127.0.0.1.evil.example"),
            ("GET", [("Host", "rebind.evil.example:%d" % srv.admin_port)],
             "Host must be", "a GET under a foreign Host (a rebound page reading /settings)"),
            ("GET", [("Host", "localhost.")], "Host must be", "a GET under localhost."),
            ("GET", [], "Host must be", "an HTTP/1.0 GET without Host"),
            ("POST", [("Host", here), ("Sec-Fetch-Site", "cross-site"), ("Content-Type", FORM)],
             "Sec-Fetch-Site must be same-origin or none", "a cross-site POST without Origin"),
            ("GET", [("Host", here), ("Sec-Fetch-Site", "same-site")],
             "Sec-Fetch-Site must be", "a same-site GET"),
            ("POST", [("Host", here), ("Content-Type", "text/plain")],
             "a POST must be Content-Type: application/x-www-form-urlencoded",
             "a text/plain POST"),
            ("POST", [("Host", here)], "a POST must be Content-Type",
             "a POST without Content-Type"),
            ("POST", [("Host", here), ("Origin", "http://" + here),
                      ("Content-Type", "multipart/form-data; boundary=x")],
             "a POST must be Content-Type", "a same-origin multipart POST"),
        ]
        for method, headers, rule, what in refused:
            version = "HTTP/1.1" if headers else "HTTP/1.0"
            body = ATTACK.encode() if method == "POST" else None
            status, text = raw(srv, method, headers, body, version)
            is_(status, 403, what + ": 403")
            like(text, r"^403 Forbidden: /settings answers only its own page: %s"
                 % re.escape(rule), "  and the body names the rule")
            ok('"partition"' not in text, "  and shows no setting")
        status, _ = raw(srv, "HEAD", [("Host", "rebind.evil.example")])
        is_(status, 403, "a HEAD under a foreign Host: 403")

        # The issue's three requests, as curl sends them.
        for headers in ([("Host", here), ("Origin", "http://evil.example")],
                        [("Host", "rebind.evil.example"), ("Origin", "http://rebind.evil.example")],
                        [("Host", here), ("Origin", "null")]):
            status, _ = raw(srv, "POST", headers + [("Content-Type", FORM)], ATTACK.encode())
            is_(status, 403, "POST with %s: 403" % ", ".join("%s: %s" % h for h in headers))

        status, s = settings(srv)
        is_((status, s["partition"], s["scheduler"], s["emulate_disk"], s["changed_ms"]),
            (200, "auto", "fair", "off", {}), "a same-origin GET: nothing changed")
        is_(srv.stats()["settings_changed_ms"], {}, "/stats agrees: no setting changed")

        # A refused POST's body is read and dropped: the connection serves on.
        with srv.admin_conn() as c:
            r = c.roundtrip("POST", "/settings", body=ATTACK.encode(),
                            headers={"Origin": "http://evil.example", "Content-Type": FORM})
            is_(r.status, 403, "keep-alive: a refused POST")
            r = c.roundtrip("GET", "/settings")
            is_((r.status, json.loads(r.body)["partition"]), (200, "auto"),
                "then a GET on the same connection: 200, unchanged")

        # The dashboard's own requests, from each name it may be loaded under.
        for name in ("127.0.0.1:%d" % srv.admin_port, "localhost:%d" % srv.admin_port,
                     "[::1]:%d" % srv.admin_port, "LOCALHOST:%d" % srv.admin_port):
            headers = [("Host", name), ("Sec-Fetch-Site", "same-origin")]
            status, text = raw(srv, "GET", headers)
            is_(status, 200, "the dashboard's GET under Host %s: 200" % name)
            status, text = raw(srv, "POST", headers + [("Origin", "http://" + name.lower()),
                                                       ("Content-Type", FORM + ";charset=UTF-8")],
                               b"partition=64k")
            is_((status, json.loads(text)["partition"] if status == 200 else text),
                (200, "64k"), "  its POST from http://%s: 200, applied" % name.lower())
        status, text = raw(srv, "POST", [("Host", "localhost"), ("Content-Type", FORM)],
                           b"partition=4k")
        is_((status, json.loads(text)["partition"] if status == 200 else text), (200, "4k"),
            "curl -d partition=4k localhost/settings (no Origin): 200")


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
            # With sendfile a piece is counted once its job is back, which
            # may be just after its bytes reached us.
            ok(poll(lambda: srv.stats()["bytes_sent"] >= MiB),
               "bytes_sent counts a download as it goes: %d mid-response"
               % srv.stats()["bytes_sent"])
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
    same_origin()
    in_flight()
    disk()


run(main)
