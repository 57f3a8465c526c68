#!/usr/bin/env python3
# Framing and smuggling: every request whose length or boundaries two
# parsers could read differently gets 400 (505 for an unsupported version)
# and a close, and the request smuggled behind it is never answered. llhttp
# runs in strict mode; unclog adds the checks llhttp 8.1 lacks (bare LF,
# CR + any byte, obs-fold, junk after chunk data, Transfer-Encoding other
# than chunked, HTTP/1.0 with Transfer-Encoding, missing or repeated Host,
# spaces in field names, RTSP/ICE protocols, targets neither origin- nor
# absolute-form, chunk extensions outside the RFC's grammar, white space
# inside a Host or a Content-Length). Each case is
# also sent one byte per write. Valid framing that looks odd must still
# work, optional white space around field values (RFC 9110 5.5) and chunk
# extensions of every form the grammar allows among it: on
# POST /gzip, a GET that drops its body, and POST /settings.

from harness import Conn, ProtocolError, Server, exchange, gunzip, is_, ok, run, statuses

FILES = {"x.txt": b"hello", "smuggled.txt": b"SMUGGLED"}
SMUGGLED = b"GET /smuggled.txt HTTP/1.1\r\nHost: a\r\n\r\n"
POST = b"POST /gzip HTTP/1.1\r\nHost: a\r\n"
TE = POST + b"Transfer-Encoding: chunked\r\n\r\n"

