#include "server/http/strict.h"

#include <string.h>
#include <strings.h>

void strict_lines_init(struct strict_lines *s)
{
    *s = (struct strict_lines){.line_start = true, .proto = -1};
}

int strict_lines_scan(struct strict_lines *s, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (s->crlf > 0 && c != "\n\r"[s->crlf - 1])
            return -1;
        if (s->crlf > 0)
            s->crlf--;
        if (s->cr != (c == '\n'))
            return -1; /* CR not followed by LF, or LF without CR */
        /* A line that starts with white space continues the previous one. */
        if (s->line_start && (c == ' ' || c == '\t'))
            return -1;
        /* A request line that ends at its target names no version: an
         * HTTP/0.9 request, which llhttp reports as such (answered 505). */
        if (s->proto == 0 && c == '\r')
            s->proto = -1;
        if (s->proto >= 0 && s->proto < 6 && c != " HTTP/"[s->proto++])
            return -1;
        if (c == '\r')
            s->proto = -1;
        s->cr = c == '\r';
        s->line_start = c == '\n';
    }
    return 0;
}

void strict_lines_target(struct strict_lines *s)
{
    s->proto = 0;
}

void strict_lines_body(struct strict_lines *s, bool chunk_end)
{
    s->cr = false;
    s->line_start = false;
    s->crlf = chunk_end ? 2 : 0;
}

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_tchar(unsigned char c)
{
    return is_alnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

bool strict_token(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!is_tchar((unsigned char)p[i]))
            return false;
    }
    return true;
}

bool strict_target_chars(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= ' ' || c == 0x7f || c == '#')
            return false;
    }
    return true;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

const char *strict_trim_ows(const char *p, size_t *len)
{
    size_t n = *len;
    while (n > 0 && is_ows(*p)) {
        p++;
        n--;
    }
    while (n > 0 && is_ows(p[n - 1]))
        n--;
    *len = n;
    return p;
}

bool strict_host_chars(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!is_alnum(c) && (c == '\0' || strchr("-._~!$&'()*+,;=:[]%", c) == NULL))
            return false;
    }
    return true;
}

const char *strict_target_path(const char *target, bool absolute_ok, const char **authority,
                               size_t *authority_len)
{
    *authority = NULL;
    *authority_len = 0;
    if (target[0] == '/')
        return target;
    if (!absolute_ok)
        return NULL;
    size_t scheme = strncasecmp(target, "http://", 7) == 0    ? 7
                    : strncasecmp(target, "https://", 8) == 0 ? 8
                                                              : 0;
    if (scheme == 0)
        return NULL;
    const char *host = target + scheme;
    size_t len = strcspn(host, "/?");
    /* RFC 9110 4.2.4: userinfo in a target is an error. */
    if (len == 0 || !strict_host_chars(host, len))
        return NULL;
    const char *path = host + len;
    if (*path != '\0' && *path != '/')
        return NULL;
    *authority = host;
    *authority_len = len;
    return *path == '\0' ? "/" : path;
}

bool strict_chunked(const char *value)
{
    while (*value == ' ' || *value == '\t')
        value++;
    if (strncasecmp(value, "chunked", 7) != 0)
        return false;
    for (value += 7; *value == ' ' || *value == '\t'; value++)
        ;
    return *value == '\0';
}

void strict_close_scan(struct strict_close *s, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        char lower = c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
        if (c == ',')
            strict_close_end(s);
        else if (c == ' ' || c == '\t')
            s->at = s->at == 0 || s->at == 5 ? s->at : -1; /* white space around a member */
        else if (s->at >= 0 && s->at < 5 && lower == "close"[s->at])
            s->at++;
        else
            s->at = -1;
    }
}

void strict_close_end(struct strict_close *s)
{
    if (s->at == 5)
        s->seen = true;
    s->at = 0;
}

/* Where a chunk-size line is: CHUNK_OUT (zero) outside one, then its size,
 * then the states of the chunk-ext grammar, named for what was last seen. */
