#ifndef UNCLOG_STRICT_H
#define UNCLOG_STRICT_H

#include <stdbool.h>
#include <stddef.h>

/* The request checks that llhttp 8.1 leaves to its user even in its strict
 * mode. Pure functions over bytes: the connection calls them from its parser
 * callbacks; unit tests and fuzzers call them directly. */

/* Line discipline of the bytes that frame a message: the request line, header
 * and trailer lines, chunk-size lines and the CRLF after each chunk's data,
 * but not the body data itself. llhttp 8.1 accepts a bare LF as a line end,
 * CR followed by any byte as CRLF, folded (obs-fold) header lines, and any two
 * bytes after a chunk's data; each of those can make two parsers disagree on
 * where a request ends (RFC 9112 2.2, 5.2, 7.1). It also checks the protocol
 * name of the request line, which no callback shows. */
struct strict_lines {
    bool cr;            /* the last framing byte was CR */
    bool line_start;    /* the next framing byte starts a line */
    unsigned char crlf; /* bytes of a mandatory CRLF still expected */
    signed char proto;  /* bytes of " HTTP/" matched after a request-target, or -1 */
};

/* Resets S for the first byte of a connection. */
void strict_lines_init(struct strict_lines *s);

/* Checks the next LEN framing bytes of the stream. Returns 0, or -1 at the
 * first bare CR, bare LF, folded line or missing CRLF after chunk data. */
int strict_lines_scan(struct strict_lines *s, const char *p, size_t len);

/* Body data was skipped; CHUNK_END says it completed a chunk, after which
 * exactly CRLF must follow. */
void strict_lines_body(struct strict_lines *s, bool chunk_end);

/* A request-target was skipped: the rest of its line must be " HTTP/" and
 * the version. llhttp 8.1 also takes "RTSP/1.0" and "ICE/1.0" there, and
 * reports them as HTTP/1.0. */
void strict_lines_target(struct strict_lines *s);

/* Whether P[0..LEN) are all token characters (RFC 9110 5.6.2), as a field
 * name must be. llhttp 8.1 lets spaces through. */
bool strict_token(const char *p, size_t len);

/* Whether P[0..LEN) may appear in a request-target: no control bytes, space,
 * DEL or '#' (a fragment is never sent). Bytes >= 0x80 pass, as in nginx. */
bool strict_target_chars(const char *p, size_t len);

/* A field value without the optional white space (SP, HTAB) around it,
 * which RFC 9110 5.5 says is not part of it: returns where the value in
 * P[0..*LEN) starts, and sets *LEN to its length. White space inside stays
 * (a Host of "a b" is still refused), and so does any other byte. */
const char *strict_trim_ows(const char *p, size_t *len);

/* Whether P[0..LEN) may appear in a Host value: a reg-name or IP literal and
 * an optional port (RFC 3986 3.2.2). */
bool strict_host_chars(const char *p, size_t len);

/* The path part of TARGET: TARGET itself in origin-form ("/x?q"); with
 * ABSOLUTE_OK, the path after "http://authority" in absolute-form ("/" when
 * the path is empty), and the authority (host and port) in *AUTHORITY and
 * its length in *AUTHORITY_LEN (NULL and 0 in origin-form; RFC 9112 3.2.2:
 * it, not Host, names the target's host). NULL for anything else:
 * asterisk- and authority-form, other schemes, userinfo, an empty
 * authority. */
const char *strict_target_path(const char *target, bool absolute_ok, const char **authority,
                               size_t *authority_len);

/* Whether a Transfer-Encoding value is exactly "chunked" (any case, optional
 * white space around it): the only transfer coding unclog decodes. */
bool strict_chunked(const char *value);

/* Whether Connection field values hold the option "close" (RFC 9110 7.6.1:
 * a list of tokens, any case, with optional white space; 9112 9.6: close
 * wins over keep-alive). The values come in pieces, as llhttp hands them;
 * the zeroed struct is the start of a request. llhttp 8.1's own flag misses
 * a "close" followed by a tab, and llhttp_should_keep_alive ignores close on
 * HTTP/1.0 when keep-alive is there too. */
struct strict_close {
    signed char at; /* bytes of "close" matched in this list member; -1: not it */
    bool seen;      /* a member was "close" */
};

/* Reads the next LEN bytes of a Connection value. */
void strict_close_scan(struct strict_close *s, const char *p, size_t len);

/* One Connection line's value is complete. */
void strict_close_end(struct strict_close *s);

/* Chunk extensions (RFC 9112 7.1.1), which never reach llhttp: 8.1 refuses
 * valid ones (a second extension after a token value, a quoted-pair, white
 * space around ';' and '=') and takes invalid ones (an empty name or value).
 * At each chunk-size line llhttp gets the size's hex digits and then the
 * CRLF; the extensions in between are checked here and dropped:
 *
 *   chunk-ext     = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
 *   chunk-ext-val = token / quoted-string
 *
 * The zeroed struct is outside any chunk-size line: llhttp takes all. */
struct strict_chunk {
    unsigned char state;
};

/* The next byte of the stream starts a chunk-size line. */
void strict_chunk_line(struct strict_chunk *s);

/* Splits the LEN (> 0) bytes at P, the next of the stream: either llhttp
 * takes the first *TAKE of them, or the first *SKIP are extensions to drop
 * (the other is 0). Returns 0, or -1 at a byte no extension may have there
 * (a bare CR or LF, a control byte, a missing name or value, an unclosed
 * quoted string cut by the line's end). */
int strict_chunk_scan(struct strict_chunk *s, const char *p, size_t len, size_t *take,
                      size_t *skip);

#endif
