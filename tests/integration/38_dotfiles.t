#!/usr/bin/env python3
# Hidden names: by default any path with a segment starting with '.' is 404,
# however it is spelled (percent-encoded, reached through "..", HEAD), and
# listings leave such names out; /.well-known/ (RFC 8615) is served.
# --dotfiles on serves and lists them like any other name.
import html.parser

from harness import Server, is_, ok, run

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
        is_(listed(srv, "/"), ["...x", ".env", ".git/", ".well-known/", ".well-knownx", "a/",
                                 "visible.txt"],
            "dotfiles on: listing of / shows every name")
        is_(listed(srv, "/a/"), [".htaccess", "visible.txt"], "dotfiles on: listing of /a/")


def main():
    hidden_by_default()
    served_with_dotfiles_on()


run(main)