BAD = [
    # Content-Length and Transfer-Encoding
    ("CL and TE", POST + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("TE and CL", POST + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"),
    ("two equal Content-Lengths", POST + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
    ("two Content-Lengths", POST + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    ("Content-Length list", POST + b"Content-Length: 5, 5\r\n\r\nhello"),
    ("Content-Length +5", POST + b"Content-Length: +5\r\n\r\nhello"),
    ("Content-Length -1", POST + b"Content-Length: -1\r\n\r\n"),
    ("Content-Length 0x5", POST + b"Content-Length: 0x5\r\n\r\nhello"),
    ("Content-Length empty", POST + b"Content-Length: \r\n\r\n"),
    ("Content-Length overflow", POST + b"Content-Length: 99999999999999999999999\r\n\r\n"),
    ("TE gzip", POST + b"Transfer-Encoding: gzip\r\n\r\n"),
    ("TE gzip, chunked", POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
    ("TE chunked, gzip", POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"),
    ("TE chunked twice", POST + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
    ("two TE lines", POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n"),
    ("TE identity then chunked lines", POST + b"Transfer-Encoding: identity\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("TE chunkedx", POST + b"Transfer-Encoding: chunkedx\r\n\r\n0\r\n\r\n"),
    ("TE with a parameter", POST + b"Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n"),
    ("TE folded", POST + b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"),
    ("TE name with a space", POST + b"Transfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\n"
     b"0\r\n\r\n"),
    ("TE in HTTP/1.0", b"POST /gzip HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    # chunks
    ("chunk size zz", TE + b"zz\r\nhello\r\n0\r\n\r\n"),
    ("chunk size -5", TE + b"-5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size 0x5", TE + b"0x5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size with a space", TE + b"5 \r\nhello\r\n0\r\n\r\n"),
    ("chunk size overflow", TE + b"1ffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    ("empty chunk extension", TE + b"5;\r\nhello\r\n0\r\n\r\n"),
    ("chunk extension with a control byte", TE + b"5;a=\x01\r\nhello\r\n0\r\n\r\n"),
    ("chunk extension with a bare LF", TE + b"5;a\nhello\r\n0\r\n\r\n"),
    # chunk extensions outside RFC 9112 7.1.1's grammar
    ("chunk extension without a value", TE + b"5;a=\r\nhello\r\n0\r\n\r\n"),
    ("chunk extension without a value, then another", TE + b"5;a=;b\r\nhello\r\n0\r\n\r\n"),
    ("last chunk's extension without a value", TE + b"5\r\nhello\r\n0;a=\r\n\r\n"),
    ("chunk extension with a quoted name", TE + b'5;"x"\r\nhello\r\n0\r\n\r\n'),
    ("chunk extension without a name", TE + b"5;=x\r\nhello\r\n0\r\n\r\n"),
    ("unterminated quoted chunk extension", TE + b'5;a="x\r\nhello\r\n0\r\n\r\n'),
    ("quoted chunk extension ending in a backslash", TE + b'5;a="x\\\r\nhello\r\n0\r\n\r\n'),
    ("junk after a quoted chunk extension", TE + b'5;a="x"y\r\nhello\r\n0\r\n\r\n'),
    ("space inside a chunk extension's value", TE + b"5;a=b c\r\nhello\r\n0\r\n\r\n"),
    ("white space ending a chunk-size line", TE + b"5;a=b \r\nhello\r\n0\r\n\r\n"),
    ("DEL in a quoted chunk extension", TE + b'5;a="\x7f"\r\nhello\r\n0\r\n\r\n'),
    ("control byte in a quoted chunk extension", TE + b'5;a="\x01"\r\nhello\r\n0\r\n\r\n'),
    ("bare CR in a chunk extension", TE + b"5;a\rb\r\nhello\r\n0\r\n\r\n"),
    ("bare LF in a quoted chunk extension", TE + b'5;a="x\ny"\r\nhello\r\n0\r\n\r\n'),
    ("bare LF after a chunk extension's value", TE + b"5;a=b\nhello\r\n0\r\n\r\n"),
    ("chunk size line with a bare LF", TE + b"5\nhello\r\n0\r\n\r\n"),
    ("chunk size line ended by CR and a byte", TE + b"5\rXhello\r\n0\r\n\r\n"),
    ("no CRLF after chunk data", TE + b"5\r\nhelloXX0\r\n\r\n"),
    ("CR and a byte after chunk data", TE + b"5\r\nhello\rX0\r\n\r\n"),
    ("bare LF after chunk data", TE + b"5\r\nhello\n0\r\n\r\n"),
    ("last chunk ended by a bare LF", TE + b"0\r\n\n"),
    ("last chunk ended by CR and a byte", TE + b"0\r\n\rX"),
    ("folded trailer", TE + b"0\r\nT: a\r\n b\r\n\r\n"),
    ("trailer with a bare LF", TE + b"0\r\nT: a\n\r\n"),
    ("trailer name with a space", TE + b"0\r\nT x: a\r\n\r\n"),
    # line endings and folding in the head
    ("bare LF after the request line", b"GET /x.txt HTTP/1.1\nHost: a\r\n\r\n"),
    ("bare LF after a header", b"GET /x.txt HTTP/1.1\r\nHost: a\nX: y\r\n\r\n"),
    ("bare LF ending the head", b"GET /x.txt HTTP/1.1\r\nHost: a\r\n\n"),
    ("all bare LFs", b"GET /x.txt HTTP/1.1\nHost: a\n\n"),
    ("bare CR in the request line", b"GET /x.txt HTTP/1.1\rHost: a\r\n\r\n"),
    ("bare CR after a header", b"GET /x.txt HTTP/1.1\r\nHost: a\rX: y\r\n\r\n"),
    ("CR and a byte ending the head", b"GET /x.txt HTTP/1.1\r\nHost: a\r\n\rX"),
    ("bare LF before the request", b"\nGET /x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("obs-fold", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"),
    ("obs-fold with a tab", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n"),
    ("white space before the first header", b"GET /x.txt HTTP/1.1\r\n Host: a\r\n\r\n"),
    # field names and values
    ("NUL in a value", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n"),
    ("control byte in a value", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n"),
    ("DEL in a value", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n"),
    ("ESC in a value", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: \x1b[2J\r\n\r\n"),
    ("NUL in a name", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX\x00Y: b\r\n\r\n"),
    ("space in a name", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX Y: b\r\n\r\n"),
    ("space before the colon", b"GET /x.txt HTTP/1.1\r\nHost : a\r\n\r\n"),
    ("empty name", b"GET /x.txt HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n"),
    ("byte >= 0x80 in a name", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX\xe9: b\r\n\r\n"),
    ("no colon", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX-Y\r\n\r\n"),
    # Host
    ("HTTP/1.1 without Host", b"GET /x.txt HTTP/1.1\r\n\r\n"),
    ("two Host lines", b"GET /x.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    ("empty Host", b"GET /x.txt HTTP/1.1\r\nHost:\r\n\r\n"),
    ("Host with a slash", b"GET /x.txt HTTP/1.1\r\nHost: a/b\r\n\r\n"),
    ("Host with userinfo", b"GET /x.txt HTTP/1.1\r\nHost: u@a\r\n\r\n"),
    ("Host with a space inside", b"GET /x.txt HTTP/1.1\r\nHost: a b\r\n\r\n"),
    ("Host of white space only", b"GET /x.txt HTTP/1.1\r\nHost: \t \r\n\r\n"),
    ("Content-Length 5 5", POST + b"Content-Length: 5 5\r\n\r\nhello"),
    # methods, versions, targets
    ("lower-case method", b"get /x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("unknown method", b"FOO /x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("method with a digit", b"G3T /x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("tab after the method", b"GET\t/x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("HTTP/1.2", b"GET /x.txt HTTP/1.2\r\nHost: a\r\n\r\n"),
    ("HTTP/3.0", b"GET /x.txt HTTP/3.0\r\nHost: a\r\n\r\n"),
    ("lower-case http/1.1", b"GET /x.txt http/1.1\r\nHost: a\r\n\r\n"),
    ("HTTP/1", b"GET /x.txt HTTP/1\r\nHost: a\r\n\r\n"),
    ("RTSP/1.0", b"GET /x.txt RTSP/1.0\r\nHost: a\r\n\r\n"),
    ("ICE/1.0", b"SOURCE /x.txt ICE/1.0\r\nHost: a\r\n\r\n"),
    ("space after the version", b"GET /x.txt HTTP/1.1 \r\nHost: a\r\n\r\n"),
    ("asterisk-form GET", b"GET * HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("asterisk-form OPTIONS", b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("authority-form GET", b"GET a:80 HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("authority-form CONNECT", b"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("relative target", b"GET x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("absolute-form POST", b"POST http://a/gzip HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
    ("absolute-form ftp", b"GET ftp://a/x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("absolute-form with userinfo", b"GET http://u:p@a/x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("absolute-form without authority", b"GET http:///x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("tab in the target", b"GET /x\t.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("control byte in the target", b"GET /x\x01.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("fragment in the target", b"GET /x.txt#f HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ("HTTP/0.9 request with a bare LF", b"GET /x.txt\n\r\n"),
    ("TLS hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 32),
]

UNSUPPORTED = [
    ("HTTP/2.0 request line", b"GET /x.txt HTTP/2.0\r\nHost: a\r\n\r\n"),
    ("HTTP/0.9 request", b"GET /x.txt\r\n\r\n"),
]

# Valid, if unusual: must be served.
GOOD = [
    ("TE chunked with OWS and capitals", POST + b"Transfer-Encoding: \tChunked \r\n\r\n"
     b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
    ("chunk extensions", TE + b"2;c=\"d e\"\r\nhe\r\n3;x\r\nllo\r\n0;end=1\r\n\r\n", b"hello"),
    ("trailers", TE + b"5\r\nhello\r\n0\r\nT-One: 1\r\nT-Two: 2\r\n\r\n", b"hello"),
    ("hex chunk sizes", TE + b"A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n",
     b"0123456789abcdefghij"),
    ("Content-Length with OWS", POST + b"Content-Length: 5 \r\n\r\nhello", b"hello"),
    ("Host and Content-Length with OWS (RFC 9110 5.5)",
     b"POST /gzip HTTP/1.1\r\nHost: a \t\r\nContent-Length:  5  \r\n\r\nhello", b"hello"),
]


# RFC 9112 7.1.1: chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS token / quoted-string ] ),
# ignored by a recipient that does not know them. Each goes on every chunk.
EXTENSIONS = [
    ("two extensions", b";a;b"),
    ("a quoted-pair", b';a="x\\"y"'),
    ("a token value, then another extension", b";a=b;c"),
    ("several, with token and quoted values", b';a=1;b="two";c;d="x\\\\y";e=f'),
    ("white space around ; and =", b" ; a = b ;\tc"),
    ("a quoted string holding ; = and obs-text", b';a="; b=c \xe9"'),
    ("an empty quoted string", b';a=""'),
]
BODY = b"hello world"


def chunked_with(ext):
    """BODY in two chunks, each chunk-size line (the last one's too) with EXT."""
    return (b"5" + ext + b"\r\nhello\r\n6" + ext + b"\r\n world\r\n0" + ext + b"\r\n"
            b"T: 1\r\n\r\n")


def check_bad(srv, desc, raw, status, one_byte_writes):
    pieces = [raw[i:i + 1] for i in range(len(raw))] if one_byte_writes else [raw]
    data, end = exchange(srv.port, pieces + [SMUGGLED])
    how = " (one byte per write)" if one_byte_writes else ""
    is_(statuses(data), [status], "%s%s: %d, and nothing for the request behind it"
        % (desc, how, status))
    ok(b"SMUGGLED" not in data, "%s%s: the smuggled request is not answered" % (desc, how))
    ok(end in ("closed", "reset"), "%s%s: the connection is closed" % (desc, how),
       "ended %s after %r" % (end, data[:200]))


def check_good(srv, desc, raw, body):
    with Conn(srv.port) as c:
        c.send(raw + SMUGGLED)
        first, second = c.read_response(), c.read_response()
    ok(first.status == 200 and gunzip(first.body) == body, "%s: served with the body sent" % desc,
       repr(first))
    is_((second.status, second.body), (200, b"SMUGGLED"), "%s: then the next request" % desc)


def test_valid(srv):
    for desc, raw, body in GOOD:
        check_good(srv, desc, raw, body)
    for desc, raw in (("leading empty line", b"\r\nGET /x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
                      ("absolute-form GET", b"GET http://a/x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
                      ("absolute-form HEAD", b"HEAD HTTPS://a:8/x.txt HTTP/1.1\r\nHost: a\r\n\r\n"),
                      ("HTTP/1.0 without Host", b"GET /x.txt HTTP/1.0\r\n\r\n"),
                      ("IPv6 Host", b"GET /x.txt HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
                      ("Host with a trailing space", b"GET /x.txt HTTP/1.1\r\nHost: a \r\n\r\n"),
                      ("Host with a trailing tab", b"GET /x.txt HTTP/1.1\r\nHost: a\t\r\n\r\n"),
                      ("Host with OWS both sides",
                       b"GET /x.txt HTTP/1.1\r\nHost:\t a \t\r\n\r\n"),
                      ("tab and obs-text in a value",
                       b"GET /x.txt HTTP/1.1\r\nHost: a\r\nX: a\tb\xe9c\r\n\r\n"),
                      ("raw UTF-8 in the target", b"GET /x.txt?caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n"
                       b"\r\n")):
        data, _ = exchange(srv.port, raw.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
        is_(statuses(data), [200], "%s: 200" % desc)


def answers(port, raw, one_byte_writes=False):
    """(status, body) of the two answers to RAW (a body gunzipped when it
    can be), or what went wrong instead."""
    got = []
    with Conn(port) as c:
        for piece in [raw[i:i + 1] for i in range(len(raw))] if one_byte_writes else [raw]:
            c.send(piece)
        try:
            for _ in range(2):
                r = c.read_response()
                gzipped = r.header("Content-Type", "").startswith("application/gzip")
                got.append((r.status, gunzip(r.body) if gzipped else r.body))
        except (OSError, ProtocolError) as e:
            got.append("no answer: %s" % e)
    return got


def test_extensions(srv):
    for desc, ext in EXTENSIONS:
        for one_byte_writes in (False, True):
            how = " (one byte per write)" if one_byte_writes else ""
            is_(answers(srv.port, TE + chunked_with(ext) + SMUGGLED, one_byte_writes),
                [(200, BODY), (200, b"SMUGGLED")],
                "/gzip, chunk extensions: %s%s: the body exact, then the next request"
                % (desc, how))
        # A route that drops the body must still find where it ends.
        raw = (b"GET /x.txt HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
               chunked_with(ext) + SMUGGLED)
        is_(answers(srv.port, raw), [(200, b"hello"), (200, b"SMUGGLED")],
            "GET with a chunked body, chunk extensions: %s: answered, then the next" % desc)


def test_settings_extensions():
    # POST /settings takes its body whole: a form read with the extensions'
    # bytes in it would be refused or set something else.
    with Server(args=["--admin", "on"]) as srv:
        for i, (desc, ext) in enumerate(EXTENSIONS):
            part = "4k" if i % 2 else "8k"
            form = b"partition=" + part.encode() + b"&scheduler=fifo"
            raw = (b"POST /settings HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   b"Content-Type: application/x-www-form-urlencoded\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n" +
                   b"".join(b"%x" % len(piece) + ext + b"\r\n" + piece + b"\r\n"
                            for piece in (form[:7], form[7:])) +
                   b"0" + ext + b"\r\n\r\n")
            got = answers(srv.admin_port,
                          raw + b"GET /settings HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            ok(len(got) == 2 and got[0][0] == 200 and
               b'"partition":"%s"' % part.encode() in got[0][1].replace(b" ", b""),
               "POST /settings, chunk extensions: %s: the form applied" % desc, repr(got))
            is_(srv.stats()["partition"], 4096 if part == "4k" else 8192,
                "POST /settings, chunk extensions: %s: /stats agrees" % desc)


def test_ows(srv):
    # RFC 9110 5.5: the white space around a value is not part of it, for
    # any field the server reads.
    raw = (b"POST /gzip HTTP/1.1\r\nHost: a\r\nExpect: 100-continue \t\r\n"
           b"Content-Length: 5\r\nConnection: close\r\n\r\nhello")
    data, _ = exchange(srv.port, raw)
    is_(statuses(data), [100, 200], "Expect: 100-continue with OWS: 100, then 200")
    raw = b"GET /x.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=1-2\t\r\nConnection: close\r\n\r\n"
    data, _ = exchange(srv.port, raw)
    is_((statuses(data), data.endswith(b"\r\n\r\nel")), ([206], True),
        "Range with a trailing tab: 206 of those bytes")


def test_trailers(srv):
    # RFC 9110 6.5.1: a trailer is not a header. A Range in a trailer must not
    # turn the answer into a 206.
    raw = (b"GET /x.txt HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"3\r\nabc\r\n0\r\nRange: bytes=0-0\r\nHost: evil\r\n\r\n")
    with Conn(srv.port) as c:
        c.send(raw)
        resp = c.read_response()
    is_((resp.status, resp.body), (200, b"hello"), "a Range trailer is not applied")


def main():
    with Server(files=FILES) as srv:
        for desc, raw in BAD:
            check_bad(srv, desc, raw, 400, False)
        for desc, raw in UNSUPPORTED:
            check_bad(srv, desc, raw, 505, False)
        for desc, raw in BAD:
            check_bad(srv, desc, raw, 400, True)
        for desc, raw in UNSUPPORTED:
            check_bad(srv, desc, raw, 505, True)
        test_valid(srv)
        test_extensions(srv)
        test_ows(srv)
        test_trailers(srv)
        resp = srv.get("/x.txt")
        is_((resp.status, resp.body), (200, b"hello"), "the server still answers")
    test_settings_extensions()


run(main)
