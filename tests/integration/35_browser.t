#!/usr/bin/env python3
# A real browser. First, headless Chromium loads a page that unclog sends
# gzip-encoded, and a script in it fetches a gzip-encoded text file and a
# byte range; the DOM it dumps shows the decoded text. Then the dashboard
# built into the server, from a root with nothing of static/ (an empty one
# first): its script runs, shows live figures and fetches nothing but /stats,
# /stats/history and /settings; static/dashboard.html served as a file does the same.
# Without `--admin on` it hides its selector and shows the server's own
# reason (GET /settings's 403 body); so does the page of a server on
# 0.0.0.0 opened at 0.0.0.0 (the Host rule), while the URL the server
# prints, under 127.0.0.1, switches;
# with it, under a flood (threads downloading a 32 MiB file in a loop, a few
# small GETs a second), Chromium, driven over the DevTools protocol (a small
# stdlib WebSocket client below), clicks "partition 64k": the server's
# /settings says 64k, and the page shows it, fresh latency figures and a
# marker on its chart, and its client table has the flood's 127.0.0.1 first
# and the small GETs' 127.0.0.2 in it. The presenter shortcut ?set=KEY=VALUE
# switches through the same code, a bad value shows the server's 400
# message, the defaults button posts scheduler=fair&partition=auto in one
# POST and the disk buttons emulate_disk, each shown on the page, and when
# the server goes away the page says "down" and comes
# back when a server answers on the port again. A screenshot goes to
# build/dashboard-test.png. And pages of other origins (a second server's,
# the server's own under its other name, and under a name Chromium resolves
# to 127.0.0.1, as DNS rebinding would) try the switch with fetch() and
# forms: every try reaches the server, gets 403 and changes nothing, while
# the dashboard switches from its own origin under 127.0.0.1 and localhost.
#
# Skipped when chromium is not installed, unless UNCLOG_REQUIRE_BROWSER=1
# (CI): then that fails. States and values only, no timing thresholds.
# (docs/dashboard.png comes from make demo instead: make dashboard-png.)
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from harness import (IO_TIMEOUT, REPO, SLOW, KiB, MiB, Conn, Server, diag, is_, like, note, ok,
                     poll, random_bytes, run, skip_test, terminate, text_bytes)

DATA = text_bytes(200 * KiB)
PAGE = ("""<!doctype html>
<html><head><meta charset="utf-8"><title>unclog browser test</title></head>
<body>
<p id="marker">MARKER-\u00e9t\u00e9-42</p>
<p id="fetched">pending</p>
<p id="range">pending</p>
<script>
fetch("/data.txt").then(r => r.text()).then(t => {
  document.getElementById("fetched").textContent = "fetched " + t.length + " " + t.slice(0, 9);
}).catch(e => { document.getElementById("fetched").textContent = "error " + e; });
fetch("/data.txt", {headers: {"Range": "bytes=4-8"}})
  .then(r => r.text().then(t => {
    document.getElementById("range").textContent = "range " + r.status + " " + t;
  })).catch(e => { document.getElementById("range").textContent = "error " + e; });
</script>
""" + "<p>filler paragraph to make the page worth compressing</p>\n" * 100
        + "</body></html>\n").encode("utf-8")
CHROME_AE = "gzip, deflate, br, zstd"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--hide-scrollbars", "--window-size=1280,800"]

# A page of another origin that tries the switch at ?target=ORIGIN: POSTs of
# the form by fetch (no-cors, as a form and as text/plain; cors, which sends
# a simple request with no preflight), a cors GET that would read the
# settings, and a form POSTed into an iframe. window.results says what the
# page saw; data-done="1" once all were tried.
ATTACK = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>another origin</title></head><body>
<script>
const url = new URLSearchParams(location.search).get("target") + "/settings";
const form = "partition=whole&scheduler=fifo&emulate_disk=1s";
window.results = {};
async function attempt(name, f) {
  try { results[name] = await f(); } catch (e) { results[name] = "error " + e.name; }
}
const read = async (r) => r.status + " " + (await r.text());
(async () => {
  await attempt("no-cors form", async () =>
    (await fetch(url, {method: "POST", mode: "no-cors", body: new URLSearchParams(form)})).type);
  await attempt("no-cors text", async () =>
    (await fetch(url, {method: "POST", mode: "no-cors", body: form})).type);
  await attempt("cors post", async () => read(await fetch(url, {method: "POST", body: form,
    headers: {"Content-Type": "application/x-www-form-urlencoded"}})));
  await attempt("cors get", async () => read(await fetch(url, {cache: "no-store"})));
  await new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.name = "sink";
    document.body.append(frame);
    frame.onload = resolve;
    const f = document.createElement("form");
    f.method = "post"; f.action = url; f.target = "sink";
    for (const [k, v] of new URLSearchParams(form)) {
      const i = document.createElement("input");
      i.type = "hidden"; i.name = k; i.value = v; f.append(i);
    }
    document.body.append(f);
    f.submit();
  });
  results["iframe form"] = "submitted";
  document.body.dataset.done = "1";
})();
</script></body></html>
"""
# The classic: a form that posts itself to ?target=ORIGIN as the page loads
# (the whole tab goes to /settings).
AUTO_FORM = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>auto-submit</title></head><body>
<form id="f" method="post">
<input type="hidden" name="partition" value="whole">
<input type="hidden" name="scheduler" value="fifo">
<input type="hidden" name="emulate_disk" value="1s">
</form>
<script>
const f = document.getElementById("f");
f.action = new URLSearchParams(location.search).get("target") + "/settings";
f.submit();
</script></body></html>
"""
ATTACKS = 6  # requests to /settings per origin: ATTACK's five, AUTO_FORM's one
REBIND = "rebind.test"  # Chromium resolves it to 127.0.0.1 (--host-resolver-rules)

