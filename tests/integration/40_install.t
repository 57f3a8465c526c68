#!/usr/bin/env python3
# make install / make uninstall (install.mk) into a temporary DESTDIR: every
# file lands where it should, the man page renders without a warning and
# documents every option and configuration key of --help with its default,
# every route the handlers declare (with its methods) and every job class of
# the gateway, the systemd unit has its reload command and sandbox, an edited
# configuration survives both, and uninstall leaves no file behind. And make
# deps, with every package installed, says so in one line.
#
# It never compiles: with build/unclog out of date (sources edited since the
# build) it skips, so that it cannot rebuild the binary under parallel tests.
import os
import re
import shutil
import stat
import subprocess
import tempfile

from harness import REPO, help_entries, is_, like, note, ok, run, run_bin, skip_test

PREFIX = "/usr/local"
BINDIR = PREFIX + "/bin"
MAN = PREFIX + "/share/man/man1/unclog.1"
CONF = PREFIX + "/etc/unclog/unclog.conf"
SHARE = PREFIX + "/share/unclog"
UNIT = PREFIX + "/lib/systemd/system/unclog.service"

# Variables a calling make or the environment could pass down to ours.
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS", "DESTDIR",
            "PREFIX", "BINDIR", "MANDIR", "SYSCONFDIR", "DATADIR", "UNITDIR", "INSTALL")

SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "CONFIGURATION", "ENDPOINTS",
            "SIGNALS", "FILES", "EXIT STATUS", "EXAMPLES", "SEE ALSO")

SANDBOX = {
    "Type": "simple",
    "ExecReload": "/bin/kill -HUP $MAINPID",
    "KillSignal": "SIGTERM",
    "Restart": "on-failure",
    "DynamicUser": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "NoNewPrivileges": "yes",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "SystemCallArchitectures": "native",
    "SystemCallFilter": "@system-service",
    "CapabilityBoundingSet": "",
    "LimitNOFILE": "1048576",
}


