#!/usr/bin/env python3
# A real browser: headless Chromium loads a page that unclog sends
# gzip-encoded, and a script in it fetches a gzip-encoded text file and a
# byte range; the DOM it dumps shows the decoded text. Skipped when chromium
# is not installed, unless UNCLOG_REQUIRE_BROWSER=1 (CI): then that fails.
import os
import re
import shutil
import subprocess
import tempfile

from harness import SLOW, KiB, Server, is_, ok, run, skip_test, text_bytes

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


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("UNCLOG_REQUIRE_BROWSER") == "1":
            ok(False, "chromium is installed (UNCLOG_REQUIRE_BROWSER=1)",
               "neither chromium nor chromium-browser is on PATH: apt-get install chromium")
        else:
            skip_test("headless Chromium renders a gzip-encoded page", "chromium is not installed")
        return
    with Server(files={"page.html": PAGE, "data.txt": DATA}) as srv:
        url = "http://127.0.0.1:%d/page.html" % srv.port
        # What Chromium will get: the page and the text file gzip-encoded.
        for target in ("/page.html", "/data.txt"):
            resp = srv.get(target, headers={"Accept-Encoding": CHROME_AE})
            is_(resp.header("Content-Encoding"), "gzip",
                "%s with Chromium's Accept-Encoding: gzip-encoded" % target)

        profile = tempfile.mkdtemp(prefix="unclog-chromium-")
        try:
            proc = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--virtual-time-budget=10000",
                 "--user-data-dir=" + profile, "--dump-dom", url],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                timeout=90 * SLOW)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        dom = proc.stdout.decode("utf-8", "replace")
        ok(proc.returncode == 0, "chromium --dump-dom: exit status 0",
           "status %d; stderr tail:\n%s" % (proc.returncode,
                                            proc.stderr.decode("utf-8", "replace")[-2000:]))
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


run(main, timeout=180)
