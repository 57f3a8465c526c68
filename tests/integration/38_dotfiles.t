#!/usr/bin/env python3
# Hidden names: by default any path with a segment starting with '.' is 404,
# however it is spelled (percent-encoded, reached through "..", HEAD), and
# listings leave such names out; /.well-known/ (RFC 8615) is served.
# A symlink is judged by where it leads, not by its name: a link to .env,
# or through a link to .git/, is 404 as .env is, links to links too, with
# the file cache and loop reads on or off, and a listing leaves such links
# out. --dotfiles on serves and lists them like any other name.
import gzip
import html.parser
import os
import signal

from harness import Server, is_, ok, poll, run

FILES = {
    ".env": b"SECRET=env\n",
    ".git/config": b"[core] secret\n",
    ".git/HEAD": b"ref: refs/heads/secret\n",
    "a/.htaccess": b"secret htaccess\n",
    "a/visible.txt": b"visible\n",
    ".well-known/security.txt": b"Contact: mailto:sec@example.org\n",
    ".well-known/.hidden": b"secret inside well-known\n",
    "visible.txt": b"root file\n",
    "...x": b"secret dots\n",
    ".well-knownx": b"secret lookalike\n",
    ".x.gz": gzip.compress(b"secret gzip\n"),
}
HIDDEN = ["/.env", "/.git/config", "/.git/HEAD", "/.git/", "/.git", "/a/.htaccess",
          "/%2eenv", "/%2Egit/config", "/a/%2ehtaccess", "/a/../.env", "/./.env", "//.env",
          "/.well-known/.hidden", "/.well-knownx", "/...x", "/.env?x=1"]
SERVED = {"/visible.txt": FILES["visible.txt"], "/a/visible.txt": FILES["a/visible.txt"],
          "/.well-known/security.txt": FILES[".well-known/security.txt"],
          "/%2Ewell-known/security.txt": FILES[".well-known/security.txt"]}


class Names(html.parser.HTMLParser):
    """The text of every link of a listing but the parent's."""

    def __init__(self):
        super().__init__()
        self.names, self.in_a = [], False

    def handle_starttag(self, tag, attrs):
        self.in_a = tag == "a" and dict(attrs).get("href") != "../"

    def handle_endtag(self, tag):
        self.in_a = False

    def handle_data(self, data):
        if self.in_a:
            self.names.append(data)


def listed(srv, target):
    resp = srv.get(target)
    is_(resp.status, 200, "GET %s: a listing" % target)
    parser = Names()
    parser.feed(resp.body.decode("utf-8"))
    return sorted(parser.names)


def hidden_by_default():
    with Server(files=FILES, args=["--listing", "on"], name="server, dotfiles off") as srv:
        for target in HIDDEN:
            for method in ("GET", "HEAD"):
                resp = srv.request(method, target)
                is_(resp.status, 404, "%s %s: 404" % (method, target))
                ok(b"secret" not in resp.body.lower(), "%s %s: nothing of it" % (method, target))
        for target, body in SERVED.items():
            is_((srv.get(target).status, srv.get(target).body), (200, body),
                "GET %s: served" % target)
        # twice: the file cache does not serve what the first refused
        is_(srv.get("/.env").status, 404, "GET /.env again: 404")
        is_(listed(srv, "/"), [".well-known/", "a/", "visible.txt"],
            "listing of /: no hidden name, .well-known/ shown")
        is_(listed(srv, "/a/"), ["visible.txt"], "listing of /a/: .htaccess left out")
        is_(listed(srv, "/.well-known/"), ["security.txt"],
            "listing of /.well-known/: its hidden name left out")


def served_with_dotfiles_on():
    with Server(files=FILES, args=["--listing", "on", "--dotfiles", "on"],
                name="server, --dotfiles on") as srv:
        for target, name in (("/.env", ".env"), ("/.git/config", ".git/config"),
                             ("/a/.htaccess", "a/.htaccess"), ("/%2eenv", ".env"),
                             ("/.well-known/.hidden", ".well-known/.hidden")):
            resp = srv.get(target)
            is_((resp.status, resp.body), (200, FILES[name]), "dotfiles on: GET %s" % target)
        is_(listed(srv, "/"), ["...x", ".env", ".git/", ".well-known/", ".well-knownx", ".x.gz", "a/",
                                 "visible.txt"],
            "dotfiles on: listing of / shows every name")
        is_(listed(srv, "/a/"), [".htaccess", "visible.txt"], "dotfiles on: listing of /a/")


# name -> target, relative to the link's directory ("outside" is added
# by with_links: a hidden file outside the root).
LINKS = {
    "env_link": ".env",
    "gitdir": ".git",
    "chain1": "chain2",
    "chain2": "env_link",
    "gitchain": "gitdir",
    "dotted": "./a/.././.env",
    "deep/config_link": "../.git/config",
    "a/up": "../.env",
    "site/index.html": "../.env",
    "visible.txt.gz": ".x.gz",
    "visible_link": "visible.txt",
    "visible_chain": "visible_link",
    "adir": "a",
    "wk_link": ".well-known/security.txt",
}
# Each refused as its target is: 404.
LINKED_HIDDEN = ["/env_link", "/gitdir/config", "/gitdir/HEAD", "/gitdir/", "/gitdir",
                 "/chain1", "/chain2", "/gitchain/config", "/gitchain/", "/dotted",
                 "/deep/config_link", "/a/up", "/adir/up", "/visible.txt.gz", "/env_link?x=1",
                 "/site/index.html"]
LINKED_SERVED = {"/visible_link": FILES["visible.txt"], "/visible_chain": FILES["visible.txt"],
                 "/adir/visible.txt": FILES["a/visible.txt"],
                 "/wk_link": FILES[".well-known/security.txt"]}
