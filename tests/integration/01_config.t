#!/usr/bin/env python3
# Configuration: --help/--version (within 80 columns, every option described), the
# config file (keys, comments, size suffixes, `whole`), flags overriding the
# file, the positional DIR, the config file the listening line names, and the
# fatal errors with exit status 2: `FILE:LINE: message`, or `--flag: message`
# with the flag as it was typed; `listen` among them (localhost:PORT served,
# host names refused), a flag followed by an option instead of its value;
# while a bind failure is exit status 1. Stderr's first line is the listening
# line, or the bind error (the loop reads line comes after, at debug).
import os
import re
import shutil
import socket
import subprocess
import tempfile

from harness import (BIN, REPO, Server, help_entries, help_keys, is_, like, ok, poll, run, run_bin,
                     run_with_conf)


def test_help_version():
    status, out, err = run_bin(["--help"])
    is_(status, 0, "--help exits 0")
    like(out + err, r"--partition", "--help lists --partition")
    like(out + err, r"--gzip-max-body", "--help lists --gzip-max-body")
    status, out, err = run_bin(["-h"])
    is_(status, 0, "-h exits 0")
    status, out, err = run_bin(["--version"])
    is_(status, 0, "--version exits 0")
    ok((out + err).strip(), "--version prints something", "stdout %r stderr %r" % (out, err))
    status, out, err = run_bin(["-V"])
    is_(status, 0, "-V exits 0")


def test_help_layout():
    """--help fits a terminal: no line is wider than 80 columns; each option
    is a head line with its description below it; every action flag, the
    signals and the exit statuses are there."""
    status, out, err = run_bin(["--help"])
    wide = [line for line in out.splitlines() if len(line) > 80]
    ok(not wide, "no line of --help is wider than 80 columns", "\n".join(wide))
    entries = help_entries(out)
    bare = [flag for _, flag, _, desc in entries if not desc]
    ok(len(entries) > 30 and not bare, "each of %d options has a description" % len(entries),
       "without one: %s" % bare)
    flags = [flag for _, flag, _, _ in entries]
    for flag in ("--config", "--routes", "--job-classes", "--help", "--version"):
        ok(flag in flags, "--help lists %s" % flag)
    like(out, r"(?m)^Signals:\n  SIGTERM, SIGINT: .*\n(?:.*\n)*?  SIGHUP: ", "--help names the signals")
    like(out, r"(?m)^Exit status:\n  0: .*\n(?:.*\n)*?  1: .*\n(?:.*\n)*?  2: ",
         "--help gives the exit statuses")


def test_config_file():
    text = """# every key, with comments and odd spacing
listen = 127.0.0.1:0

   threads=3
partition = 8k    # trailing comment
gzip_partition = whole
gzip_max_body = 2m
"""
    srv = Server(conf_text=text, defaults=False, name="file-only server")
    # root and access_log from the file too: their values need the temp dir.
    with open(srv.conf_path, "a") as f:
        f.write("root = %s\naccess_log = %s\n" % (srv.root, srv.access_log))
    srv.write_file("x.txt", b"hello")
    with srv:
        like(srv.startup_line, r"listening on http://127\.0\.0\.1:\d+/",
             "startup line names the bound address")
        like(srv.startup_line, r"partition", "startup line mentions the partition")
        like(srv.startup_line, r"threads", "startup line mentions the threads")
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "root from the config file is served")
        st = srv.stats()
        is_(st.get("threads"), 3, "threads = 3 from the file")
        is_(st.get("partition"), 8192, "partition = 8k is 8192 bytes")
        is_((st.get("gzip_partition"), st["settings"]["gzip_partition"]), (0, "whole"),
            "gzip_partition = whole: 0 bytes, and its word in settings")
        big = b"z" * (1024 * 1024 + 1)
        resp = srv.conn().roundtrip("POST", "/gzip", body=big)
        is_(resp.status, 200, "gzip_max_body = 2m admits a body of 1 MiB + 1")

    srv = Server(conf={"threads": 3, "partition": "8k", "gzip_partition": "1m"},
                 args=["--threads", "2", "--partition", "16k"], name="override server")
    with srv:
        st = srv.stats()
        is_(st.get("threads"), 2, "--threads overrides the file")
        is_(st.get("partition"), 16384, "--partition 16k overrides the file")
        is_(st.get("gzip_partition"), 1048576, "gzip_partition = 1m from the file is kept")

    srv = Server(args=["--partition", "whole", "--gzip-partition", "4k",
                       "--gzip-max-body", "64k"], name="flag server")
    with srv:
        st = srv.stats()
        is_((st.get("partition"), st["settings"]["partition"]), (0, "whole"), "--partition whole")
        is_(st.get("gzip_partition"), 4096, "--gzip-partition 4k")
        resp = srv.conn().roundtrip("POST", "/gzip", body=b"y" * (64 * 1024 + 1))
        is_(resp.status, 413, "--gzip-max-body 64k refuses 64 KiB + 1")


