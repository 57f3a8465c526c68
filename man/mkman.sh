#!/bin/sh
# man/mkman.sh BIN TEMPLATE: writes the man page to standard output.
#
# TEMPLATE is roff (man macros). @VERSION@ becomes BIN's version, @DATE@ the
# day of $SOURCE_DATE_EPOCH (else of TEMPLATE's mtime), @CLASSES@ the job
# classes of `BIN --job-classes` ("open, read, ... and cache"), each line
#     .\" @ROUTE PATH
# the tag of the route PATH of `BIN --routes` (its methods and path; "*" is
# the fallback, shown as /path), above the description that follows it, and
# the marker lines
#     .\" @OPTIONS@     .\" @KEYS@
# one entry per key of `BIN --help`, as an option and as a configuration
# key, so the page cannot drift from --help (its entries joined back into
# one line each first). A route of the binary without
# a @ROUTE line, or a @ROUTE line for no route, fails: every endpoint is
# described, and only those that exist. Such a line of --help reads
#       --gzip-partition SIZE|whole  input bytes deflated per ... (default 64k)
# that is: the flag, one argument word ('quoted' if it has spaces), the help
# text and a final parenthesised part, "default VALUE" and anything after a
# "; " (e.g. "; restart only: a reload keeps it"). Lines "  -x, --long ARG  text" not
# already in TEMPLATE are added to the options too. Fails, printing nothing,
# when --help lists no key, a marker is missing or the routes disagree.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN TEMPLATE" >&2
    exit 2
fi
bin=$1
template=$2

help=$("$bin" --help) || { echo "$0: $bin --help failed" >&2; exit 1; }
# --help gives each option a head line and its description wrapped below it,
# indented ten columns: one line per option again, as the parser reads it.
help=$(printf '%s\n' "$help" | awk '
/^          [^ ]/ && head != "" {
    sub(/^ +/, "")
    head = head (joined ? " " : "  ") $0
    joined = 1
    next
}
{
    if (head != "")
        print head
    head = ""
    joined = 0
}
/^(  -[A-Za-z], |      )--/ { head = $0; next }
{ print }
END { if (head != "") print head }')
routes=$("$bin" --routes) || { echo "$0: $bin --routes failed" >&2; exit 1; }
classes=$("$bin" --job-classes) || { echo "$0: $bin --job-classes failed" >&2; exit 1; }
version=$("$bin" --version | awk '{ print $2; exit }')
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$template")}" +%Y-%m-%d)

printf '%s\n' "$help" | MKMAN_ROUTES="$routes" MKMAN_CLASSES="$classes" \
    awk -v version="$version" -v date="$date" '
# Roff-escapes plain text: backslashes and hyphens (\- is the ASCII one).
function esc(s,    out, c, i) {
    out = ""
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\")
            c = "\\e"
        else if (c == "-")
            c = "\\-"
        out = out c
    }
    return out
}

# A text line must not start with a control character (. or \x27).
function textline(s) {
    return (s ~ /^[.\047]/ ? "\\&" : "") s
}

# An argument such as SIZE|whole: placeholders (with capitals) in italics,
# literal words in bold. With unquote, drop the shell quotes of \x27A B\x27.
function argfmt(a, unquote,    n, alt, i, out) {
    if (unquote && a ~ /^\047.*\047$/)
        a = substr(a, 2, length(a) - 2)
    n = split(a, alt, "|")
    out = ""
    for (i = 1; i <= n; i++)
        out = out (i > 1 ? "|" : "") (alt[i] ~ /[A-Z]/ ? "\\fI" : "\\fB") esc(alt[i]) "\\fR"
    return out
}

# The description of key i: its help, then its final parenthesised part,
# with the value after "default " in bold.
function describe(i,    p, v, rest, n) {
    p = kparen[i]
    if (p != "" && substr(p, 1, 8) == "default ") {
        v = substr(p, 9)
        rest = ""
        n = index(v, "; ")
        if (n > 0) {
            rest = substr(v, n)
            v = substr(v, 1, n - 1)
        }
        p = "default \\fB" esc(v) "\\fR" esc(rest)
    } else if (p != "") {
        p = esc(p)
    }
    return sentence(esc(khelp[i]) (p != "" ? " (" p ")" : ""))
}

# Help text on a line of its own, verbatim (it may start with a name such
# as libuv or gzip), ending with a full stop.
function sentence(s) {
    return textline(s (s ~ /[.]$/ ? "" : "."))
}

function emit_options(    i) {
    for (i = 1; i <= nshort; i++) {
        if (index(tmpl, "\\-\\-" esc(slong[i])) > 0)
            continue
        print ".TP"
        print "\\fB" esc(sshort[i]) "\\fR, \\fB\\-\\-" esc(slong[i]) "\\fR" \
              (sarg[i] != "" ? " " argfmt(sarg[i], 0) : "")
        print sentence(esc(shelp[i]))
    }
    for (i = 1; i <= nk; i++) {
        print ".TP"
        print "\\fB\\-\\-" esc(kname[i]) "\\fR" (karg[i] != "" ? " " argfmt(karg[i], 0) : "")
        print describe(i)
    }
}

function emit_keys(    i, key) {
    for (i = 1; i <= nk; i++) {
        if (karg[i] == "")
            continue  # an option without a value is no configuration key
        key = kname[i]
        gsub(/-/, "_", key)
        print ".TP"
        print "\\fB" esc(key) "\\fR = " argfmt(karg[i], 1)
        print describe(i)
    }
}

# S with every FROM replaced by TO, taken literally (gsub would read the
# backslashes of roff in TO).
function replace(s, from, to,    out, n) {
    out = ""
    while ((n = index(s, from)) > 0) {
        out = out substr(s, 1, n - 1) to
        s = substr(s, n + length(from))
    }
    return out s
}