BIG = random_bytes(32 * MiB, 35)
SMALL = text_bytes(2 * KiB)
SHOT = os.path.join(REPO, "build", "dashboard-test.png")


DASHBOARD = "/.unclog/dashboard"  # built in (handlers/observe/dashboard.h)
NOTE = "No switching from this page. "  # then the server's reason (static/dashboard.html)


def access_targets(srv):
    """The targets of the access log's lines, once srv has stopped: a set."""
    log = open(srv.access_log).read() if os.path.exists(srv.access_log) else ""
    return set(re.findall(r'"[A-Z]+ ([^ ?"]*)[^"]* HTTP/1\.1"', log))


def dump_dom(chromium, url, budget_ms=10000):
    """Chromium's DOM of url after budget_ms of virtual time: (status, DOM, stderr)."""
    profile = tempfile.mkdtemp(prefix="unclog-chromium-")
    try:
        proc = subprocess.run(
            [chromium] + CHROME_FLAGS + ["--virtual-time-budget=%d" % budget_ms,
                                         "--user-data-dir=" + profile, "--dump-dom", url],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=90 * SLOW)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


def element(dom, ident):
    """(attributes, text) of the element with id ident in a DOM dump, or (None, None)."""
    m = re.search(r'<(\w+)([^>]*\bid="%s"[^>]*)>([^<]*)<' % re.escape(ident), dom)
    return (m.group(2), m.group(3)) if m else (None, None)


def text_of(dom, ident):
    return element(dom, ident)[1]


def attr(dom, ident, name):
    attrs = element(dom, ident)[0]
    if attrs is None:
        return None
    m = re.search(r'\b%s(?:="([^"]*)")?' % re.escape(name), attrs)
    return None if m is None else (m.group(1) or "")


def body_attr(dom, name):
    m = re.search(r'<body[^>]*\b%s="([^"]*)"' % re.escape(name), dom)
    return m and m.group(1)


def settings(srv):
    """GET /settings from the test: (status, JSON or text)."""
    r = srv.get("/settings")
    body = r.body.decode("utf-8", "replace")
    return r.status, json.loads(body) if r.status == 200 else body


# ----------------------------------------------------- a tiny CDP client -----