enum {
    CHUNK_OUT,
    CHUNK_START,  /* the line's first byte is next */
    CHUNK_SIZE,   /* hex digits */
    EXT_BWS,      /* white space before ';' */
    EXT_SEMI,     /* ';' and maybe white space: a name is due */
    EXT_NAME,     /* a name's token characters */
    EXT_NAME_BWS, /* white space after a name: '=' or ';' is due */
    EXT_EQ,       /* '=' and maybe white space: a value is due */
    EXT_TOKEN,    /* a token value */
    EXT_QUOTED,   /* inside a quoted-string */
    EXT_QPAIR,    /* after a backslash in a quoted-string */
    EXT_CLOSED,   /* a quoted-string's closing quote */
};

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* qdtext and the byte of a quoted-pair, but for '"' and '\\' in qdtext,
 * which the caller tests first: HTAB, SP, VCHAR, obs-text (RFC 9110 5.6.4). */
static bool is_text(unsigned char c)
{
    return c == '\t' || (c >= ' ' && c != 0x7f);
}

/* The state after byte C in extension state STATE, or -1 where the grammar
 * has no place for C. A CR after a complete extension ends the line. */
static int ext_next(int state, unsigned char c)
{
    bool ws = c == ' ' || c == '\t';
    if (c == '\r')
        return state == EXT_NAME || state == EXT_TOKEN || state == EXT_CLOSED ? CHUNK_OUT : -1;
    switch (state) {
    case EXT_BWS:
        return ws ? EXT_BWS : c == ';' ? EXT_SEMI : -1;
    case EXT_SEMI:
        return ws ? EXT_SEMI : is_tchar(c) ? EXT_NAME : -1;
    case EXT_NAME:
    case EXT_NAME_BWS:
        if (state == EXT_NAME && is_tchar(c))
            return EXT_NAME;
        return ws ? EXT_NAME_BWS : c == '=' ? EXT_EQ : c == ';' ? EXT_SEMI : -1;
    case EXT_EQ:
        return ws ? EXT_EQ : is_tchar(c) ? EXT_TOKEN : c == '"' ? EXT_QUOTED : -1;
    case EXT_TOKEN:
    case EXT_CLOSED:
        if (state == EXT_TOKEN && is_tchar(c))
            return EXT_TOKEN;
        return ws ? EXT_BWS : c == ';' ? EXT_SEMI : -1;
    case EXT_QUOTED:
        return c == '"' ? EXT_CLOSED : c == '\\' ? EXT_QPAIR : is_text(c) ? EXT_QUOTED : -1;
    case EXT_QPAIR:
        return is_text(c) ? EXT_QUOTED : -1;
    default:
        return -1;
    }
}

void strict_chunk_line(struct strict_chunk *s)
{
    s->state = CHUNK_START;
}

int strict_chunk_scan(struct strict_chunk *s, const char *p, size_t len, size_t *take, size_t *skip)
{
    size_t i = 0;
    *take = 0;
    *skip = 0;
    if (s->state == CHUNK_START || s->state == CHUNK_SIZE) {
        while (i < len && is_hex(p[i]))
            i++;
        if (i > 0)
            s->state = CHUNK_SIZE;
        /* After the size: extensions, or what llhttp takes (CR) or refuses. */
        if (i < len)
            s->state = s->state == CHUNK_SIZE && (p[i] == ';' || p[i] == ' ' || p[i] == '\t')
                           ? EXT_BWS
                           : CHUNK_OUT;
        if (i > 0 || s->state == CHUNK_OUT) {
            *take = s->state == CHUNK_OUT ? len : i;
            return 0;
        }
    }
    if (s->state == CHUNK_OUT) {
        *take = len;
        return 0;
    }
    for (; i < len; i++) {
        int next = ext_next(s->state, (unsigned char)p[i]);
        if (next < 0)
            return -1;
        s->state = (unsigned char)next;
        if (next == CHUNK_OUT)
            break; /* the CR that ends the line is llhttp's */
    }
    if (i == 0)
        *take = len;
    else
        *skip = i;
    return 0;
}
