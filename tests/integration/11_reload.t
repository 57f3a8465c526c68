#!/usr/bin/env python3
# SIGHUP re-reads the configuration file: live keys apply to new work, and a
# new partition to a transfer begun before at its next piece (counted in
# read jobs), which finishes byte-exact; restart-only keys keep their
# value; a broken file (a bad listen too) changes nothing and is logged as
# FILE:LINE; every key a reload changes is logged; the access log is reopened (rotation); flags given on the
# command line still win.
import hashlib
import os
import re
import signal

from harness import KiB, MiB, Conn, Server, is_, like, ok, poll, random_bytes, run

BIG = random_bytes(8 * MiB + 5, 11)


def conf_text(srv, partition, extra=""):
    return ("listen = 127.0.0.1:0\nroot = %s\naccess_log = %s\nthreads = 2\n"
            "partition = %s\n%s" % (srv.root, srv.access_log, partition, extra))


def rewrite(srv, text):
    with open(srv.conf_path, "w") as f:
        f.write(text)


def hup(srv):
    """Sends SIGHUP and waits for the server's word that it read the file."""
    before = srv.stderr().count("reload")
    srv.send_signal(signal.SIGHUP)
    poll(lambda: srv.stderr().count("reload") > before)


def main():
    srv = Server(conf_text="", defaults=False, files={"big.bin": BIG, "x.txt": b"x"},
                 name="reload server")
    rewrite(srv, conf_text(srv, "64k"))
    srv.start()
    is_(srv.stats()["partition"], 64 * KiB, "partition from the file: 64k")

    # A transfer in progress: its head and a little of its body are read.
    c = Conn(srv.port, rcvbuf=64 * KiB)
    c.request("GET", "/big.bin")
    status = c.read_head().status
    first = c.read_exact(100 * KiB)

    rewrite(srv, conf_text(srv, "4k", "threads = 3\nmax_url = 512\nlisting = on\n"))
    hup(srv)
    stats = srv.stats()
    is_(stats["partition"], 4 * KiB, "after SIGHUP /stats shows partition 4k")
    is_(stats["threads"], 2, "threads needs a restart: still 2")
    like(srv.stderr(), r"reload: threads changed", "the kept restart-only key is logged")
    # Every key the reload changed is logged, not only the live ones.
    for key, change in (("partition", "64k -> 4k"), ("max_url", "8k -> 512"),
                        ("listing", "off -> on")):
        like(srv.stderr(), r"(?m) %s: %s$" % (key, change), "the reload logs %s: %s" % (key, change))
    ok(not re.search(r"(?m) threads: ", srv.stderr()), "a restart key is not logged as changed")
    is_(srv.get("/" + "a" * 600).status, 414, "max_url 512 applies to new requests")

    # The transfer begun before reads its rest in 4k pieces: the new
    # partition reaches it at its next piece. Its server side holds at most
    # two pieces and what the socket takes (send_lowat 1m unsent, and the
    # client's 64 KiB), so well over 4 MiB was still unread at the reload:
    # over 1,000 reads at 4k, where 64k would take 130 for all of it.
    reads = srv.stats()["jobs"]["read"]["submitted"]
    rest = c.read_exact(len(BIG) - len(first))
    pieces = srv.stats()["jobs"]["read"]["submitted"] - reads
    is_(status, 200, "the transfer begun before the reload had a 200 head")
    is_(hashlib.sha256(first + rest).hexdigest(), hashlib.sha256(BIG).hexdigest(),
        "the transfer begun before the reload completes byte-exact")
    ok(pieces >= 4 * MiB // (4 * KiB), "the transfer begun before read its rest in 4k pieces",
       "%d read jobs after the reload" % pieces)
    c.close()

    reads = srv.stats()["jobs"]["read"]["submitted"]
    is_(srv.get("/big.bin").body, BIG, "a new download after the reload is byte-exact")
    pieces = srv.stats()["jobs"]["read"]["submitted"] - reads
    ok(pieces >= len(BIG) // (4 * KiB), "the new download was read in 4k pieces",
       "%d read jobs for %d bytes" % (pieces, len(BIG)))

    # A broken file: nothing changes, the error names the file and line.
    rewrite(srv, conf_text(srv, "1m", "gzip_partition = 8k\nmax_headers = lots\n"))
    hup(srv)
    stats = srv.stats()
    is_(stats["partition"], 4 * KiB, "a broken file keeps partition 4k")
    is_(stats["gzip_partition"], 64 * KiB, "a broken file keeps every key, even valid ones")
    like(srv.stderr(), r"reload refused.*%s:7: max_headers" % srv.conf_path.replace(".", r"\."),
         "the refusal is logged as FILE:LINE: message")
    # listen too is checked where the file is read, though it needs a restart.
    rewrite(srv, conf_text(srv, "1m").replace("127.0.0.1:0", "nonsense"))
    hup(srv)
    is_(srv.stats()["partition"], 4 * KiB, "a bad listen refuses the whole reload")
    like(srv.stderr(), r"reload refused.*%s:1: listen: 'nonsense' is not ADDR:PORT"
         % srv.conf_path.replace(".", r"\."), "a bad listen is logged as FILE:1: listen: ...")

    # Log rotation: move the log away, SIGHUP, the next line goes to a new file.
    rewrite(srv, conf_text(srv, "4k"))
    srv.get("/x.txt")
    rotated = srv.access_log + ".1"
    os.rename(srv.access_log, rotated)
    hup(srv)
    ok(os.path.exists(srv.access_log), "the access log is reopened at its path")
    srv.get("/x.txt?after")
    srv.stop()  # flushes the log
    with open(rotated) as f:
        text = f.read()
    like(text, r"GET /x\.txt HTTP", "the rotated file kept the lines from before")
    ok("?after" not in text, "the rotated file gets nothing after the reload")
    with open(srv.access_log) as f:
        like(f.read(), r"/x\.txt\?after", "the request after the reload is in the new file")

    # Flags win over the file, at a reload as at startup.
    srv = Server(files={"x.txt": b"x"}, args=["--partition", "16k"], name="flag server")
    srv.start()
    rewrite(srv, "partition = 1m\ngzip_partition = 4k\n")
    hup(srv)
    stats = srv.stats()
    is_(stats["partition"], 16 * KiB, "a reload keeps the --partition flag's value")
    is_(stats["gzip_partition"], 4 * KiB, "keys without a flag come from the file")
    srv.stop()


run(main)
