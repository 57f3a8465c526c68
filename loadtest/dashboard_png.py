#!/usr/bin/env python3
"""make dashboard-png: docs/dashboard.png, the dashboard as `make demo` shows it.

Runs loadtest/demo.py (its own server, flood and probe, on a free port) in
the clogged state for --before seconds, switches partition to 64k as a
click on the page would (one POST /settings), waits --after seconds, then
has headless Chromium load the dashboard at 1280x800 and save a screenshot:
the chart, filled from /stats/history, shows both sides of the switch.
Then it stops the demo (SIGINT, by PID: the demo stops what it started)
and removes Chromium's profile.

    python3 loadtest/dashboard_png.py                       # docs/dashboard.png
    python3 loadtest/dashboard_png.py --out /tmp/d.png --before 30

Python 3 standard library only; needs chromium (or chromium-browser).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "dashboard.png"))
    ap.add_argument("--before", type=float, default=40,
                    help="seconds of the clogged state before the switch (default 40)")
    ap.add_argument("--after", type=float, default=12,
                    help="seconds after the switch to partition 64k (default 12)")
    ap.add_argument("--size", default="1280,800", help="the window, W,H (default 1280,800)")
    ap.add_argument("--demo-args", default="", help="more arguments for demo.py")
    return ap.parse_args(argv)


def wait_for_url(demo, out_path, timeout=60):
    """The dashboard URL the demo prints, or exit if it stops first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(out_path, errors="replace") as f:
            m = re.search(r"Dashboard: (http://127\.0\.0\.1:(\d+)/\S*)", f.read())
        if m:
            return m[1], int(m[2])
        if demo.poll() is not None:
            break
        time.sleep(0.2)
    with open(out_path, errors="replace") as f:
        sys.exit("the demo printed no dashboard URL:\n" + f.read()[-2000:])


def switch(port, body):
    """POST /settings as the page does; the demo's server has --admin on."""
    req = urllib.request.Request("http://127.0.0.1:%d/settings" % port, data=body.encode(),
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(req, timeout=10) as r:
        if r.status != 200:
            sys.exit("POST /settings %s: %d" % (body, r.status))


def screenshot(chromium, url, out, size):
    """Chromium's screenshot of URL after a few of the page's polls."""
    profile = tempfile.mkdtemp(prefix="unclog-chromium-")
    tmp = out + ".tmp.png"
    try:
        subprocess.run([chromium, *CHROMIUM_FLAGS, "--user-data-dir=" + profile,
                        "--window-size=" + size, "--virtual-time-budget=3000",
                        "--screenshot=" + tmp, url],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120, check=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    args = parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    out_path = os.path.join(TOP, "build", "dashboard-png-demo.log")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    duration = args.before + args.after + 60  # a bound: it is stopped before that
    with open(out_path, "w") as out:
        demo = subprocess.Popen([sys.executable, os.path.join(HERE, "demo.py"), "--port", "0",
                                 "--duration", str(int(duration)), *args.demo_args.split()],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        url, port = wait_for_url(demo, out_path)
        print("demo pid %d, dashboard %s; %g s clogged, then partition=64k"
              % (demo.pid, url, args.before), flush=True)
        time.sleep(args.before)
        switch(port, "partition=64k")
        time.sleep(args.after)
        screenshot(chromium, url, args.out, args.size)
        print("wrote %s (%d bytes)" % (os.path.relpath(args.out), os.path.getsize(args.out)))
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)
            try:
                demo.wait(30)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()


if __name__ == "__main__":
    main()
