"""Well-behaved users of make loadtest-cluster, run as their own process inside
the users' network namespace:

    python3 users.py --host 192.0.2.2 --port 80 --from A,B,... --duration S

One thread per source address, each opening a keep-alive connection to the
balancer, sending --per-conn requests on it (GET /96k.bin and POST /gzip of
16 KiB in turn, every answer checked: status 200, the body's length, the
gzip stream's inflated bytes), closing it, and again, for --duration
seconds or until SIGTERM (which ends the run early, its figures kept).
Prints one JSON line: {"ok", "failed", "failures": [[t, source,
what, begun], ...]} with t (the failure) and begun (when the failed request
or its connection began) in seconds of CLOCK_MONOTONIC, the orchestrator's
clock too, so that failures can be placed against a kill or a check's verdict.
"""

import argparse
import http.client
import json
import signal
import sys
import threading
import time
import zlib

GET, GET_SIZE = "/96k.bin", 96 * 1024
TEXT = b"the quick brown fox jumps over the lazy dog 0123456789\n" * 298  # 16 KiB


class Users:
    def __init__(self, args):
        self.args = args
        self.ok = 0
        self.failures = []
        self.lock = threading.Lock()
        self.end = time.monotonic() + args.duration

    def one(self, conn, i):
        if i % 2 == 0:
            conn.request("GET", GET)
            resp = conn.getresponse()
            body = resp.read()
            good = resp.status == 200 and len(body) == GET_SIZE
        else:
            conn.request("POST", "/gzip", body=TEXT)
            resp = conn.getresponse()
            body = resp.read()
            good = resp.status == 200 and zlib.decompress(body, 31) == TEXT
        if not good:
            raise RuntimeError(f"status {resp.status}, {len(body)} bytes")

    def user(self, source):
        a = self.args
        while time.monotonic() < self.end:
            step, begun = "connect", time.monotonic()
            conn = http.client.HTTPConnection(a.host, a.port, timeout=10,
                                              source_address=(source, 0))
            try:
                conn.connect()
                for i in range(a.per_conn):
                    step = f"request {i + 1}"
                    begun = begun if i == 0 else time.monotonic()
                    self.one(conn, i)
                    with self.lock:
                        self.ok += 1
            except Exception as e:  # noqa: B902 - every failure is the finding
                with self.lock:
                    self.failures.append([round(time.monotonic(), 3), source,
                                          f"{step}: {type(e).__name__}: {e}",
                                          round(begun, 3)])
            finally:
                conn.close()

    def stop(self, *_):
        self.end = 0

    def run(self):
        signal.signal(signal.SIGTERM, self.stop)
        threads = [threading.Thread(target=self.user, args=(s,), daemon=True)
                   for s in self.args.sources.split(",")]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # the main thread stays free for the signal handler
        return dict(ok=self.ok, failed=len(self.failures), failures=self.failures)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--from", dest="sources", required=True)
    ap.add_argument("--per-conn", type=int, default=6)
    ap.add_argument("--duration", type=float, required=True)
    args = ap.parse_args()
    for addr in [args.host] + args.sources.split(","):
        if not addr.startswith("192.0.2."):
            sys.exit("users.py: addresses in 192.0.2.0/24 only (the cluster's test hosts)")
    print(json.dumps(Users(args).run()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
