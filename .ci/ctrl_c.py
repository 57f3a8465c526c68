"""Runs a command as a person would on a terminal: on a pseudo-terminal,
waits for the server's "listening on URL" line, fetches the URL, types
Ctrl-C and exits with the command's own status (1 if it never served).

usage: python3 .ci/ctrl_c.py make deps run
"""
import os
import pty
import re
import sys
import time
import urllib.request

START_LIMIT_S = 900  # installing packages and building, on a slow mirror
STOP_LIMIT_S = 30


def main():
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(sys.argv[1], sys.argv[1:])
    seen = b""
    url = None
    deadline = time.monotonic() + START_LIMIT_S
    while url is None and time.monotonic() < deadline:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        seen += data
        m = re.search(rb"listening on (http://\S+)", seen)
        url = m.group(1).decode() if m else None
    if url is None:
        print("ctrl_c: the command never said where it listens", flush=True)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return 1
    body = urllib.request.urlopen(url, timeout=10).read()
    print(f"ctrl_c: GET {url}: {len(body)} bytes; typing Ctrl-C", flush=True)
    os.write(fd, b"\x03")
    deadline = time.monotonic() + STOP_LIMIT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            print(f"ctrl_c: exit status {code}", flush=True)
            return 0 if code == 0 and body else 1
        try:
            os.read(fd, 4096)  # keep the terminal drained
        except OSError:
            time.sleep(0.05)
    print("ctrl_c: still running after Ctrl-C", flush=True)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return 1


if __name__ == "__main__":
    sys.exit(main())