def test_positional_dir():
    srv = Server(defaults=False, name="positional server")
    srv.write_file("p.txt", b"positional")
    srv.args = ["--listen", "127.0.0.1:0", "--access-log", "off", srv.root]
    with srv:
        resp = srv.get("/p.txt")
        is_((resp.status, resp.body), (200, b"positional"), "positional DIR is the root")


def test_root_not_a_directory():
    tmp = tempfile.mkdtemp(prefix="unclog-test-")
    try:
        app = os.path.join(tmp, "app.js")
        with open(app, "w") as f:
            f.write("x\n")
        status, _, err = run_bin(["--listen", "127.0.0.1:0", "--access-log", "off", app])
        is_(status, 1, "a regular file as the root: exit status 1")
        like(err, r'root "%s": not a directory: .*unclog DIR' % re.escape(app),
             "a regular file as the root: the message says unclog serves a directory")
        # Outside the repository: no conf/unclog.conf and no static/ here.
        status, _, err = run_bin(["--listen", "127.0.0.1:0", "--access-log", "off"], cwd=tmp)
        is_(status, 1, "no DIR and no static/ in reach: exit status 1")
        like(err, r'root "static": .*unclog DIR', "no DIR in reach: the message says unclog DIR")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def expect_config_error(text, line, desc):
    """A config file whose line `line` is bad: exit 2 and CONF:LINE: on stderr."""
    status, _, err, conf = run_with_conf(text)
    ok(status == 2, "%s: exit status 2" % desc, "status %r (None: still running, killed)"
       % status, "stderr: %s" % err[-2000:])
    like(err, re.escape(conf) + ":%d:" % line, "%s: stderr says CONF:%d:" % (desc, line))


def expect_flag_error(args, desc, flag=None):
    """Bad flags: exit 2, and (with flag) `FLAG: ` on stderr, spelled as typed."""
    status, _, err, _ = run_with_conf("", args)
    ok(status == 2, "%s: exit status 2" % desc, "status %r (None: still running, killed)"
       % status, "stderr: %s" % err[-2000:])
    ok(err.strip(), "%s: a message on stderr" % desc)
    if flag is not None:
        like(err, r"(?m)^unclog: %s: " % re.escape(flag), "%s: stderr says %s:" % (desc, flag))
    return err


ACCEPTS = r"ADDR:PORT, \[ADDR6\]:PORT or localhost:PORT"


def test_listen():
    """listen is checked where it is read, like every key: a bad value is
    exit 2 with its place and what listen accepts; localhost:PORT is
    127.0.0.1; an address in use is no configuration error (exit 1)."""
    for value in ("nonsense", "example.com:8080", "::1:8080", "127.0.0.1:65536", "127.0.0.1:"):
        expect_config_error("threads = 2\nlisten = %s\n" % value, 2, "listen = %s" % value)
        err = expect_flag_error(["--listen", value], "--listen %s" % value, "--listen")
        like(err, ACCEPTS, "--listen %s: the message says what listen accepts" % value)
    _, _, err, _ = run_with_conf("listen = localhost\n")
    like(err, ACCEPTS, "listen = localhost (no port): the message says what listen accepts")
    expect_flag_error(["--listen=nonsense"], "--listen=nonsense", "--listen")

    srv = Server(args=["--listen", "localhost:0"], files={"x.txt": b"local"},
                 name="localhost server")
    with srv:
        like(srv.startup_line, r"listening on http://127\.0\.0\.1:\d+/",
             "listen = localhost:0 binds 127.0.0.1")
        is_(srv.stderr().split("\n")[0], srv.startup_line, "the listening line is stderr's first")
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, b"local"), "localhost:PORT serves")

    with Server(args=["--log-level", "debug"], name="server at log_level debug") as srv:
        lines = poll(lambda: [l for l in srv.stderr().split("\n") if " loop reads: " in l])
        is_(srv.stderr().split("\n")[0], srv.startup_line,
            "log_level debug: the listening line is still stderr's first")
        like(lines[0] if lines else "", r"^\S+ debug loop reads: ",
             "  the loop reads line after it is a debug line")

    # A bind that fails is the environment's fault, not the file's: status 1.
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    status, _, err, _ = run_with_conf("", ["--listen", "127.0.0.1:%d" % port])
    holder.close()
    is_(status, 1, "an address in use: exit status 1, not 2")
    like(err.split("\n")[0], r"^\S+ error listen on 127\.0\.0\.1:%d: address already in use" % port,
         "an address in use: the error is stderr's first line")
    like(err, r"listen on 127\.0\.0\.1:%d: address already in use" % port,
         "an address in use is logged as such")
    like(err, r"--listen ADDR:0.*make run RUN_ARGS='--listen 127\.0\.0\.1:0'",
         "an address in use: the message says --listen ADDR:0 and make run RUN_ARGS")


