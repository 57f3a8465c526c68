/* The PROXY protocol header (server/http/proxy_header.c): every case is
 * parsed whole, then fed one byte at a time as a slow socket would: the
 * verdict must not depend on the split, and no prefix may be refused that
 * the whole accepts. */
#include "server/http/proxy_header.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "server/base/util.h"
#include "tests/tap.h"

/* The verdict for P[0..LEN) delivered in growing prefixes: the first
 * non-zero answer, or 0 if the bytes end first. *AT is the prefix length
 * it came at. */
static int fed_bytewise(const uint8_t *p, size_t len, struct proxy_header *h, size_t *at)
{
    for (size_t n = 1; n <= len; n++) {
        int rc = proxy_header_parse(p, n, h);
        if (rc != 0) {
            *at = n;
            return rc;
        }
    }
    *at = len;
    return 0;
}

/* The source address of H as text, "-" when local. */
static const char *source_text(const struct proxy_header *h, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    if (h->local) {
        snprintf(buf, len, "-");
    } else if (h->source.ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&h->source;
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
        snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
    } else {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&h->source;
        inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof ip);
        snprintf(buf, len, "[%s]:%u", ip, ntohs(sin6->sin6_port));
    }
    return buf;
}

struct v1_case {
    const char *text;
    int want;           /* the header's length, 0 (more wanted) or -EINVAL */
    const char *source; /* when whole: the client, or "-" for local */
};

