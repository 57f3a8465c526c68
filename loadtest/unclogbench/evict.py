"""The page-cache evictor of the cold-cache phase, run as its own (pinned) process.

    python3 evict.py [--interval S] [--duration S] FILE...

Drops FILE's pages from the page cache with posix_fadvise(POSIX_FADV_DONTNEED),
pass after pass every --interval seconds, for --duration seconds: those files
only, so the flood reads from the disk while the probe's small file stays
cached. Prints one JSON line: {"mode": "evict", "files", "passes", "failures"}.
"""

import argparse
import json
import os
import sys
import time


def evict(paths, duration, interval):
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in paths]
    passes = failures = 0
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            for path, fd in zip(paths, fds):
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError as e:
                    if failures == 0:
                        print(f"evict: fadvise {path}: {e.strerror}", file=sys.stderr)
                    failures += 1
            passes += 1
            time.sleep(interval)
    finally:
        for fd in fds:
            os.close(fd)
    return {"mode": "evict", "files": len(paths), "passes": passes, "failures": failures}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between passes")
    ap.add_argument("--duration", type=float, default=10, help="seconds of evicting")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    print(json.dumps(evict(args.files, args.duration, args.interval)), flush=True)


if __name__ == "__main__":
    main()