def test_errors():
    expect_config_error("# comment\n\nbogus_key = 1\n", 3, "unknown key")
    expect_config_error("threads = 2\npartition = 0\n", 2, "partition = 0")
    expect_config_error("threads = abc\n", 1, "threads = abc")
    expect_config_error("threads = 0\n", 1, "threads = 0")
    expect_config_error("threads = 1025\n", 1, "threads = 1025")
    expect_config_error("#\n#\n#\ngzip_max_body = 12q\n", 4, "gzip_max_body = 12q")
    expect_config_error("partition = 64k\ngzip_partition = 0\n", 2, "gzip_partition = 0")
    expect_config_error("gzip_max_body = whole\n", 1, "gzip_max_body = whole")
    expect_config_error("threads 4\n", 1, "a line without =")
    expect_config_error("partition = -4k\n", 1, "partition = -4k")

    expect_flag_error(["--partition", "12q"], "--partition 12q", "--partition")
    expect_flag_error(["--partition", "0"], "--partition 0", "--partition")
    expect_flag_error(["--threads", "abc"], "--threads abc", "--threads")
    # The flag as typed, dashes or underscores.
    expect_flag_error(["--emulate-disk", "xx"], "--emulate-disk xx", "--emulate-disk")
    expect_flag_error(["--emulate-disk=xx"], "--emulate-disk=xx", "--emulate-disk")
    expect_flag_error(["--gzip_partition", "0"], "--gzip_partition 0", "--gzip_partition")
    expect_flag_error(["--max-url"], "--max-url without a value", "--max-url")

    status, out, err = run_bin(["--no-such-flag"])
    ok(status not in (0, None), "an unknown flag fails", "status %r stderr %s" % (status, err))
    status, out, err = run_bin(["-c", "/nonexistent/unclog.conf", "--listen", "127.0.0.1:0"])
    ok(status not in (0, None), "a missing config file fails",
       "status %r stderr %s" % (status, err))


def test_flag_without_value():
    """A flag whose value is missing does not take the next option as its
    value (the three cases of a newcomer's report, then -c): exit 2 and
    `FLAG: needs a value, not the option NEXT`, as for a flag given last.
    A value that starts with - is written after '=', and a lone - (standard
    output) is still a value."""
    tmp = tempfile.mkdtemp(prefix="unclog-test-")
    try:
        cases = (
            (["--listen", "127.0.0.1:0", "--access-log", "off", "--cache-control", "--admin", tmp],
             "--cache-control", "value", "--admin"),
            (["--gzip-types", "--listen", "127.0.0.1:0", "--access-log", "off", tmp],
             "--gzip-types", "value", "--listen"),
            (["--root", "--listing", "on"], "--root", "value", "--listing"),
            (["--access-log", "-c", os.path.join(REPO, "conf", "unclog.conf")], "--access-log",
             "value", "-c"),
            (["-c", "--listen", "127.0.0.1:0"], "-c", "file", "--listen"),
        )
        for args, flag, what, after in cases:
            status, _, err = run_bin(args, timeout=5, cwd=tmp)
            desc = " ".join(args).replace(tmp, "DIR")
            is_(status, 2, "%s: exit status 2 (None: it started)" % desc)
            like(err, r"^unclog: %s: needs a %s, not the option %s\b" % (
                re.escape(flag), what, re.escape(after)), "%s: %s needs a %s" % (desc, flag, what))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with Server(args=["--cache-control=-x-", "--admin", "on"], files={"x.txt": b"x"},
                name="server, --cache-control=-x- --admin on") as srv:
        is_(srv.get("/x.txt").header("Cache-Control"), "-x-",
            "--cache-control=-x-: a value that starts with - after '='")
        is_(srv.get("/settings").status, 200, "  and --admin after it is on")
    srv = Server(defaults=False, name="server, --access-log -", files={"x.txt": b"x"})
    srv.args = ["--listen", "127.0.0.1:0", "--root", srv.root, "--access-log", "-"]
    with srv:
        srv.get("/x.txt")
        ok(poll(lambda: "/x.txt" in open(srv.stdout_path).read()),
           "--access-log -: a lone - is a value (the access log on standard output)")


def startup_line_from(cwd, args):
    """Runs the binary in CWD with ARGS, and without the harness's -c, until
    its listening line, then stops it with SIGTERM. Returns (that line, or
    "" when none came, and the exit status)."""
    log = os.path.join(cwd, "stderr.log")
    with open(log, "wb") as err:
        proc = subprocess.Popen([BIN] + args, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)

    def line():
        with open(log, errors="replace") as f:
            return next((l for l in f.read().splitlines() if "listening on" in l), "")
    try:
        poll(lambda: line() or proc.poll() is not None)
    finally:
        proc.terminate()
        status = proc.wait()
    return line(), status