static const struct v1_case v1_cases[] = {
    {"PROXY TCP4 192.0.2.7 192.0.2.2 56324 443\r\nGET /", 42, "192.0.2.7:56324"},
    {"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", 56, "255.255.255.255:65535"},
    {"PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n", 32, "0.0.0.0:0"},
    {"PROXY TCP6 2001:db8::7 2001:db8::1 1 80\r\n", 41, "[2001:db8::7]:1"},
    {"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     "65535 65535\r\n",
     104, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"},
    {"PROXY UNKNOWN\r\n", 15, "-"},
    {"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     "65535 65535\r\n",
     107, "-"},
    /* Beginnings: more is wanted. */
    {"", 0, NULL},
    {"P", 0, NULL},
    {"PROXY TCP4 192.0.2.7", 0, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 2\r", 0, NULL},
    /* Refused. */
    {"GET / HTTP/1.1\r\n", -EINVAL, NULL},
    {"proxy TCP4 192.0.2.7 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY  TCP4 192.0.2.7 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7  192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 2 \r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 2 3\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 2\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 2\rX", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.07 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.256 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 01 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 65536 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 192.0.2.7 192.0.2.2 1 +2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 2001:db8::7 2001:db8::1 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP6 192.0.2.7 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP5 192.0.2.7 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY UNKNOWNX\r\n", -EINVAL, NULL},
    {"PROXY \r\n", -EINVAL, NULL},
    {"PROXY TCP4\r\n", -EINVAL, NULL},
    /* Bytes outside the grammar (a NUL: v1_nul_cases): a tab, a letter, a
     * sign, a scope. An IPv4 address as IPv6 text is IPv6's grammar. */
    {"PROXY TCP4 203.0.113.5\t192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 203.0.113.5x 192.0.2.2 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP4 203.0.113.5 192.0.2.2 -1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP6 2001:db8::g 2001:db8::1 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP6 fe80::1%lo 2001:db8::1 1 2\r\n", -EINVAL, NULL},
    {"PROXY TCP6 ::ffff:192.0.2.7 2001:db8::1 1 2\r\n", 45, "[::ffff:192.0.2.7]:1"},
    /* 107 bytes without a CRLF. */
    {"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
     "65535 655355\r\n",
     -EINVAL, NULL},
};

/* Cases whose text holds a NUL, which strlen would cut (LEN is the
 * literal's own): in each token, where inet_pton would stop at it; after
 * UNKNOWN, where anything is ignored up to the CRLF (section 2.1). */
struct v1_nul_case {
    const char *text;
    size_t len;
    int want;
    const char *source;
};

#define WITH_NUL(text) text, sizeof text - 1

static const struct v1_nul_case v1_nul_cases[] = {
    {WITH_NUL("PROXY TCP4 203.0.113.5\0JUNK 192.0.2.2 1 2\r\n"), -EINVAL, NULL},
    {WITH_NUL("PROXY TCP4 203.0.113.5 192.0.2.2\0 1 2\r\n"), -EINVAL, NULL},
    {WITH_NUL("PROXY TCP4 203.0.113.5 192.0.2.2 1\0 2\r\n"), -EINVAL, NULL},
    {WITH_NUL("PROXY TCP6 2001:db8::7\0 2001:db8::1 1 2\r\n"), -EINVAL, NULL},
    {WITH_NUL("PROXY TCP4\0"
              "203.0.113.5 192.0.2.2 1 2\r\n"),
     -EINVAL, NULL},
    {WITH_NUL("PROXY UNKNOWN x\0y\r\n"), 19, "-"},
};

static void check_v1(const struct v1_case *t, size_t len)
{
    const uint8_t *p = (const uint8_t *)t->text;
    char desc[256], got[80];
    struct proxy_header h;
    int rc = proxy_header_parse(p, len, &h);
    int shown = (int)strcspn(t->text, "\r\n");
    snprintf(desc, sizeof desc, "v1 whole: %.*s (%zu bytes)", shown, t->text, len);
    is_int(rc, t->want, desc);
    if (t->source != NULL && rc > 0)
        is_str(source_text(&h, got, sizeof got), t->source, "  its source");
    size_t at;
    rc = fed_bytewise(p, len, &h, &at);
    snprintf(desc, sizeof desc, "v1 byte by byte: %.*s (%zu bytes)", shown, t->text, len);
    is_int(rc, t->want, desc);
    if (t->want > 0)
        is_int(at, t->want, "  whole at its last byte, not before");
}

static void test_v1(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(v1_cases); i++)
        check_v1(&v1_cases[i], strlen(v1_cases[i].text));
    for (size_t i = 0; i < ARRAY_SIZE(v1_nul_cases); i++) {
        const struct v1_nul_case *t = &v1_nul_cases[i];
        struct v1_case c = {t->text, t->want, t->source};
        check_v1(&c, t->len);
    }
}

/* A v2 header: the signature, VER_CMD, FAM, then ADDR_LEN bytes of ADDR. */
static size_t v2(uint8_t *out, uint8_t ver_cmd, uint8_t fam, const uint8_t *addr, size_t addr_len)
{
    static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
    memcpy(out, sig, 12);
    out[12] = ver_cmd;
    out[13] = fam;
    out[14] = (uint8_t)(addr_len >> 8);
    out[15] = (uint8_t)addr_len;
    if (addr_len > 0 && addr != NULL)
        memcpy(out + 16, addr, addr_len);
    else
        memset(out + 16, 0, addr_len);
    return 16 + addr_len;
}

static void check_v2(const uint8_t *p, size_t len, int want, const char *source, const char *what)
{
    struct proxy_header h;
    char desc[160], got[80];
    int rc = proxy_header_parse(p, len, &h);
    snprintf(desc, sizeof desc, "v2 whole: %s", what);
    is_int(rc, want, desc);
    if (source != NULL && rc > 0)
        is_str(source_text(&h, got, sizeof got), source, "  its source");
    size_t at;
    rc = fed_bytewise(p, len, &h, &at);
    snprintf(desc, sizeof desc, "v2 byte by byte: %s", what);
    is_int(rc, want, desc);
    if (want > 0)
        is_int(at, want, "  whole at its last byte, not before");
}

static void test_v2(void)
{
    uint8_t buf[PROXY_HEADER_MAX + 64];
    /* 192.0.2.7:56324 -> 192.0.2.2:443 */
    const uint8_t inet[12] = {192, 0, 2, 7, 192, 0, 2, 2, 0xDC, 0x04, 0x01, 0xBB};
    uint8_t inet6[36] = {0x20, 0x01, 0x0d, 0xb8};
    inet6[15] = 7;
    inet6[32] = 0x00;
    inet6[33] = 0x50;
    uint8_t inet_tlv[12 + 7];
    memcpy(inet_tlv, inet, 12);
    memcpy(inet_tlv + 12, "\x04\x00\x04xxxx", 7); /* a NOOP TLV, skipped */

    size_t n = v2(buf, 0x21, 0x11, inet, 12);
    check_v2(buf, n, 28, "192.0.2.7:56324", "PROXY TCP4");
    n = v2(buf, 0x21, 0x11, inet, 12);
    memcpy(buf + n, "GET / HTTP/1.1\r\n", 16);
    check_v2(buf, n + 16, 28, "192.0.2.7:56324", "PROXY TCP4 with the request after it");
    n = v2(buf, 0x21, 0x11, inet_tlv, sizeof inet_tlv);
    check_v2(buf, n, 35, "192.0.2.7:56324", "PROXY TCP4 with a TLV");
    n = v2(buf, 0x21, 0x21, inet6, 36);
    check_v2(buf, n, 52, "[2001:db8::7]:80", "PROXY TCP6");
    n = v2(buf, 0x20, 0x00, NULL, 0);
    check_v2(buf, n, 16, "-", "LOCAL, no address");
    n = v2(buf, 0x20, 0x11, inet, 12);
    check_v2(buf, n, 28, "-", "LOCAL with an address: ignored");
    /* LOCAL discards the block, the family with it (section 2.2): a
     * family whose addresses would not fit, or none the spec names. */
    n = v2(buf, 0x20, 0x11, inet, 8);
    check_v2(buf, n, 24, "-", "LOCAL of TCP4 with 8 address bytes: taken, ignored");
    n = v2(buf, 0x20, 0x21, NULL, 0);
    check_v2(buf, n, 16, "-", "LOCAL of TCP6 with no address: taken");
    n = v2(buf, 0x20, 0x31, NULL, 4);
    check_v2(buf, n, 20, "-", "LOCAL of UNIX with 4 address bytes: taken");
    n = v2(buf, 0x20, 0xFF, NULL, 0);
    check_v2(buf, n, 16, "-", "LOCAL of family 15, protocol 15: taken");
    n = v2(buf, 0x20, 0x11, NULL, PROXY_HEADER_MAX - 15);
    check_v2(buf, n, -EINVAL, NULL, "LOCAL longer than PROXY_HEADER_MAX: refused");
    n = v2(buf, 0x21, 0x00, NULL, 0);
    check_v2(buf, n, 16, "-", "PROXY UNSPEC: the peer");
    n = v2(buf, 0x21, 0x12, inet, 12);
    check_v2(buf, n, 28, "-", "PROXY UDP4: the peer");
    n = v2(buf, 0x21, 0x31, NULL, 216);
    check_v2(buf, n, 232, "-", "PROXY UNIX: the peer");
    n = v2(buf, 0x21, 0x11, NULL, PROXY_HEADER_MAX - 16);
    check_v2(buf, n, PROXY_HEADER_MAX, "0.0.0.0:0", "the longest header taken");

    check_v2(buf, 0, 0, NULL, "nothing yet");
    n = v2(buf, 0x21, 0x11, inet, 12);
    check_v2(buf, 20, 0, NULL, "the addresses not in yet");

    n = v2(buf, 0x21, 0x11, NULL, PROXY_HEADER_MAX - 15);
    check_v2(buf, n, -EINVAL, NULL, "longer than PROXY_HEADER_MAX");
    n = v2(buf, 0x11, 0x11, inet, 12);
    check_v2(buf, n, -EINVAL, NULL, "version 1 in a v2 block");
    n = v2(buf, 0x22, 0x11, inet, 12);
    check_v2(buf, n, -EINVAL, NULL, "command 2");
    n = v2(buf, 0x21, 0x41, inet, 12);
    check_v2(buf, n, -EINVAL, NULL, "family 4");
    n = v2(buf, 0x21, 0x13, inet, 12);
    check_v2(buf, n, -EINVAL, NULL, "protocol 3");
    n = v2(buf, 0x21, 0x11, inet, 11);
    check_v2(buf, n, -EINVAL, NULL, "TCP4 with 11 address bytes");
    n = v2(buf, 0x21, 0x21, inet6, 35);
    check_v2(buf, n, -EINVAL, NULL, "TCP6 with 35 address bytes");
    n = v2(buf, 0x21, 0x11, inet, 12);
    buf[6] = 'X';
    check_v2(buf, n, -EINVAL, NULL, "a signature byte wrong");
    check_v2((const uint8_t *)"\r\n\r\nGET", 7, -EINVAL, NULL, "blank lines then a request");

    /* Refused at the first byte that cannot be: not at the end. */
    struct proxy_header h;
    size_t at;
    n = v2(buf, 0x31, 0x11, inet, 12);
    is_int(fed_bytewise(buf, n, &h, &at), -EINVAL, "version 3 refused");
    is_int(at, 13, "  at its 13th byte");
    is_int(fed_bytewise((const uint8_t *)"PROXX TCP4", 10, &h, &at), -EINVAL, "PROXX refused");
    is_int(at, 5, "  at its 5th byte");
}

int main(void)
{
    test_v1();
    test_v2();
    return tap_done();
}
