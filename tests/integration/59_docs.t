#!/usr/bin/env python3
# Docs that cannot drift (docs/testing.md, "Docs that cannot drift"): what
# the docs say against what the binary and the tree are, at test time.
#   - docs/reference.md's keys table against `unclog --keys` (names and
#     defaults), its list of live keys and docs/operations.md's list of
#     restart-only keys against --keys' third column, and conf/unclog.conf
#     showing every key;
#   - docs/reference.md's endpoints table against `unclog --routes`;
#   - every source file named in docs/DESIGN.md's room tree, under its own
#     directory there, and every .c on a line of its own there, once;
#   - docs/DESIGN.md at most 350 lines, and it and docs/design/*.md free of
#     measured figures and change history (those live in docs/results.md
#     and git);
#   - every command of README.md's sh blocks run by .ci/run or a test;
#   - every relative link of README.md, docs/*.md and docs/design/*.md
#     naming a file.
import glob
import os
import re

from harness import REPO, is_, ok, run, run_bin


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The lines of TEXT under the markdown heading HEADING, up to the next
    heading of the same or a higher level ("" when there is none)."""
    m = re.search(r"^(#+) %s\s*$" % re.escape(heading), text, re.M)
    if not m:
        return ""
    level = len(m.group(1))
    rest = text[m.end():]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return rest[:end.start()] if end else rest


def table_rows(text):
    """The cells of every row of the markdown tables in TEXT, header and
    separator rows left out."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.match(r"^\|[-| ]+\|$", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(cells)
    return rows[1:] if rows else rows  # the first row of a table is its header


def unquote(cell):
    m = re.fullmatch(r"`([^`]*)`", cell)
    return m.group(1) if m else cell


def check_keys():
    status, out, err = run_bin(["--keys"])
    is_(status, 0, "unclog --keys exits 0")
    binary, whens = {}, {}
    for line in out.splitlines():
        name, default, when = line.split("\t")
        binary[name] = default
        whens.setdefault(when, set()).add(name)
    ok(len(binary) > 30, "--keys lists the keys (%d)" % len(binary), out)
    rows = table_rows(section(read("docs/reference.md"), "Configuration keys"))
    doc = {unquote(r[0]): unquote(r[1]) for r in rows if len(r) >= 3}
    is_(sorted(set(binary) - set(doc)), [], "every key of --keys has a row in docs/reference.md")
    is_(sorted(set(doc) - set(binary)), [], "docs/reference.md has a row only for keys that exist")
    wrong = ["%s: doc %r, binary %r" % (k, doc[k], v) for k, v in binary.items()
             if k in doc and doc[k] != v]
    is_(wrong, [], "docs/reference.md gives each key the binary's default")
    m = re.search(r"\*\*Live settings\.\*\*(.*?)can change\s+while the server runs",
                  read("docs/reference.md"), re.S)
    is_(sorted(re.findall(r"`(\w+)`", m.group(1)) if m else []), sorted(whens.get("live", ())),
        "docs/reference.md's live settings are the live keys of --keys")
    m = re.search(r"except (.*?),\s+which\s+need\s+a\s+restart", read("docs/operations.md"), re.S)
    is_(sorted(re.findall(r"`(\w+)`", m.group(1)) if m else []), sorted(whens.get("restart", ())),
        "docs/operations.md's restart-only keys are those of --keys")
    conf = read("conf/unclog.conf")
    missing = [k for k in binary if not re.search(r"^#? ?%s = " % re.escape(k), conf, re.M)]
    is_(missing, [], "conf/unclog.conf sets or shows every key")


def check_routes():
    status, out, err = run_bin(["--routes"])
    is_(status, 0, "unclog --routes exits 0")
    binary = {}
    for line in out.splitlines():
        path, methods = line.split(" ", 1)
        binary["/path" if path == "*" else path] = {m.strip() for m in methods.split(",")}
    rows = table_rows(section(read("docs/reference.md"), "Endpoints"))
    doc = {}
    for r in rows:
        m = re.search(r"(?<= )(/[^\s`?]*)", r[0])
        if m:
            doc[m.group(1)] = set(re.findall(r"\b[A-Z]{3,7}\b", r[0]))
    is_(sorted(set(binary) - set(doc)), [],
        "every route of --routes has a row in docs/reference.md")
    is_(sorted(set(doc) - set(binary)), [],
        "docs/reference.md has a row only for routes that exist")
    wrong = ["%s: doc %s, allowed %s" % (p, sorted(doc[p]), sorted(binary[p]))
             for p in binary if p in doc and (not doc[p] or doc[p] - binary[p])]
    is_(wrong, [], "each row names methods its route allows")


TREE_GLYPHS = "│├└─ "


def design_tree():
    """docs/DESIGN.md's room tree as {directory: its text}: a line whose
    first word ends with / opens a room (at column 0 a top one, else one
    inside the last top one); the other lines belong to the last room
    opened; main.c's line is the room "." ."""
    body = section(read("docs/DESIGN.md"), "Rooms and layering")
    m = re.search(r"```\n(.*?)```", body, re.S)
    rooms, top, cur = {}, None, None
    for line in (m.group(1) if m else "").splitlines():
        stripped = line.lstrip(TREE_GLYPHS)
        word = stripped.split(" ", 1)[0] if stripped else ""
        text = stripped[len(word):]
        if word.endswith("/"):
            if line[0] not in TREE_GLYPHS:
                top = cur = word.rstrip("/")
            else:
                cur = "%s/%s" % (top, word.rstrip("/"))
            rooms.setdefault(cur, "")
            rooms[cur] += text + "\n"
        elif line and line[0] not in TREE_GLYPHS and word:
            cur = "."
            rooms[cur] = rooms.get(cur, "") + stripped + "\n"
        elif cur is not None:
            rooms[cur] += stripped + "\n"
    return rooms