def make(*args, path_first=None):
    """make -s -C REPO ARGS, with PATH_FIRST (a directory) before PATH when
    given. Returns (status, stdout + stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV}
    if path_first is not None:
        env["PATH"] = path_first + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(["make", "-s", "--no-print-directory", "-C", REPO] + list(args),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=env, timeout=120)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def files_under(top):
    return sorted(os.path.relpath(os.path.join(d, f), top)
                  for d, _, fs in os.walk(top) for f in fs)


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def parse_help():
    """From --help: the options ([-c, --config, ...]) and the keys, as
    [(key, default)] with `_` spelling, read from the final "(default ...)"."""
    status, out, err = run_bin(["--help"])
    is_(status, 0, "--help exits 0")
    options, keys, nodefault = [], [], []
    for short, flag, arg, desc in help_entries(out):
        options += [short, flag] if short else [flag]
        if short or not arg:
            continue  # -c FILE and the actions are options, not keys
        d = re.search(r"\(default ([^;()]*)(?:;[^()]*)?\)$", desc)
        if d:
            keys.append((flag[2:].replace("-", "_"), d.group(1)))
        else:
            nodefault.append(flag)
    ok(len(keys) >= 20, "--help lists the configuration keys (%d)" % len(keys), out)
    ok(not nodefault, "--help gives each key's default", "\n".join(nodefault))
    return options, keys


def source_routes():
    """The routes the handler modules declare, from their sources: each
    `.path = "/x"` (or a macro #defined as "/x" in handlers/), and "*" for
    the fallback (`.path = NULL`)."""
    paths, names, defines = set(), set(), {}
    for d, _, files in os.walk(os.path.join(REPO, "handlers")):
        for n in files:
            with open(os.path.join(d, n)) as f:
                text = f.read()
            defines.update(re.findall(r'^#define (\w+) "([^"]+)"', text, re.M))
            if n.endswith(".c"):
                paths |= set(re.findall(r'\.path = "([^"]+)"', text))
                names |= set(re.findall(r"\.path = ([A-Z_]+)\b", text)) - {"NULL"}
                paths |= {"*"} if re.search(r"\.path = NULL", text) else set()
    return paths | {defines.get(n, n) for n in names}


def source_classes():
    """The gateway's job class names, from server/pool/gateway.c."""
    with open(os.path.join(REPO, "server", "pool", "gateway.c")) as f:
        m = re.search(r"class_names\[[^]]*\] = \{([^}]*)\}", f.read())
    return re.findall(r'"(\w+)"', m.group(1)) if m else []


def parse_routes():
    """`unclog --routes` and `--job-classes`, checked against the sources:
    [(path, methods)] and [class]."""
    status, out, err = run_bin(["--routes"])
    is_(status, 0, "--routes exits 0")
    routes = [tuple(l.split(" ", 1)) for l in out.splitlines() if " " in l]
    is_(sorted(p for p, _ in routes), sorted(source_routes()),
        "--routes lists every route the handlers declare")
    status, out, err = run_bin(["--job-classes"])
    is_(status, 0, "--job-classes exits 0")
    classes = out.split()
    is_(classes, source_classes(), "--job-classes lists the gateway's classes")
    return routes, classes


def plain(roff):
    """Man source with the escapes the page uses turned back into text."""
    text = re.sub(r"\\f[BIRP]", "", roff)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


def sections(roff):
    out, name = {}, None
    for line in roff.splitlines():
        if line.startswith(".SH "):
            name = line[4:].strip().strip('"')
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def entry(section, tag_re):
    """The description line that follows the .TP tag line matching tag_re."""
    m = re.search(r"^\.TP\n" + tag_re + r"[^\n]*\n([^\n]*)$", section, re.M)
    return m.group(1) if m else None


def check_endpoints(section, routes, classes):
    """ENDPOINTS has a tag `METHODS PATH` with a description for each route
    (/path for the fallback), and names every job class."""
    missing = []
    for path, methods in routes:
        tag = methods + " " + ("/path" if path == "*" else path)
        if not entry(section, re.escape(tag) + r"$"):
            missing.append(tag)
    ok(routes and not missing, "ENDPOINTS describes each of %d routes" % len(routes),
       "missing: %s" % missing)
    absent = [c for c in classes if not re.search(r"\b%s\b" % c, section)]
    ok(classes and not absent, "ENDPOINTS names each of %d job classes" % len(classes),
       "absent: %s" % absent)


def check_man(path, options, keys, routes, classes):
    with open(path, encoding="utf-8") as f:
        roff = f.read()
    ok("@" not in roff, "man page: no @PLACEHOLDER@ is left",
       "\n".join(l for l in roff.splitlines() if "@" in l))
    secs = {k: plain(v) for k, v in sections(roff).items()}
    missing = [s for s in SECTIONS if s not in secs]
    ok(not missing, "man page has every section", "missing: %s" % missing)
    opts = secs.get("OPTIONS", "")
    conf = secs.get("CONFIGURATION", "")
    absent = [o for o in options if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), opts)]
    ok(not absent, "OPTIONS names all %d options of --help" % len(options), "absent: %s" % absent)
    bad_opt, bad_key = [], []
    for key, default in keys:
        flag = "--" + key.replace("_", "-")
        want = "(default %s" % default
        desc = entry(opts, re.escape(flag) + r"(?: |$)")
        if desc is None or want not in desc:
            bad_opt.append("%s: %r" % (flag, desc))
        desc = entry(conf, re.escape(key) + r" = ")
        if desc is None or want not in desc:
            bad_key.append("%s: %r" % (key, desc))
    ok(not bad_opt, "OPTIONS has an entry with its default for each of %d keys" % len(keys),
       "wrong or missing: %s" % bad_opt)
    ok(not bad_key, "CONFIGURATION has `key = ...` with its default for each of %d keys"
       % len(keys), "wrong or missing: %s" % bad_key)
    check_endpoints(secs.get("ENDPOINTS", ""), routes, classes)
    like(secs.get("FILES", ""), re.escape(CONF), "FILES names the installed configuration")
    like(secs.get("SIGNALS", ""), r"SIGHUP", "SIGNALS documents SIGHUP")

    if shutil.which("man") is None:
        skip_test("man -l renders the page without warnings", "man is not installed")
        return
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    proc = subprocess.run(["man", "--warnings", "-l", path], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
    err = proc.stderr.decode("utf-8", "replace")
    out = proc.stdout.decode("utf-8", "replace")
    ok(proc.returncode == 0 and err.strip() == "", "man --warnings -l renders it with no warning",
       "status %d, stderr:\n%s" % (proc.returncode, err))
    like(out, r"EXIT STATUS", "the rendered page has its sections")


def check_unit(path, dest):
    with open(path) as f:
        text = f.read()
    values = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)=(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2).strip()
    is_(values.get("ExecStart"), "%s/unclog -c %s" % (BINDIR, CONF),
        "unit: ExecStart runs the installed binary on the installed configuration")
    is_(values.get("WorkingDirectory"), SHARE, "unit: WorkingDirectory is where static/ is")
    wrong = ["%s=%r (want %r)" % (k, values.get(k), v) for k, v in SANDBOX.items()
             if values.get(k) != v]
    ok(not wrong, "unit: ExecReload, Restart and all %d sandboxing keys" % len(SANDBOX),
       "\n".join(wrong))
    like(text, r"#.*AmbientCapabilities=CAP_NET_BIND_SERVICE",
         "unit: a comment tells how to bind a port below 1024")
    ok("@" not in text.replace("@system-service", ""), "unit: no @PLACEHOLDER@ is left")

    if shutil.which("systemd-analyze") is None:
        skip_test("systemd-analyze verify accepts the unit", "systemd-analyze is not installed")
        return
    # A copy whose paths exist: verify checks that ExecStart is executable.
    vdir = tempfile.mkdtemp(prefix="unclog-unit-")
    copy = os.path.join(vdir, "unclog.service")
    with open(copy, "w") as f:
        f.write(re.sub(r"^(ExecStart=|WorkingDirectory=)/", r"\1" + dest + "/", text, flags=re.M))
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", copy],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60)
    said = proc.stdout.decode("utf-8", "replace").strip()
    ok(proc.returncode == 0 and said == "", "systemd-analyze verify accepts the unit silently",
       "status %d:\n%s" % (proc.returncode, said))
    shutil.rmtree(vdir, ignore_errors=True)