class Cdp:
    """Chromium's DevTools protocol over one WebSocket (RFC 6455), stdlib
    only: JSON commands out (masked text frames), answers in; events are
    read and dropped."""

    def __init__(self, ws_url, timeout):
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (u.path, u.hostname, u.port, key)).encode())
        self.buf = bytearray()
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError("WebSocket upgrade refused: %r" % head[:200])
        self.buf = bytearray(rest)
        self.last_id = 0

    def _fill(self):
        data = self.sock.recv(256 * KiB)
        if not data:
            raise RuntimeError("DevTools closed the WebSocket")
        self.buf += data

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _send(self, payload, opcode=1):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + body)

    def _message(self):
        parts = []
        while True:
            b0, b1 = self._take(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._take(8))[0]
            mask = self._take(4) if b1 & 0x80 else None
            data = self._take(n)
            if mask:
                data = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 8:
                raise RuntimeError("DevTools closed the WebSocket")
            if op == 9:
                self._send(data, 10)
                continue
            if op in (0, 1, 2):
                parts.append(data)
                if b0 & 0x80:
                    return json.loads(b"".join(parts))

    def call(self, method, **params):
        self.last_id += 1
        self._send(json.dumps({"id": self.last_id, "method": method, "params": params}).encode())
        while True:
            msg = self._message()
            if msg.get("id") == self.last_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def eval(self, expr):
        """The value of a JavaScript expression in the page."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"].get("text")))
        return r.get("result", {}).get("value")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Browser:
    """Headless Chromium with a DevTools port, and a Cdp on its page."""

    def __init__(self, chromium, flags=()):
        self.profile = tempfile.mkdtemp(prefix="unclog-chromium-")
        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            [chromium] + CHROME_FLAGS + list(flags) + ["--user-data-dir=" + self.profile,
                                                       "--remote-debugging-port=0",
                                                       "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        self.cdp = None
        try:
            port_file = os.path.join(self.profile, "DevToolsActivePort")
            port = poll(lambda: os.path.exists(port_file) and open(port_file).read().split("\n")[0],
                        timeout=30)
            if not port:
                raise RuntimeError("Chromium wrote no DevToolsActivePort")

            def page_ws():
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port,
                                                timeout=IO_TIMEOUT) as r:
                        targets = json.load(r)
                except OSError:
                    return None
                return next((t["webSocketDebuggerUrl"] for t in targets
                             if t.get("type") == "page"), None)

            ws = poll(page_ws, timeout=30, interval=0.2)
            if not ws:
                raise RuntimeError("Chromium lists no page target")
            self.cdp = Cdp(ws, IO_TIMEOUT)
            self.cdp.call("Emulation.setDeviceMetricsOverride", width=1280, height=800,
                          deviceScaleFactor=1, mobile=False)
            # Every page keeps its uncaught errors in window.jsErrors.
            self.cdp.call("Page.enable")
            self.cdp.call("Page.addScriptToEvaluateOnNewDocument", source=(
                "window.jsErrors = [];"
                "addEventListener('error', (e) => jsErrors.push(String(e.message)));"
                "addEventListener('unhandledrejection', (e) => jsErrors.push(String(e.reason)));"))
        except BaseException:
            self.close()
            raise

    def stderr(self):
        with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def no_errors(self, when):
        is_(self.cdp.eval("window.jsErrors"), [], "no JavaScript error on the page " + when)

    def goto(self, url):
        """Navigate and wait until the new document has loaded."""
        self.cdp.call("Page.navigate", url=url)
        path = urllib.parse.urlparse(url).path
        return self.wait("location.pathname === %s && document.readyState === 'complete'"
                         % json.dumps(path), "Chromium loaded " + url)

    def wait(self, expr, desc, timeout=20):
        """ok() once expr is true in the page (a hang guard, not a timing check)."""
        js = "(() => { try { return !!(%s); } catch (e) { return false; } })()" % expr

        def check():
            try:
                return self.cdp.eval(js)
            except RuntimeError as e:
                # Asked while the tab was between two documents: ask again.
                if "navigated or closed" in str(e) or "Cannot find context" in str(e):
                    return False
                raise
        got = poll(check, timeout=timeout, interval=0.1)
        return ok(got, desc, "still false after %ss: %s" % (timeout * SLOW, expr),
                  "page: " + str(self.cdp.eval("document.body.innerText"))[:1500])

    def text(self, ident):
        return self.cdp.eval("(document.getElementById(%s) || {}).textContent" % json.dumps(ident))

    def click(self, ident):
        """A real mouse click (press, release) at the middle of the element."""
        x, y = self.cdp.eval("(() => { const r = document.getElementById(%s)"
                             ".getBoundingClientRect(); return [r.x + r.width / 2,"
                             " r.y + r.height / 2]; })()" % json.dumps(ident))
        for kind in ("mousePressed", "mouseReleased"):
            self.cdp.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                          clickCount=1)

    def screenshot(self, path):
        data = base64.b64decode(self.cdp.call("Page.captureScreenshot", format="png")["data"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return data

    def close(self):
        if self.cdp:
            self.cdp.close()
        if self.proc.poll() is None:
            terminate(self.proc)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


# ------------------------------------------------------------- the flood -----


VICTIM = "127.0.0.2"  # the small GETs' address: another client than the flood's


class Flood:
    """conns threads downloading /big.bin over keep-alive in a loop, and one
    GET of /small.txt every 0.2 s from VICTIM: counts what arrived."""

    def __init__(self, port, conns=3):
        self.port = port
        self.stop_event = threading.Event()
        self.big_bytes = 0
        self.small_ok = 0
        self.errors = []
        self.threads = [threading.Thread(target=self._big, daemon=True) for _ in range(conns)]
        self.threads.append(threading.Thread(target=self._small, daemon=True))
        for t in self.threads:
            t.start()

    def _big(self):
        buf = bytearray(256 * KiB)
        while not self.stop_event.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), IO_TIMEOUT) as s:
                    while not self.stop_event.is_set():
                        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        head = bytearray()
                        while b"\r\n\r\n" not in head:
                            data = s.recv(64 * KiB)
                            if not data:
                                raise OSError("closed before the head")
                            head += data
                        head, _, rest = bytes(head).partition(b"\r\n\r\n")
                        m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                        if not head.startswith(b"HTTP/1.1 200") or not m:
                            raise OSError("unexpected answer %r" % head[:100])
                        left = int(m.group(1)) - len(rest)
                        while left > 0:
                            n = s.recv_into(buf, min(left, len(buf)))
                            if n == 0:
                                raise OSError("closed %d bytes before the end" % left)
                            left -= n
                        self.big_bytes += len(BIG)
            except OSError as e:
                if not self.stop_event.is_set():
                    self.errors.append(str(e))
                    self.stop_event.wait(0.2)

    def _small(self):
        while not self.stop_event.wait(0.2):
            try:
                with Conn(self.port, source=VICTIM) as c:
                    if c.roundtrip("GET", "/small.txt").status == 200:
                        self.small_ok += 1
            except OSError as e:
                self.errors.append(str(e))

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(IO_TIMEOUT)


# ------------------------------------------------------------- the tests -----


def gzip_page(chromium):
    """The page and the text file go gzip-encoded; Chromium decodes them."""
    with Server(files={"page.html": PAGE, "data.txt": DATA}) as srv:
        url = "http://127.0.0.1:%d/page.html" % srv.port
        # What Chromium will get: the page and the text file gzip-encoded.
        for target in ("/page.html", "/data.txt"):
            resp = srv.get(target, headers={"Accept-Encoding": CHROME_AE})
            is_(resp.header("Content-Encoding"), "gzip",
                "%s with Chromium's Accept-Encoding: gzip-encoded" % target)

        status, dom, err = dump_dom(chromium, url)
        ok(status == 0, "chromium --dump-dom: exit status 0",
           "status %d; stderr tail:\n%s" % (status, err[-2000:]))
        ok("MARKER-\u00e9t\u00e9-42" in dom, "the DOM has the page's text (UTF-8 decoded)",
           dom[:1000])
        ok(dom.count("filler paragraph") == 100, "the DOM has the whole page")
        m = re.search(r'id="fetched">([^<]*)<', dom)
        is_(m and m.group(1), "fetched %d the quick" % len(DATA),
            "fetch() of the gzip-encoded text file: every character")
        m = re.search(r'id="range">([^<]*)<', dom)
        is_(m and m.group(1), "range 206 quick", "fetch() with Range: 206 and the bytes")
        # The access log is complete once the server has stopped.
        srv.stop()
        log = ""
        if os.path.exists(srv.access_log):
            with open(srv.access_log) as f:
                log = f.read()
        ok(re.search(r'"GET /page\.html HTTP/1\.1" 200', log) and
           re.search(r'"GET /data\.txt HTTP/1\.1" 206', log),
           "the access log shows Chromium's requests (page 200, range 206)", log[-2000:])


def dashboard_live_figures(srv, dom, what):
    """The page's script ran, polled, and shows what srv's /stats said (no
    load here: the latency figures stay empty, the others are there)."""
    is_(text_of(dom, "status"), "live", what + ": #status live")
    ok(int(body_attr(dom, "data-polls") or 0) >= 2, what + ": the page polled /stats")
    like(text_of(dom, "meta"), r"^up \d+ s · 4 threads · pid %d · v" % srv.pid,
         what + ": #meta shows the server's uptime, threads and pid")
    is_(text_of(dom, "partition"), "auto", what + ": #partition shows the running value")
    is_(text_of(dom, "scheduler"), "fair", what + ": #scheduler too")
    like(text_of(dom, "mbps"), r"^\d[\d,]*(\.\d+)?$", what + ": #mbps is a figure")
    like(text_of(dom, "conns"), r"^\d+ connections?$", what + ": #conns counts connections")


def dashboard_admin_off(chromium):
    """The built-in page from an empty root, without --admin on: live
    figures, no selector, a note how to enable it; ?set= is refused on the
    page and changes nothing; the browser asked for nothing but the page,
    /stats, /stats/history and /settings."""
    with Server(name="server of an empty directory") as srv:
        status, dom, err = dump_dom(
            chromium, "http://127.0.0.1:%d%s?set=partition=64k" % (srv.admin_port, DASHBOARD),
            5000)
        ok(status == 0, "dashboard, admin off: chromium --dump-dom exit status 0",
           "status %d; stderr tail:\n%s" % (status, err[-2000:]))
        dashboard_live_figures(srv, dom, "built in, empty root, admin off")
        is_(body_attr(dom, "data-admin"), "off", "admin off: the page knows (GET /settings: 403)")
        is_((attr(dom, "sel-partition", "hidden"), attr(dom, "sel-scheduler", "hidden")),
            ("", ""), "admin off: the selector is hidden")
        is_(attr(dom, "admin-note", "hidden"), None, "admin off: the note is shown")
        why = srv.get("/settings").body.decode().strip()
        like(why, r"^403 Forbidden: .*--admin on", "GET /settings from the test: 403, why")
        is_(text_of(dom, "admin-note"), NOTE + why, "the note is the server's reason, as said")
        is_(attr(dom, "set-result", "data-state"), "error", "?set= without admin: an error")
        is_(text_of(dom, "set-result"), "✗ partition=64k: " + why, "and says the same reason")
        is_(srv.stats()["settings"]["partition"], "auto", "and the server's partition is unchanged")
        srv.stop()
        is_(access_targets(srv), {DASHBOARD, "/stats", "/stats/history", "/settings"},
            "the browser asked for the page, /stats, its history and /settings, nothing else")


def refusal(port, host):
    """The text of GET /settings's 403 under this Host, as a page there gets it."""
    with Conn(port) as c:
        r = c.roundtrip("GET", "/settings", headers={"Host": host})
    is_(r.status, 403, "GET /settings under Host %s: 403" % host)
    return r.body.decode().strip()


