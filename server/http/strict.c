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

bool strict_token(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!is_alnum(c) && (c == '\0' || strchr("!#$%&'*+-.^_`|~", c) == NULL))
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

bool strict_host_chars(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!is_alnum(c) && (c == '\0' || strchr("-._~!$&'()*+,;=:[]%", c) == NULL))
            return false;
    }
    return true;
}

const char *strict_target_path(const char *target, bool absolute_ok)
{
    if (target[0] == '/')
        return target;
    if (!absolute_ok)
        return NULL;
    size_t scheme = strncasecmp(target, "http://", 7) == 0    ? 7
                    : strncasecmp(target, "https://", 8) == 0 ? 8
                                                              : 0;
    if (scheme == 0)
        return NULL;
    const char *authority = target + scheme;
    size_t len = strcspn(authority, "/?");
    /* RFC 9110 4.2.4: userinfo in a target is an error. */
    if (len == 0 || !strict_host_chars(authority, len))
        return NULL;
    const char *path = authority + len;
    if (*path == '\0')
        return "/";
    return *path == '/' ? path : NULL;
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