def check_deps():
    """make deps, every package installed (a dpkg-query that says so; an
    apt-get and a sudo that fail if called): one line that says so, names
    the packages, and installs nothing."""
    bin_dir = tempfile.mkdtemp(prefix="unclog-deps-")
    try:
        for name, script in (("dpkg-query", "printf 'install ok installed'"),
                             ("apt-get", "echo 'apt-get ran'; exit 1"),
                             ("sudo", "echo 'sudo ran'; exit 1")):
            with open(os.path.join(bin_dir, name), "w") as f:
                f.write("#!/bin/sh\n%s\n" % script)
            os.chmod(os.path.join(bin_dir, name), 0o755)
        status, out = make("deps", path_first=bin_dir)
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
    is_(status, 0, "make deps with every package installed exits 0")
    like(out, r"\Adeps: all installed \(build-essential pkg-config [^()\n]*\)\n\Z",
         "  and says so in one line, with the packages")


def main():
    check_deps()
    status, _ = make("-q", "build/unclog")
    if status != 0:
        skip_test("make install and uninstall",
                  "build/unclog is not up to date (run make first; this test does not rebuild)")
        return
    options, keys = parse_help()
    routes, classes = parse_routes()

    dest = tempfile.mkdtemp(prefix="unclog-install-")
    status, out = make("install", "DESTDIR=" + dest, "PREFIX=" + PREFIX)
    is_(status, 0, "make install exits 0")
    ok(not re.search(r"^\s*(CC|LD)\b", out, re.M), "make install compiles nothing", out)
    d = lambda p: dest + p  # noqa: E731

    binary = d(BINDIR + "/unclog")
    ok(os.path.isfile(binary) and os.access(binary, os.X_OK), "the binary is installed, executable",
       "\n".join(files_under(dest)))
    if os.path.isfile(binary):
        is_(stat.S_IMODE(os.stat(binary).st_mode), 0o755, "the binary is mode 755")
        ok(same_bytes(binary, os.path.join(REPO, "build", "unclog")), "it is build/unclog")
        proc = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, timeout=30)
        like(proc.stdout.decode(), r"^unclog ", "the installed binary runs")
    ok(os.path.isfile(d(CONF)) and same_bytes(d(CONF), os.path.join(REPO, "conf", "unclog.conf")),
       "the configuration is conf/unclog.conf, verbatim")
    static = os.path.join(REPO, "static")
    is_(files_under(d(SHARE + "/static")), files_under(static),
        "every file of static/ is installed under DATADIR/unclog/static")
    ok(os.path.isfile(d(SHARE + "/static/index.html")), "static/index.html is there")
    ok(all(same_bytes(os.path.join(static, f), d(SHARE + "/static/" + f))
           for f in files_under(static) if os.path.isfile(d(SHARE + "/static/" + f))),
       "with the same bytes")
    ok(os.path.isfile(d(MAN)), "the man page is installed in man1")
    if os.path.isfile(d(MAN)):
        check_man(d(MAN), options, keys, routes, classes)
    ok(os.path.isfile(d(UNIT)), "the unit is installed in lib/systemd/system")
    if os.path.isfile(d(UNIT)):
        check_unit(d(UNIT), dest)

    # An edited configuration is the administrator's: install keeps it, and
    # so does uninstall.
    with open(d(CONF), "a") as f:
        f.write("partition = 4k  # edited\n")
    status, out = make("install", "DESTDIR=" + dest, "PREFIX=" + PREFIX)
    is_(status, 0, "a second make install exits 0")
    like(open(d(CONF)).read(), r"# edited", "make install keeps an edited configuration")
    status, out = make("uninstall", "DESTDIR=" + dest, "PREFIX=" + PREFIX)
    is_(status, 0, "make uninstall exits 0")
    is_(files_under(dest), [CONF[1:]], "uninstall leaves the edited configuration alone")
    os.unlink(d(CONF))

    status, out = make("install", "DESTDIR=" + dest, "PREFIX=" + PREFIX)
    is_(status, 0, "make install again")
    status, out = make("uninstall", "DESTDIR=" + dest, "PREFIX=" + PREFIX)
    is_(status, 0, "make uninstall exits 0")
    is_(files_under(dest), [], "after uninstall no file is left under DESTDIR")
    for p in (SHARE, os.path.dirname(CONF)):
        ok(not os.path.exists(d(p)), "uninstall removed the directory %s" % p)

    # PREFIX=/usr puts the configuration in /etc (dry run: nothing is made).
    status, out = make("-n", "install", "DESTDIR=/nonexistent", "PREFIX=/usr")
    like(out, r"/nonexistent/etc/unclog/unclog\.conf", "PREFIX=/usr: SYSCONFDIR is /etc")
    like(out, r"/nonexistent/usr/bin/unclog", "PREFIX=/usr: BINDIR is /usr/bin")

    if not os.environ.get("UNCLOG_KEEP_TMP"):
        shutil.rmtree(dest, ignore_errors=True)
    else:
        note("kept %s" % dest)


run(main)
