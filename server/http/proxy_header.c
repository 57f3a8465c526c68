/* The PROXY protocol's header, versions 1 and 2, parsed by the grammar of
 * HAProxy's proxy-protocol.txt (sections 2.1 and 2.2). */
#include "server/http/proxy_header.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

static const char v1_sig[] = "PROXY ";
#define V1_SIG_LEN (sizeof v1_sig - 1)
static const uint8_t v2_sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                   0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

enum { V2_LOCAL = 0x0, V2_PROXY = 0x1 };
enum { V2_UNSPEC = 0x0, V2_INET = 0x1, V2_INET6 = 0x2, V2_UNIX = 0x3 };
enum { V2_STREAM = 0x1, V2_DGRAM = 0x2 };

/* Whether P[0..LEN) begins as SIG[0..SIG_LEN) does, as far as both go. */
static bool begins_as(const uint8_t *p, size_t len, const void *sig, size_t sig_len)
{
    return memcmp(p, sig, len < sig_len ? len : sig_len) == 0;
}

/* Takes the token up to the next space of [*S, END) (the last one runs to
 * END) into *TOK, *TOK_LEN, and moves *S past it and the one space.
 * Returns false for an empty token. */
static bool token(const char **s, const char *end, const char **tok, size_t *tok_len)
{
    const char *sp = memchr(*s, ' ', (size_t)(end - *s));
    const char *stop = sp != NULL ? sp : end;
    *tok = *s;
    *tok_len = (size_t)(stop - *s);
    *s = sp != NULL ? sp + 1 : end;
    return *tok_len > 0;
}

/* A port in decimal, 0 to 65535, without a heading zero. */
static bool port_parse(const char *s, size_t len, uint16_t *port)
{
    if (len == 0 || len > 5 || (s[0] == '0' && len > 1))
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

/* Whether every byte of S[0..LEN) is one an address of FAMILY is written
 * with: inet_pton reads only up to a NUL, and would take "192.0.2.7\0x"
 * for 192.0.2.7. */
static bool addr_chars(int family, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool digit = ch >= '0' && ch <= '9',
             hex = (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
        if (!digit && ch != '.' && !(family == AF_INET6 && (hex || ch == ':')))
            return false;
    }
    return true;
}

/* An address of FAMILY in its canonical text (inet_pton refuses heading
 * zeroes in IPv4) into *OUT, which gets 4 or 16 bytes. */
static bool addr_parse(int family, const char *s, size_t len, void *out)
{
    char text[INET6_ADDRSTRLEN];
    if (len >= sizeof text || !addr_chars(family, s, len))
        return false;
    memcpy(text, s, len);
    text[len] = '\0';
    return inet_pton(family, text, out) == 1;
}

/* "TCP4 SRC DST SPORT DPORT" (or TCP6) in [S, END): the source into OUT. */
static int v1_addresses(int family, const char *s, const char *end, struct proxy_header *out)
{
    const char *tok[4];
    size_t tok_len[4];
    for (int i = 0; i < 4; i++) {
        if (s == end || !token(&s, end, &tok[i], &tok_len[i]))
            return -EINVAL;
    }
    if (s != end || (end[-1] == ' '))
        return -EINVAL; /* a fifth token, or a trailing space */
    uint8_t src[16], dst[16];
    uint16_t sport, dport;
    if (!addr_parse(family, tok[0], tok_len[0], src) ||
        !addr_parse(family, tok[1], tok_len[1], dst) || !port_parse(tok[2], tok_len[2], &sport) ||
        !port_parse(tok[3], tok_len[3], &dport))
        return -EINVAL;
    memset(&out->source, 0, sizeof out->source);
    if (family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->source;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, src, 4);
        sin->sin_port = htons(sport);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->source;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, src, 16);
        sin6->sin6_port = htons(sport);
    }
    return 0;
}

/* Version 1: the line once its CRLF is in, refused as soon as a lone CR or
 * LF shows, or 107 bytes pass without one. */