def check_design_tree():
    rooms = design_tree()
    ok("server" in rooms and "handlers" in rooms, "docs/DESIGN.md has a room tree",
       sorted(rooms))
    files = ["main.c"]
    for top in ("server", "handlers"):
        for d, _, names in os.walk(os.path.join(REPO, top)):
            files += [os.path.relpath(os.path.join(d, n), REPO) for n in names
                      if n.endswith((".c", ".h"))]
    missing = []
    for f in sorted(files):
        d, name = os.path.split(f)
        stem = name.rsplit(".", 1)[0]
        text = rooms.get(d or ".", "")
        if not re.search(r"(?<![\w/.-])%s(?:\.[ch])?(?=[\s,;:()]|$)" % re.escape(stem), text,
                         re.M):
            missing.append(f)
    is_(missing, [], "docs/DESIGN.md's room tree names every source file (%d) in its room"
        % len(files))
    # Each .c has a line of its own (its name first, then its one job), once.
    lines = {}
    for d, text in rooms.items():
        for line in text.splitlines():
            word = line.split(" ", 1)[0]
            if word.endswith(".c"):
                key = os.path.normpath(os.path.join("" if d == "." else d, word))
                lines[key] = lines.get(key, 0) + 1
    sources = [f for f in files if f.endswith(".c")]
    wrong = ["%s: %d lines" % (f, lines.get(f, 0)) for f in sorted(sources) if lines.get(f) != 1]
    wrong += ["%s: no such file" % f for f in sorted(set(lines) - set(sources))]
    is_(wrong, [], "docs/DESIGN.md's room tree gives each .c (%d) one line of its own"
        % len(sources))


# A measured figure: a number with a unit of time, rate or ratio (sizes such
# as 256 KiB are thresholds of the code, not measurements).
FIGURE = re.compile(r"\b\d[\d.,]*\s?(?:ms|µs|ns|MB/s|GB/s|Mbit/s|req/s|%|×)(?!\w)")
# History: what the code did before, or when something changed.
HISTORY = re.compile(r"\b(?:no longer|as before|used to|any ?more|since then|before (?:that|this) "
                     r"change|issue #?\d+)\b", re.I)


def check_design_size():
    design = read("docs/DESIGN.md")
    n = len(design.splitlines())
    ok(n <= 350, "docs/DESIGN.md is at most 350 lines (%d)" % n)
    notes = sorted(os.path.relpath(p, REPO)
                   for p in glob.glob(os.path.join(REPO, "docs", "design", "*.md")))
    found = []
    for rel in ["docs/DESIGN.md"] + notes:
        for i, line in enumerate(read(rel).splitlines(), 1):
            for pattern, what in ((FIGURE, "figure"), (HISTORY, "history")):
                m = pattern.search(line)
                if m:
                    found.append("%s:%d: %s %r" % (rel, i, what, m.group(0)))
    is_(found, [], "docs/DESIGN.md and docs/design/*.md (%d) hold no measured figure and no "
        "history" % len(notes))


def readme_commands():
    cmds = []
    for block in re.findall(r"^```sh\n(.*?)^```", read("README.md"), re.S | re.M):
        for line in block.splitlines():
            cmd = " ".join(re.sub(r"\s#.*$", "", line).split())
            if cmd and not cmd.startswith("#"):
                cmds.append(cmd)
    return cmds


def check_readme_commands():
    cmds = readme_commands()
    ok("make deps run" in cmds and "make deps test" in cmds,
       "the README's sh blocks hold its two commands", cmds)
    ci = [line for line in read(".ci/run").splitlines() if not line.lstrip().startswith("#")]
    tests = []
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "**", "*"), recursive=True)):
        if os.path.isfile(path) and path.endswith((".t", ".py")) \
                and os.path.basename(path) != "59_docs.t":
            with open(path, encoding="utf-8", errors="replace") as f:
                tests.append(f.read())
    unrun = []
    for cmd in cmds:
        in_ci = re.compile(r"""(?:^|[\s"'])%s(?:$|[\s"';])""" % re.escape(cmd))
        in_test = re.compile(r"""["']%s["'\s]""" % re.escape(cmd))
        if not any(in_ci.search(line) for line in ci) and not any(in_test.search(t) for t in tests):
            unrun.append(cmd)
    is_(unrun, [], "every command of the README (%d) is run by .ci/run or a test" % len(cmds))


def check_links():
    broken = []
    docs = glob.glob(os.path.join(REPO, "docs", "*.md")) + \
        glob.glob(os.path.join(REPO, "docs", "design", "*.md"))
    for rel in ["README.md"] + sorted(os.path.relpath(p, REPO) for p in docs):
        for target in re.findall(r"\]\(([^)\s]+)\)", read(rel)):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(REPO, os.path.dirname(rel),
                                                 target.split("#", 1)[0]))
            if not os.path.exists(path):
                broken.append("%s: %s" % (rel, target))
    is_(broken, [], "every relative link of README.md, docs/*.md and docs/design/*.md names a file")


def main():
    check_keys()
    check_routes()
    check_design_tree()
    check_design_size()
    check_readme_commands()
    check_links()
    ok(len(read("README.md").splitlines()) <= 300, "README.md is at most 300 lines")


run(main)