def dashboard_wildcard(chromium):
    """A server whose admin door is on 0.0.0.0, with --admin on: its page
    opened at 0.0.0.0 shows the server's reason for refusing the switch (the
    Host rule), not a guess; its startup line names 127.0.0.1, where the
    page may switch."""
    with Server(args=["--listen", "0.0.0.0:0", "--admin-listen", "0.0.0.0:0", "--admin", "on"],
                name="server on 0.0.0.0") as srv:
        url = re.search(r"dashboard (http://\S+)", srv.startup_line).group(1)
        is_(url, "http://127.0.0.1:%d%s" % (srv.admin_port, DASHBOARD),
            "the startup line's dashboard URL names 127.0.0.1")
        wild = "0.0.0.0:%d" % srv.admin_port
        why = refusal(srv.admin_port, wild)
        like(why, r"^403 Forbidden: /settings answers only its own page: Host must be ",
             "  naming the Host rule")
        status, dom, err = dump_dom(chromium, "http://%s%s" % (wild, DASHBOARD), 5000)
        ok(status == 0, "the page at http://%s: chromium --dump-dom exit status 0" % wild,
           "status %d; stderr tail:\n%s" % (status, err[-2000:]))
        is_((text_of(dom, "status"), body_attr(dom, "data-admin")), ("live", "off"),
            "  live, and no switch")
        is_(text_of(dom, "admin-note"), NOTE + why, "  its note is the server's reason, as said")
        ok("--admin on" not in text_of(dom, "admin-note"), "  not a guess that admin is off")
        status, dom, err = dump_dom(chromium, url, 5000)
        is_((status, body_attr(dom, "data-admin"), attr(dom, "sel-partition", "hidden"),
             attr(dom, "admin-note", "hidden")), (0, "on", None, ""),
            "the page at the printed URL: the switch is shown, no note")