def test_config_file_named():
    """The listening line says which configuration file the settings came
    from: the one -c names, conf/unclog.conf when the working directory
    holds one, else no config file."""
    with Server(name="server with -c FILE") as srv:
        like(srv.startup_line, r"\(partition [^)]*\), config %s(, |$)" % re.escape(srv.conf_path),
             "-c FILE: the listening line says config FILE")
    tmp = tempfile.mkdtemp(prefix="unclog-test-")
    try:
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        args = ["--listen", "127.0.0.1:0", "--access-log", "off", root]
        line, status = startup_line_from(tmp, args)
        like(line, r"threads \d+\), no config file(, |$)",
             "no -c and no conf/unclog.conf in the working directory: no config file")
        is_(status, 0, "  and it stops cleanly")
        os.makedirs(os.path.join(tmp, "conf"))
        with open(os.path.join(tmp, "conf", "unclog.conf"), "w") as f:
            f.write("threads = 3\n")
        line, status = startup_line_from(tmp, args)
        like(line, r"threads 3\), config conf/unclog\.conf(, |$)",
             "run where conf/unclog.conf is: the line names it as found (and threads 3 is read)")
        is_(status, 0, "  and it stops cleanly")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_client_key():
    """UNCLOG_CLIENT_KEY, a fixed key for the clients' hash (the harness
    sets one), is 32 hex digits or the server does not start (status 2:
    retrying cannot help)."""
    kept = os.environ["UNCLOG_CLIENT_KEY"]
    try:
        for bad in ("", "00" * 15, "00" * 17, "0g" + "00" * 15, "+0" + "00" * 15):
            os.environ["UNCLOG_CLIENT_KEY"] = bad
            status, out, err = run_with_conf("")[:3]
            ok(status == 2 and "UNCLOG_CLIENT_KEY is not 32 hex digits" in err,
               "UNCLOG_CLIENT_KEY=%r is refused" % bad, "status %r stderr %s" % (status, err))
    finally:
        os.environ["UNCLOG_CLIENT_KEY"] = kept


def test_helpful_errors():
    status, _, err, conf = run_with_conf("threads = 2\npartiton = 64k\n")
    is_(status, 2, "a mistyped key: exit status 2")
    like(err, re.escape(conf) + r":2: unknown key 'partiton' \(did you mean 'partition'\?\)",
         "a mistyped key: file:line, and the near key offered")
    status, _, err, _ = run_with_conf("", ["--gzip-partiton", "4k"])
    is_(status, 2, "a mistyped flag: exit status 2")
    like(err, r"unknown option '--gzip-partiton' \(did you mean --gzip-partition\?\)",
         "a mistyped flag: the near flag offered")
    conf_text = "listing = yes\n# again\nthreads = 2\nlisting = false\n"
    with Server(conf_text=conf_text, name="server, listing twice, yes then false") as srv:
        like(srv.stderr(), re.escape(srv.conf_path) + r":4: listing set again \(first at " +
             re.escape(srv.conf_path) + r":1\)", "a repeated key is warned of, both lines")
        is_(srv.get("/").status, 404, "  the last one (false) wins: no listing")
    with Server(conf_text="listing = true\n", name="server, listing = true") as srv:
        ok("set again" not in srv.stderr(), "a key set once: no warning")
        is_(srv.get("/").status, 200, "listing = true: a listing")


def test_conf_covers_every_key():
    """conf/unclog.conf, the documented default, sets every key --help lists
    (the one key table), each to the default --help gives."""
    status, out, err = run_bin(["--help"])
    keys = [(flag[2:], default) for flag, default, _ in help_keys(out)]
    ok(len(keys) > 30, "--help lists %d keys with their defaults" % len(keys))
    with open(os.path.join(REPO, "conf", "unclog.conf")) as f:
        conf = dict(re.findall(r"^([a-z_]+) = (.*?)\s*$", f.read(), re.M))
    for flag, default in keys:
        key = flag.replace("-", "_")
        is_(conf.get(key), default, "conf/unclog.conf sets %s to its default" % key)
    status, out, err = run_bin(["-c", os.path.join(REPO, "conf", "unclog.conf"), "--help"])
    is_(status, 0, "conf/unclog.conf loads")


def main():
    test_help_version()
    test_help_layout()
    test_conf_covers_every_key()
    test_config_file()
    test_positional_dir()
    test_root_not_a_directory()
    test_errors()
    test_client_key()
    test_flag_without_value()
    test_config_file_named()
    test_helpful_errors()
    test_listen()


run(main)