# The tag of route i: its methods in bold, then its path (the fallback is
# any /path).
function route_tag(i,    n, m, k, out) {
    n = split(rmethods[i], m, /, */)
    out = ""
    for (k = 1; k <= n; k++)
        out = out (k > 1 ? ", " : "") "\\fB" m[k] "\\fR"
    return out " " (rpath[i] == "*" ? "\\fI/path\\fR" : "\\fB" esc(rpath[i]) "\\fR")
}

BEGIN {
    nr = split(ENVIRON["MKMAN_ROUTES"], lines, "\n")
    for (i = 1; i <= nr; i++) {
        n = index(lines[i], " ")
        rpath[i] = substr(lines[i], 1, n - 1)
        rmethods[i] = substr(lines[i], n + 1)
        route_of[rpath[i]] = i
    }
    n = split(ENVIRON["MKMAN_CLASSES"], cls, "\n")
    classes = ""
    for (i = 1; i <= n; i++)
        classes = classes (i == 1 ? "" : i == n ? " and " : ", ") "\\fB" cls[i] "\\fR"
}

# ---- first file: the --help text -------------------------------------------
FNR == NR && /^  -[A-Za-z], --[A-Za-z0-9]/ {
    # "  -c, --config FILE          text": the text follows two or more spaces.
    s = substr($0, 3)
    n = index(s, "  ")
    left = n > 0 ? substr(s, 1, n - 1) : s
    right = n > 0 ? substr(s, n) : ""
    sub(/^ +/, "", right)
    nshort++
    sshort[nshort] = substr(left, 1, 2)
    left = substr(left, 7)
    n = index(left, " ")
    slong[nshort] = n > 0 ? substr(left, 1, n - 1) : left
    sarg[nshort] = n > 0 ? substr(left, n + 1) : ""
    shelp[nshort] = right
    next
}
FNR == NR && /^ +--[A-Za-z0-9]/ {
    s = $0
    sub(/^ +/, "", s)
    sub(/ +$/, "", s)
    n = index(s, " ")
    if (n == 0)
        next
    name = substr(s, 3, n - 3)
    s = substr(s, n + 1)
    # The argument: one word, or a quoted string; a word with neither a
    # capital nor a | is the start of the help of an option without one.
    arg = ""
    if (substr(s, 1, 1) == "\047" && (n = index(substr(s, 2), "\047")) > 0) {
        arg = substr(s, 1, n + 1)
        s = substr(s, n + 2)
    } else {
        n = index(s, " ")
        word = n > 0 ? substr(s, 1, n - 1) : s
        if (word ~ /[A-Z|]/) {
            arg = word
            s = n > 0 ? substr(s, n + 1) : ""
        }
    }
    sub(/^ +/, "", s)
    # The final parenthesised part, whatever it contains (nested too).
    paren = ""
    if (s ~ /\)$/) {
        depth = 0
        for (i = length(s); i > 0; i--) {
            c = substr(s, i, 1)
            if (c == ")")
                depth++
            else if (c == "(" && --depth == 0)
                break
        }
        if (i > 0) {
            paren = substr(s, i + 1, length(s) - i - 1)
            s = substr(s, 1, i - 1)
            sub(/ +$/, "", s)
        }
    }
    nk++
    kname[nk] = name
    karg[nk] = arg
    khelp[nk] = s
    kparen[nk] = paren
    next
}
FNR == NR { next }

# ---- second file: the template, kept until the end ----------------------------
{
    nt++
    line[nt] = $0
    tmpl = tmpl $0 "\n"
}

END {
    if (nk == 0) {
        print "mkman.sh: no --KEY lines in the --help text" > "/dev/stderr"
        exit 1
    }
    if (index(tmpl, "\n.\\\" @OPTIONS@\n") == 0 || index(tmpl, "\n.\\\" @KEYS@\n") == 0) {
        print "mkman.sh: the template lacks a @OPTIONS@ or @KEYS@ marker line" > "/dev/stderr"
        exit 1
    }
    if (nr == 0 || classes == "" || index(tmpl, "@CLASSES@") == 0) {
        print "mkman.sh: no routes, no job classes or no @CLASSES@ in the template" > "/dev/stderr"
        exit 1
    }
    bad = 0
    for (i = 1; i <= nt; i++) {
        if (substr(line[i], 1, 11) != ".\\\" @ROUTE ")
            continue
        p = substr(line[i], 12)
        if (!(p in route_of)) {
            print "mkman.sh: the template describes " p ", which the binary does not route" > "/dev/stderr"
            bad = 1
        }
        described[p] = 1
    }
    for (i = 1; i <= nr; i++) {
        if (!(rpath[i] in described)) {
            print "mkman.sh: the route " rpath[i] " (" rmethods[i] ") has no \".\\\" @ROUTE " \
                  rpath[i] "\" description in the template" > "/dev/stderr"
            bad = 1
        }
    }
    if (bad)
        exit 1
    for (i = 1; i <= nt; i++) {
        s = line[i]
        if (s == ".\\\" @OPTIONS@") {
            emit_options()
            continue
        }
        if (s == ".\\\" @KEYS@") {
            emit_keys()
            continue
        }
        if (substr(s, 1, 11) == ".\\\" @ROUTE ") {
            print ".TP"
            print route_tag(route_of[substr(s, 12)])
            continue
        }
        s = replace(s, "@CLASSES@", classes)
        gsub(/@VERSION@/, version, s)
        gsub(/@DATE@/, date, s)
        print s
    }
}
' - "$template"