# What the refused targets hold, with dotfiles on.
LINKED_BODIES = {"/env_link": FILES[".env"], "/gitdir/config": FILES[".git/config"],
                 "/chain1": FILES[".env"], "/gitchain/config": FILES[".git/config"],
                 "/dotted": FILES[".env"], "/deep/config_link": FILES[".git/config"],
                 "/a/up": FILES[".env"], "/adir/up": FILES[".env"]}


def with_links(name, args=(), conf=None):
    srv = Server(files=FILES, args=args, conf=conf, name=name)
    for link, target in LINKS.items():
        srv.symlink(link, target)
    secret = os.path.join(srv.tmp, "outside", ".secret")
    os.makedirs(os.path.dirname(secret))
    with open(secret, "wb") as f:
        f.write(b"secret outside\n")
    srv.symlink("outside", secret)
    return srv


def refused(srv, target, status, what):
    """Every way to ask for TARGET gets STATUS and none of its bytes."""
    asks = [("GET", {}), ("HEAD", {}), ("GET", {"Range": "bytes=0-3"}),
            ("GET", {"If-None-Match": "*"}), ("GET", {"Accept-Encoding": "gzip"})]
    for _ in range(2):  # the second finds what a cache kept of the first
        for method, headers in asks:
            resp = srv.request(method, target, headers=headers)
            is_(resp.status, status, "%s: %s %s %s" % (what, method, target, headers or ""))
            ok(b"secret" not in resp.body.lower(), "%s: %s %s: none of it" % (what, method, target))


def links_judged_by_target():
    for cache in ("on", "off"):
        for loop in ("on", "off"):
            what = "file cache %s, loop reads %s" % (cache, loop)
            args = ["--listing", "on", "--file-cache", cache, "--loop-reads", loop]
            with with_links(what, args) as srv:
                for target in LINKED_HIDDEN:
                    refused(srv, target, 404, what)
                refused(srv, "/outside", 403, what)  # outside the root
                for _ in range(2):
                    for target, body in LINKED_SERVED.items():
                        resp = srv.get(target)
                        is_((resp.status, resp.body), (200, body), "%s: GET %s" % (what, target))
                # visible.txt.gz is a link to a hidden file: not its gzip variant
                resp = srv.get("/visible.txt", headers={"Accept-Encoding": "gzip"})
                is_((resp.status, resp.header("Content-Encoding"), resp.body),
                    (200, None, FILES["visible.txt"]),
                    "%s: GET /visible.txt, gzip accepted: not the hidden .gz" % what)
                is_(listed(srv, "/"), [".well-known/", "a/", "adir/", "deep/", "outside",
                                         "site/", "visible.txt", "visible_chain",
                                         "visible_link", "wk_link"],
                    "%s: listing of /: no link to a hidden name" % what)
                is_(listed(srv, "/adir/"), ["visible.txt"],
                    "%s: listing of /adir/: its link to ../.env left out" % what)
                is_(listed(srv, "/deep/"), [], "%s: listing of /deep/: empty" % what)
                # its index.html is a link to .env: as if absent
                resp = srv.get("/site/")
                is_((resp.status, b"Index of /site/" in resp.body, b"secret" in resp.body),
                    (200, True, False), "%s: /site/: a listing, not its index.html" % what)
                is_(listed(srv, "/site/"), [], "%s: listing of /site/: empty" % what)


def links_served_with_dotfiles_on():
    args = ["--listing", "on", "--dotfiles", "on"]
    with with_links("links, --dotfiles on", args) as srv:
        for _ in range(2):
            for target, body in dict(LINKED_BODIES, **LINKED_SERVED).items():
                resp = srv.get(target)
                is_((resp.status, resp.body), (200, body), "dotfiles on: GET %s" % target)
        resp = srv.get("/visible.txt", headers={"Accept-Encoding": "gzip"})
        is_((resp.header("Content-Encoding"), gzip.decompress(resp.body)),
            ("gzip", b"secret gzip\n"), "dotfiles on: visible.txt.gz, a link to .x.gz, sent")
        names = listed(srv, "/")
        ok(all(n in names for n in ["env_link", "gitdir/", "chain1", "dotted"]),
           "dotfiles on: links to hidden names listed", repr(names))
        is_(listed(srv, "/gitdir/"), ["HEAD", "config"], "dotfiles on: listing of /gitdir/")


def reload_to_off():
    """Served and cached with dotfiles on; after a reload to off, the cached
    body of a link to .env is not served."""
    conf = {"dotfiles": "on", "file_cache": "on"}
    with with_links("reload to dotfiles off", conf=conf) as srv:
        for _ in range(2):
            for target in ("/env_link", "/gitdir/config"):
                is_(srv.get(target).status, 200, "dotfiles on: GET %s" % target)
        ok(srv.stats()["file_cache"]["hits"] >= 2, "dotfiles on: the second GETs hit the cache")
        with open(srv.conf_path, "w") as f:
            f.write("dotfiles = off\nfile_cache = on\n")
        before = srv.stderr().count("reload")
        srv.send_signal(signal.SIGHUP)
        poll(lambda: srv.stderr().count("reload") > before)
        for target in ("/env_link", "/gitdir/config", "/.env"):
            resp = srv.get(target)
            is_((resp.status, b"secret" in resp.body.lower()), (404, False),
                "after the reload to dotfiles off: GET %s: 404" % target)


def main():
    hidden_by_default()
    served_with_dotfiles_on()
    links_judged_by_target()
    links_served_with_dotfiles_on()
    reload_to_off()


run(main)
