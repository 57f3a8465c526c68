#!/usr/bin/env python3
# The admin door (admin_listen): the dashboard, /settings and the figures
# answer on a listener of their own, and a reverse proxy in front of the
# public one never reaches them. A real nginx with a default proxy_pass (no
# Forwarded, X-Forwarded-For, X-Real-IP or Via; Host 127.0.0.1:PORT) is a
# loopback client of the public listener for everyone it serves: through
# it /settings (GET and POST) and the dashboard are 404, /stats, /metrics
# and /stats/history 403, and no setting changes, while the admin door
# serves them all. stats_from opens the figures on the public listener to
# the addresses it lists, and never /settings. Then the door itself: a
# unix socket (curl --unix-socket), its mode, a stale one replaced and a
# live one kept, both workers answering on it with the whole server's
# figures and one /settings, auto's port (listen's + 1) and its fallback,
# off, and a graceful stop that closes it at once. Statuses, bodies and
# counters, never timings.
#
# The nginx part is skipped without nginx, unless UNCLOG_REQUIRE_NGINX=1.
import json
import os
import shutil
import signal
import socket
import stat
import subprocess

from harness import (Conn, Server, is_, like, ok, poll, request, run, skip_test, terminate)

FILES = {"x.txt": b"hello"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
ADMIN_PATHS = ("/stats", "/metrics", "/stats/history", "/.unclog/dashboard", "/settings")
FIGURES = ("/stats", "/metrics", "/stats/history")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx's http proxy with nothing but `proxy_pass http://127.0.0.1:BACKEND`:
    one process, its files in TMP."""

    def __init__(self, nginx, tmp, backend):
        self.port = free_port()
        home = os.path.join(tmp, "nginx")
        os.makedirs(home, exist_ok=True)
        temps = "".join("    %s_temp_path %s/%s;\n" % (t, home, t)
                        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        self.path = os.path.join(home, "nginx.conf")
        with open(self.path, "w") as f:
            f.write("daemon off;\nmaster_process off;\npid %s/nginx.pid;\n"
                    "error_log %s/error.log;\nevents {}\n"
                    "http {\n    access_log off;\n%s"
                    "    server {\n        listen 127.0.0.1:%d;\n"
                    "        location / { proxy_pass http://127.0.0.1:%d; }\n    }\n}\n"
                    % (home, home, temps, self.port, backend))
        self.log = open(os.path.join(home, "stderr.log"), "wb")
        self.proc = subprocess.Popen([nginx, "-p", home, "-e", os.path.join(home, "error.log"),
                                      "-c", self.path], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def up(self):
        try:
            return request(self.port, "GET", "/x.txt").status == 200
        except Exception:
            return False

    def stop(self):
        status = terminate(self.proc)
        self.log.close()
        return status in (0, -signal.SIGTERM)


def through(port, method, path):
    """One request on a new connection to PORT: its status."""
    if method == "POST":
        return request(port, "POST", path, body=b"scheduler=fifo", headers=FORM).status
    return request(port, method, path).status


def test_nginx(nginx):
    with Server(files=FILES, args=["--admin", "on"], name="server behind nginx") as srv:
        proxy = Nginx(nginx, srv.tmp, srv.port)
        try:
            ok(poll(proxy.up, 20), "nginx proxies to the public listener (default proxy_pass)")
            got = {(m, p): through(proxy.port, m, p)
                   for m, p in [("GET", p) for p in ADMIN_PATHS] + [("POST", "/settings")]}
            is_(got, {("GET", "/stats"): 403, ("GET", "/metrics"): 403,
                      ("GET", "/stats/history"): 403, ("GET", "/.unclog/dashboard"): 404,
                      ("GET", "/settings"): 404, ("POST", "/settings"): 404},
                "through nginx: the figures 403, the dashboard and /settings 404")
            body = request(proxy.port, "GET", "/stats").body
            ok(b"pid" not in body and b"127.0.0.1" not in body and b"{" not in body,
               "  the 403 shows no figure", body[:300])
            is_(through(proxy.port, "GET", "/x.txt"), 200, "  and files are served through it")
            st = srv.stats()  # on the admin door
            is_(st["scheduler"]["mode"], "fair", "the POST through nginx changed nothing")
            is_(st["responses"]["/settings"]["2xx"], 0, "  /settings answered nobody")

            # The same paths on the admin door.
            got = {(m, p): srv.request(m, p, **({"body": b"scheduler=fifo", "headers": FORM}
                                                if m == "POST" else {})).status
                   for m, p in [("GET", p) for p in ADMIN_PATHS] + [("POST", "/settings")]}
            is_(got, {k: 200 for k in got}, "on the admin door: every one of them 200")
            is_(srv.stats()["scheduler"]["mode"], "fifo", "  and its POST switched the scheduler")
            is_(srv.get("/x.txt", door="admin").status, 404, "the admin door serves no file")
        finally:
            ok(proxy.stop(), "nginx stops cleanly")

    conf = {"stats_from": "127.0.0.1", "admin": "on"}
    with Server(files=FILES, conf=conf, name="server behind nginx, stats_from") as srv:
        proxy = Nginx(nginx, srv.tmp, srv.port)
        try:
            ok(poll(proxy.up, 20), "nginx proxies to a server with stats_from = 127.0.0.1")
            is_([through(proxy.port, "GET", p) for p in FIGURES], [200] * 3,
                "stats_from lists nginx's address: the figures answer through it")
            is_([through(proxy.port, m, p) for m, p in (("GET", "/settings"),
                                                        ("POST", "/settings"),
                                                        ("GET", "/.unclog/dashboard"))],
                [404] * 3, "  /settings and the dashboard never do")
            is_(srv.stats()["scheduler"]["mode"], "fair", "  nothing changed")
        finally:
            ok(proxy.stop(), "nginx stops cleanly")


def curl_unix(path, target, data=None):
    """curl --unix-socket PATH: (status, body)."""
    cmd = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", path,
           "http://localhost" + target]
    if data is not None:
        cmd[1:1] = ["-d", data]
    out = subprocess.run(cmd, capture_output=True, timeout=30).stdout.decode()
    body, _, code = out.rpartition("\n")
    return int(code or 0), body


def test_unix():
    if shutil.which("curl") is None:
        skip_test("the admin door on a unix socket", "curl is not installed")
        return
    srv = Server(files=FILES, args=["--admin", "on"], name="server with a unix admin door")
    path = os.path.join(srv.tmp, "admin.sock")
    srv.args += ["--admin-listen", "unix:" + path]
    with srv:
        like(srv.startup_line, r", admin unix:%s$" % path, "the startup line names the socket")
        mode = os.stat(path).st_mode
        ok(stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600,
           "a socket only its owner may use (0600)", oct(mode))
        status, body = curl_unix(path, "/stats")
        ok(status == 200 and "pid" in json.loads(body), "curl --unix-socket /stats: 200, "
           "every figure")
        is_([curl_unix(path, p)[0] for p in ADMIN_PATHS], [200] * len(ADMIN_PATHS),
            "  /metrics, /stats/history, the dashboard and /settings too")
        status, body = curl_unix(path, "/settings", "scheduler=fifo")
        is_((status, json.loads(body)["scheduler"] if status == 200 else body), (200, "fifo"),
            "curl -d scheduler=fifo --unix-socket /settings: applied")
        is_(curl_unix(path, "/x.txt")[0], 404, "no file on the admin door")
        is_(request(srv.port, "GET", "/stats").status, 403,
            "the public listener: /stats 403 (stats_from off), from loopback too")
        # Another server on the same path while this one runs: refused.
        other = Server(args=["--admin-listen", "unix:" + path], name="second server")
        try:
            other.start()
            ok(False, "a second server on a live socket's path refuses to start")
            other.stop()
        except RuntimeError as e:
            like(str(e), r"status 1", "a second server on a live socket's path: exit status 1")
        is_(curl_unix(path, "/settings")[0], 200, "  and the first one's socket still answers")
    ok(not os.path.exists(path), "the socket is gone after a graceful stop")

    # A socket file left by a process that is gone is replaced.
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
    ok(os.path.exists(path), "a stale socket file, nobody accepting on it")
    with Server(files=FILES, args=["--admin-listen", "unix:" + path],
                name="server on a stale socket") as srv:
        is_(curl_unix(path, "/stats")[0], 200, "a server started on it answers there")
    ok(not os.path.exists(path), "  and removes it when it stops")


def test_workers():
    if shutil.which("curl") is None:
        skip_test("both workers on a unix admin door", "curl is not installed")
        return
    srv = Server(files=FILES, args=["--workers", "2", "--threads", "2", "--admin", "on"],
                 name="two workers with a unix admin door")
    path = os.path.join(srv.tmp, "admin.sock")
    srv.args += ["--admin-listen", "unix:" + path]
    with srv:
        n = 20
        is_([request(srv.port, "GET", "/x.txt").status for _ in range(n)], [200] * n,
            "%d GETs on the public listener" % n)

        def both():
            code, body = curl_unix(path, "/stats")
            st = json.loads(body) if code == 200 else {}
            return (st.get("workers") == 2 and
                    all(w["up"] for w in st.get("by_worker", {}).values()) and
                    st["responses"]["static"]["2xx"] >= n and st)
        st = poll(both, 20)
        ok(st, "/stats on the unix door: both workers up, the %d GETs of both counted" % n)
        status, body = curl_unix(path, "/settings", "partition=64k")
        s = json.loads(body) if status in (200, 202) else {}
        is_((status, s.get("partition"), sorted(s.get("applied", []))), (200, "64k", [1, 2]),
            "one POST /settings on the door: applied by both workers")
        seen = set()
        for _ in range(40):
            code, body = curl_unix(path, "/settings")
            if code == 200:
                j = json.loads(body)
                seen.add((j["worker"], j["partition"]))
            if len(seen) == 2:
                break
        ok(all(p == "64k" for _, p in seen) and seen,
           "whichever worker answers, its /settings says 64k", repr(seen))
    ok(not os.path.exists(path), "the master removes the socket when the workers have stopped")


def test_auto_and_off():
    # auto: listen's port + 1, when free.
    for _ in range(20):
        port = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            continue
    with Server(args=["--listen", "127.0.0.1:%d" % port], defaults=True, name="auto") as srv:
        is_((srv.port, srv.admin_port), (port, port + 1), "admin_listen auto: listen's port + 1")
    # ... or a free port when that one is taken: a port held here whose one
    # below is free.
    for _ in range(20):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", busy - 1))
            break
        except OSError:
            taken.close()
    with taken:
        taken.listen(1)
        with Server(args=["--listen", "127.0.0.1:%d" % (busy - 1)], name="auto, taken") as srv:
            ok(srv.admin_port not in (None, busy, srv.port),
               "its + 1 taken: a free port, which the startup line names (%s)" % srv.admin_port)
            is_(srv.get("/stats").status, 200, "  and the figures answer there")
    with Server(args=["--admin-listen", "off", "--admin", "on"], name="admin door off") as srv:
        like(srv.startup_line, r", admin off$", "admin_listen off: the startup line says so")
        is_([request(srv.port, "GET", p).status for p in ADMIN_PATHS], [403, 403, 403, 404, 404],
            "  and the public listener still refuses them all")
    status = subprocess.run([os.environ.get("UNCLOG_BIN", "build/unclog"), "--admin-listen",
                             "unix:relative", "--help"], capture_output=True).returncode
    is_(status, 2, "admin_listen unix:relative: a bad value (exit 2)")


def test_stop_closes_it():
    big = b"b" * (8 << 20)
    with Server(files={"big.bin": big}, args=["--send-buffer", "4k"], name="stopping") as srv:
        c = Conn(srv.port, rcvbuf=4096)
        c.request("GET", "/big.bin")
        is_(c.read_head().status, 200, "a download in progress, its client reading nothing")
        srv.send_signal(signal.SIGTERM)
        ok(poll(lambda: "stopping" in srv.stderr(), 10), "SIGTERM: the server stops gracefully")

        def refused():
            try:
                Conn(srv.admin_port).close()
                return False
            except OSError:
                return True
        ok(poll(refused, 10), "the admin door is closed while the download still runs")
        ok(srv.alive(), "  (the server still waits for it)")
        c.close()
        srv.wait_exit("after SIGTERM")


def main():
    nginx = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx")
    if nginx:
        test_nginx(nginx)
    elif os.environ.get("UNCLOG_REQUIRE_NGINX") == "1":
        ok(False, "nginx is installed (UNCLOG_REQUIRE_NGINX=1)", "apt-get install nginx-light")
    else:
        skip_test("a reverse proxy in front of the public listener", "nginx is not installed")
    test_unix()
    test_workers()
    test_auto_and_off()
    test_stop_closes_it()


run(main, timeout=180)