static int v1_parse(const uint8_t *p, size_t len, struct proxy_header *out)
{
    size_t seen = len < PROXY_V1_MAX ? len : PROXY_V1_MAX;
    size_t eol = 0;
    for (; eol < seen; eol++) {
        if (p[eol] == '\n')
            return -EINVAL; /* no CR before it */
        if (p[eol] == '\r')
            break;
    }
    if (eol == seen)
        return len >= PROXY_V1_MAX ? -EINVAL : 0;
    if (eol + 1 == len)
        return 0; /* the LF may follow */
    if (eol + 1 >= PROXY_V1_MAX || p[eol + 1] != '\n')
        return -EINVAL;
    const char *s = (const char *)p + V1_SIG_LEN, *end = (const char *)p + eol;
    size_t rest = (size_t)(end - s);
    int rc;
    if (rest >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (rest == 7 || s[7] == ' ')) {
        out->local = true; /* what follows is ignored */
        rc = 0;
    } else if (rest > 5 && memcmp(s, "TCP4 ", 5) == 0) {
        out->local = false;
        rc = v1_addresses(AF_INET, s + 5, end, out);
    } else if (rest > 5 && memcmp(s, "TCP6 ", 5) == 0) {
        out->local = false;
        rc = v1_addresses(AF_INET6, s + 5, end, out);
    } else {
        rc = -EINVAL;
    }
    return rc < 0 ? rc : (int)(eol + 2);
}

/* Version 2: the fixed block is checked byte by byte as it comes; the
 * addresses once the length it announces is in. */
static int v2_parse(const uint8_t *p, size_t len, struct proxy_header *out)
{
    if (len > 12 && (p[12] >> 4 != 2 || (p[12] & 0xF) > V2_PROXY))
        return -EINVAL; /* version 2, LOCAL or PROXY only */
    /* LOCAL: the receiver discards the address block, the family byte
     * included (section 2.2), so any value is taken. */
    bool local = len > 12 && (p[12] & 0xF) == V2_LOCAL;
    if (len > 13 && !local && (p[13] >> 4 > V2_UNIX || (p[13] & 0xF) > V2_DGRAM))
        return -EINVAL;
    if (len < 16)
        return 0;
    size_t addr_len = (size_t)p[14] << 8 | p[15], total = 16 + addr_len;
    if (total > PROXY_HEADER_MAX)
        return -EINVAL;
    if (len < total)
        return 0;
    unsigned family = p[13] >> 4, proto = p[13] & 0xF;
    static const size_t need[] = {
        [V2_UNSPEC] = 0, [V2_INET] = 12, [V2_INET6] = 36, [V2_UNIX] = 216};
    if (!local && addr_len < need[family])
        return -EINVAL; /* an address block shorter than its family's */
    const uint8_t *a = p + 16;
    memset(&out->source, 0, sizeof out->source);
    out->local = true;
    if (local || proto != V2_STREAM) {
        /* LOCAL: the peer's own connection, the block ignored. Another
         * protocol than TCP falls back to UNSPEC, as the spec allows. */
    } else if (family == V2_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->source;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, a, 4);
        memcpy(&sin->sin_port, a + 8, 2); /* both in network order */
        out->local = false;
    } else if (family == V2_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->source;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, a, 16);
        memcpy(&sin6->sin6_port, a + 32, 2);
        out->local = false;
    }
    return (int)total;
}

int proxy_header_parse(const uint8_t *p, size_t len, struct proxy_header *out)
{
    if (len == 0)
        return 0;
    if (p[0] == v1_sig[0])
        return begins_as(p, len, v1_sig, V1_SIG_LEN) ? v1_parse(p, len, out) : -EINVAL;
    if (p[0] == v2_sig[0])
        return begins_as(p, len, v2_sig, sizeof v2_sig) ? v2_parse(p, len, out) : -EINVAL;
    return -EINVAL;
}