def dashboard_file(chromium):
    """static/dashboard.html served as a file, alone in its root, works too
    where stats_from lets its viewer read the figures on the public
    listener (it has no /settings there: no switch)."""
    with open(os.path.join(REPO, "static", "dashboard.html"), "rb") as f:
        page = f.read()
    with Server(files={"dashboard.html": page}, args=["--stats-from", "127.0.0.1", "--stats-detail", "full"],
                name="server of static/dashboard.html") as srv:
        status, dom, err = dump_dom(chromium, "http://127.0.0.1:%d/dashboard.html" % srv.port,
                                    5000)
        ok(status == 0, "dashboard.html as a file: chromium --dump-dom exit status 0",
           "status %d; stderr tail:\n%s" % (status, err[-2000:]))
        dashboard_live_figures(srv, dom, "/dashboard.html, a file")
        srv.stop()
        is_(access_targets(srv), {"/dashboard.html", "/stats", "/stats/history", "/settings"},
            "the browser asked for the file, /stats, its history and /settings, nothing else")


def dashboard_live(chromium):
    files = {"big.bin": BIG, "small.txt": SMALL}
    # The seed's clogged pool, as the demo starts it: every read meets the pool.
    args = ["--admin", "on", "--threads", "2", "--scheduler", "fifo", "--partition", "whole",
            "--file-cache", "off", "--loop-reads", "off"]
    srv = Server(files=files, args=args, name="admin server").start()
    base = "http://127.0.0.1:%d/" % srv.admin_port
    flood = Flood(srv.port)
    browser = None
    try:
        browser = Browser(chromium)
        page = browser.cdp
        browser.goto(base + DASHBOARD[1:])
        browser.wait('document.body.dataset.admin === "on" && +document.body.dataset.polls >= 3',
                     "admin on: the page polled /stats and GET /settings let it switch")
        is_((browser.text("status"), browser.text("partition"), browser.text("scheduler"),
             browser.text("emulate-disk")), ("live", "whole", "fifo", "off"),
            "#status, #partition, #scheduler, #emulate-disk: live, whole, fifo, off")
        is_(page.eval('document.getElementById("sel-partition").hidden'), False,
            "the selector is shown")
        is_(page.eval('document.getElementById("set-partition-whole").ariaPressed'), "true",
            "the selector marks the running partition")
        poll(lambda: flood.big_bytes >= 2 * len(BIG) and flood.small_ok >= 2, timeout=20)
        ok(flood.big_bytes >= 2 * len(BIG) and flood.small_ok >= 2,
           "the flood runs (%d MiB down, %d small GETs)" % (flood.big_bytes // MiB, flood.small_ok),
           "errors: %r" % flood.errors[:5])
        time.sleep(2)  # a chart with a little before the switch

        # The presenter keys: the ? button shows them, and a click closes them.
        browser.click("btn-keys")
        is_(page.eval('document.getElementById("keys").hidden'), False,
            "the ? button shows the presenter keys")
        like(browser.text("keys"), r"(?s)1 – 5.*partition.*S.*scheduler.*T.*\?set=",
             "they list 1-5, S, T and ?set=")
        browser.click("keys")
        is_(page.eval('document.getElementById("keys").hidden'), True, "a click closes them")
        is_(page.eval('document.getElementById("hero").dataset.settling'), "0",
            "no change yet: the latency is not settling")
        # Every value #hero's data-settling takes from here on, with the
        # server's uptime of the /stats it came from.
        page.eval('window.settling = []; new MutationObserver(() => window.settling.push(['
                  'document.getElementById("hero").dataset.settling, '
                  '+document.body.dataset.uptime])).observe('
                  'document.getElementById("hero"), {attributeFilter: ["data-settling"]}); 1')

        # The switch, as a presenter does it: a click on "64k".
        polls_before = int(page.eval("document.body.dataset.polls"))
        browser.click("set-partition-64k")
        poll(lambda: settings(srv)[1].get("partition") == "64k", timeout=10)
        status, now = settings(srv)
        is_((status, now["partition"] if status == 200 else now), (200, "64k"),
            "after the click, GET /settings from the test says partition 64k")
        changed = now.get("changed_ms", {}).get("partition") if status == 200 else None
        ok(isinstance(changed, int), "/settings says when partition changed", repr(now))
        is_(srv.stats()["partition"], 65536, "/stats agrees: 65536")
        browser.wait('document.getElementById("set-result").dataset.state === "ok"',
                     "the page shows the POST succeeded")
        browser.wait('+document.body.dataset.polls >= %d && +document.body.dataset.uptime > %d'
                     % (polls_before + 3, changed or 0),
                     "the page polled /stats three more times after the switch")
        # Settling exactly while the figures are younger than 2 s after the
        # change, by the server's clock: however late a poll came, it follows
        # that rule (a slow machine may see no poll inside the 2 s at all).
        browser.wait('window.settling.some((r) => r[1] >= %d)' % ((changed or 0) + 2000),
                     "the page polled past the settling time", timeout=30)
        marks = json.loads(page.eval("JSON.stringify(window.settling)") or "[]")
        wrong = [(v, t) for v, t in marks if v != ("1" if 0 <= t - (changed or 0) < 2000 else "0")]
        ok(marks and not wrong, "the latency is marked settling exactly in the 2 s after the "
           "switch (%d polls, %d inside)" % (len(marks), sum(v == "1" for v, _ in marks)),
           repr(wrong[:5]))
        dom = page.eval("document.documentElement.outerHTML")
        is_(text_of(dom, "partition"), "64k", "#partition shows 64k")
        is_(text_of(dom, "status"), "live", "#status is live")
        like(text_of(dom, "p99"), r"^\d[\d,]*(\.\d+)?$",
             "#p99 is a fresh figure from a /stats taken after the switch")
        like(text_of(dom, "p50"), r"^\d[\d,]*(\.\d+)?$", "#p50 too")
        like(text_of(dom, "mbps"), r"^\d[\d,]*(\.\d+)?$", "#mbps: the flood's MB/s")
        like(text_of(dom, "q-read"), r"^\d[\d,]*(\.\d+)? ms$", "#q-read: read queue wait p99")
        clients = page.eval('JSON.stringify([...document.querySelectorAll("#clients tr")].map('
                            '(tr) => [tr.dataset.client || "", ...[...tr.cells].map('
                            '(td) => td.textContent)]))')
        rows = json.loads(clients or "[]")
        addrs = [r[0] for r in rows]
        ok(len(rows) >= 2 and addrs[0] == "127.0.0.1" and VICTIM in addrs,
           "#clients: a row per client, the flood's 127.0.0.1 first and the victim's %s there"
           % VICTIM, repr(rows))
        ok(rows and len(rows[0]) >= 6 and re.match(r"^\d+(\.\d)? %$", rows[0][3]) and re.match(r"^\d[\d,]*(\.\d+)?$", rows[0][5]),
           "#clients: the first row shows its pool share and MB/s", repr(rows[:1]))
        like(text_of(dom, "set-result"), r"partition=64k", "#set-result names the change")
        is_(attr(dom, "set-partition-64k", "aria-pressed"), "true", "the selector marks 64k")
        like(attr(dom, "chart", "data-markers"), r"partition=64k",
             "the chart has a marker labelled partition=64k")
        data = browser.screenshot(SHOT)
        ok(data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1280, 800),
           "a 1280x800 screenshot of the dashboard under the flood: " + os.path.relpath(SHOT, REPO))

        browser.no_errors("(flood, switch)")

        # The presenter shortcut goes through the same code path.
        browser.goto(base + DASHBOARD[1:] + "?set=scheduler=fair")
        browser.wait('document.getElementById("set-result").dataset.state === "ok" && '
                     'document.getElementById("scheduler").textContent === "fair"',
                     "?set=scheduler=fair: the page switched and shows fair")
        st = settings(srv)
        is_((st[0], st[1]["scheduler"], st[1]["partition"]), (200, "fair", "64k"),
            "GET /settings: scheduler fair, partition still 64k")
        is_(page.eval("location.search"), "", "the page dropped ?set= from its address")

        browser.goto(base + DASHBOARD[1:] + "?set=partition=bogus")
        browser.wait('document.getElementById("set-result").dataset.state === "error"',
                     "?set=partition=bogus: the page shows an error")
        like(browser.text("set-result"), r"400.*bogus", "with the server's 400 message")
        is_(settings(srv)[1]["partition"], "64k", "and nothing changed")

        # The talk's last step in one click: the defaults, both keys in one POST.
        r = srv.request("POST", "/settings", body=b"scheduler=fifo",
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
        is_(r.status, 200, "POST scheduler=fifo from the test (partition is 64k)")
        browser.wait('document.getElementById("scheduler").textContent === "fifo" && '
                     'document.getElementById("set-preset-defaults").ariaPressed === "false"',
                     "the page shows fifo, its defaults button not pressed")
        # Every POST the page sends from here on, by its body.
        page.eval('window.posts = []; (() => { const f = window.fetch; window.fetch = (u, o) => {'
                  ' if (o && o.method === "POST") posts.push(String(o.body)); return f(u, o);'
                  ' }; })(); 1')
        browser.click("set-preset-defaults")
        poll(lambda: settings(srv)[1].get("scheduler") == "fair", timeout=10)
        st = settings(srv)
        is_((st[0], st[1]["scheduler"], st[1]["partition"]), (200, "fair", "auto"),
            "a click on the defaults: GET /settings says scheduler fair, partition auto")
        is_(page.eval("window.posts"), ["scheduler=fair&partition=auto"],
            "  the page sent one POST with both keys")
        browser.wait('document.getElementById("set-result").dataset.state === "ok" && '
                     'document.getElementById("scheduler").textContent === "fair" && '
                     'document.getElementById("partition").textContent === "auto" && '
                     'document.getElementById("set-preset-defaults").ariaPressed === "true"',
                     "  the page shows fair and auto, its defaults button pressed")
        marks = page.eval('document.getElementById("chart").dataset.markers').split(" | ")
        ok(any("scheduler=fair" in m and "partition=auto" in m for m in marks),
           "  one marker on the chart names both", repr(marks))

        # The disk emulation, from the page too.
        for value, button in (("8ms,120m", "set-emulate_disk-8ms,120m"),
                              ("off", "set-emulate_disk-off")):
            browser.click(button)
            poll(lambda: settings(srv)[1].get("emulate_disk") == value, timeout=10)
            is_(settings(srv)[1]["emulate_disk"], value,
                "a click on disk %s: GET /settings says emulate_disk %s" % (value, value))
            browser.wait('document.getElementById("emulate-disk").textContent === %s && '
                         'document.getElementById(%s).ariaPressed === "true"'
                         % (json.dumps(value), json.dumps(button)),
                         "  the page shows disk %s, its button pressed" % value)
        is_(page.eval("window.posts")[1:], ["emulate_disk=8ms%2C120m", "emulate_disk=off"],
            "  one POST each")

        # The server goes away, and comes back on the same port.
        flood.stop()
        ok(not flood.errors, "the flood saw no error", repr(flood.errors[:5]))
        port, admin_port = srv.port, srv.admin_port
        srv.stop()
        log = open(srv.access_log).read() if os.path.exists(srv.access_log) else ""
        ok(re.search(r'"POST /settings HTTP/1\.1" 200', log) and
           re.search(r'"POST /settings HTTP/1\.1" 400', log),
           "the access log shows the page's POSTs (200, and 400 for bogus)", log[-1500:])
        browser.wait('document.getElementById("status").textContent === "down"',
                     "server stopped: #status says down")
        polls = int(page.eval("document.body.dataset.polls"))
        srv = Server(name="restarted server",
                     args=["--admin", "on", "--listen", "127.0.0.1:%d" % port,
                           "--admin-listen", "127.0.0.1:%d" % admin_port]).start()
        browser.wait('document.getElementById("status").textContent === "live" && '
                     '+document.body.dataset.polls > %d' % polls,
                     "a server on the port again: the page kept polling and is live")
        browser.wait('document.getElementById("partition").textContent === "auto" && '
                     'document.body.dataset.admin === "on"',
                     "it shows the new server's settings")
        ok("partition=64k" not in (page.eval('document.getElementById("chart").dataset.markers')
                                   or ""), "the old server's markers are gone")
        browser.no_errors("(bad value, server down and back)")
        srv.stop()
        log = open(srv.access_log).read() if os.path.exists(srv.access_log) else ""
        ok(re.search(r'"GET /stats/history\?since=0 HTTP/1\.1" 200', log),
           "the page asked the new server for its whole history", log[-1500:])
    except BaseException:
        if browser:
            diag("chromium stderr tail:\n" + browser.stderr()[-2000:])
        raise
    finally:
        flood.stop()
        if browser:
            browser.close()
        if srv.alive():
            srv.stop()


def settings_refused(srv):
    """How many /settings requests were answered 4xx, and 2xx."""
    r = srv.stats()["responses"]["/settings"]
    return r["4xx"], r["2xx"]


def attack_from(browser, srv, page_origin, target, rule):
    """Chromium on a page of PAGE_ORIGIN tries the switch of the server at
    TARGET: every try reaches the server and is refused by RULE."""
    refused, applied = settings_refused(srv)
    browser.goto("%s/attack.html?target=%s" % (page_origin, target))
    browser.wait('document.body.dataset.done === "1"',
                 "a page of %s tried the switch at %s" % (page_origin, target))
    results = browser.cdp.eval("window.results")
    note("what the page of %s saw: %r" % (page_origin, results))
    if page_origin == target:
        # Same origin to the browser, under a rebound name: the page reads
        # the answer, and it is the refusal.
        for name in ("cors post", "cors get"):
            like(results.get(name), r"^403 403 Forbidden: .*%s" % re.escape(rule),
                 "  %s: the page reads a 403 naming the rule" % name)
    else:
        is_((results.get("cors post"), results.get("cors get")), ("error TypeError",) * 2,
            "  cors POST and GET: the page may not read the answer")
    # The page leaves at once: wait for where it goes, not for the page.
    browser.cdp.call("Page.navigate", url="%s/auto-form.html?target=%s" % (page_origin, target))
    browser.wait('location.href === %s && document.readyState === "complete"'
                 % json.dumps(target + "/settings"), "  the auto-submitted form took the tab")
    like(browser.cdp.eval("document.body.innerText"),
         r"^403 Forbidden: /settings answers only its own page: %s" % re.escape(rule),
         "  and the tab shows the 403 naming the rule")
    is_(settings_refused(srv), (refused + ATTACKS, applied),
        "  all %d tries reached the server: %d more 403s, no 200" % (ATTACKS, ATTACKS))


def admin_other_origins(chromium):
    """Pages of other origins, in a real browser, cannot switch the settings:
    a second server's page (same site, and another site), the server's own
    pages under its other name, and under a name rebound to 127.0.0.1 (DNS
    rebinding). The dashboard switches them from its own origin under
    either name, and not under the rebound one. The admin door serves no
    file, so no page can be of its origin but its own dashboard: the
    rebound name is tried with the dashboard."""
    pages = {"attack.html": ATTACK, "auto-form.html": AUTO_FORM}
    srv = Server(files=pages, args=["--admin", "on"],
                 name="admin server").start()
    other = Server(files=pages, name="other origin").start()
    here = "http://127.0.0.1:%d" % srv.admin_port
    browser = None
    try:
        browser = Browser(chromium, ["--host-resolver-rules=MAP %s 127.0.0.1" % REBIND])
        origin_rule = "Origin must be http:// and the Host"
        attack_from(browser, srv, "http://127.0.0.1:%d" % other.port, here, origin_rule)
        attack_from(browser, srv, "http://localhost:%d" % other.port, here, origin_rule)
        attack_from(browser, srv, "http://localhost:%d" % srv.port, here, origin_rule)
        rebound = "http://%s:%d" % (REBIND, srv.admin_port)
        status, now = settings(srv)
        is_((status, now["partition"], now["scheduler"], now["emulate_disk"], now["changed_ms"]),
            (200, "auto", "fair", "off", {}), "GET /settings: nothing changed")

        # The dashboard under the rebound name: GET /settings is refused, so
        # it shows no switch, and its ?set= changes nothing.
        browser.goto(rebound + "/.unclog/dashboard?set=partition=whole")
        browser.wait('document.getElementById("set-result").dataset.state === "error"',
                     "the dashboard under %s: ?set= is an error" % REBIND)
        is_(browser.cdp.eval("document.body.dataset.admin"), "off", "  the page shows no switch")
        is_(browser.text("admin-note"),
            NOTE + refusal(srv.admin_port, "%s:%d" % (REBIND, srv.admin_port)),
            "  and the server's reason (the Host rule) in its note")
        is_(settings(srv)[1]["partition"], "auto", "  and nothing changed")

        # The dashboard on the server's own origin, under either name.
        for origin, pair in ((here, "partition=64k"),
                             ("http://localhost:%d" % srv.admin_port, "scheduler=fifo")):
            browser.goto("%s/.unclog/dashboard?set=%s" % (origin, pair))
            browser.wait('document.getElementById("set-result").dataset.state === "ok"',
                         "the dashboard at %s switched %s" % (origin, pair))
        status, now = settings(srv)
        is_((status, now["partition"], now["scheduler"]), (200, "64k", "fifo"),
            "GET /settings: partition 64k, scheduler fifo")
        browser.no_errors("(the dashboard under each name)")
    except BaseException:
        if browser:
            diag("chromium stderr tail:\n" + browser.stderr()[-2000:])
        raise
    finally:
        if browser:
            browser.close()
        other.stop()
        srv.stop()


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("UNCLOG_REQUIRE_BROWSER") == "1":
            ok(False, "chromium is installed (UNCLOG_REQUIRE_BROWSER=1)",
               "neither chromium nor chromium-browser is on PATH: apt-get install chromium")
        else:
            skip_test("headless Chromium renders a gzip-encoded page and the dashboard",
                      "chromium is not installed")
        return
    gzip_page(chromium)
    dashboard_admin_off(chromium)
    dashboard_wildcard(chromium)
    dashboard_file(chromium)
    admin_other_origins(chromium)
    dashboard_live(chromium)


run(main, timeout=180)
