#include "server/base/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

void buf_init_fixed(struct buf *b, char *array, size_t cap)
{
    *b = (struct buf){.data = array, .cap = cap};
    if (cap > 0)
        array[0] = '\0';
}

void buf_init_growing(struct buf *b)
{
    *b = (struct buf){.grows = true};
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* Appends LEN bytes of S at *AT, leaving room for the NUL; false when
 * they do not fit. */
static bool put(struct buf *b, size_t *at, const char *s, size_t len)
{
    if (len >= b->cap - *at)
        return false;
    memcpy(b->data + *at, s, len);
    *at += len;
    return true;
}

static bool put_number(struct buf *b, size_t *at, unsigned long long v, bool minus)
{
    char digits[24];
    char *p = digits + sizeof digits;
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    if (minus)
        *--p = '-';
    return put(b, at, p, (size_t)(digits + sizeof digits - p));
}

static bool put_signed(struct buf *b, size_t *at, long long v)
{
    return put_number(b, at, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, v < 0);
}

/* The conversions a response head uses (%s %c %d %u %lld %llu %zu %%), by
 * hand: vsnprintf's generality costs every response (docs/results.md has
 * what it cost). Anything else, or a line that does not fit, returns false
 * having written nothing. */
static bool format_simple(struct buf *b, const char *fmt, va_list ap)
{
    if (b->data == NULL)
        return false;
    size_t at = b->len;
    va_list args;
    va_copy(args, ap);
    bool ok = true;
    for (const char *p = fmt; ok && *p != '\0'; p++) {
        const char *pc = strchr(p, '%');
        ok = put(b, &at, p, pc == NULL ? strlen(p) : (size_t)(pc - p));
        if (pc == NULL || !ok)
            break;
        p = pc + 1;
        if (*p == 's') {
            const char *s = va_arg(args, const char *);
            if (s == NULL)
                s = "(null)"; /* as glibc's printf shows it */
            ok = put(b, &at, s, strlen(s));
        } else if (*p == 'c' || *p == '%') {
            char ch = *p == 'c' ? (char)va_arg(args, int) : '%';
            ok = put(b, &at, &ch, 1);
        } else if (*p == 'd') {
            ok = put_signed(b, &at, va_arg(args, int));
        } else if (*p == 'u') {
            ok = put_number(b, &at, va_arg(args, unsigned), false);
        } else if (strncmp(p, "lld", 3) == 0) {
            ok = put_signed(b, &at, va_arg(args, long long));
            p += 2;
        } else if (strncmp(p, "llu", 3) == 0) {
            ok = put_number(b, &at, va_arg(args, unsigned long long), false);
            p += 2;
        } else if (strncmp(p, "zu", 2) == 0) {
            ok = put_number(b, &at, va_arg(args, size_t), false);
            p += 1;
        } else {
            ok = false;
        }
    }
    va_end(args);
    if (!ok) {
        b->data[b->len] = '\0';
        return false;
    }
    b->data[at] = '\0';
    b->len = at;
    return true;
}

void buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    if (b->failed || format_simple(b, fmt, ap))
        return;
    for (int attempt = 0; attempt < 2 && !b->failed; attempt++) {
        va_list copy;
        va_copy(copy, ap);
        /* NULL + 0 is undefined behaviour: with no storage yet, only measure. */
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->cap - b->len, fmt, copy);
        va_end(copy);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        if (b->data != NULL)
            b->data[b->len] = '\0'; /* drop a truncated tail */
        if (n < 0 || !b->grows) {
            b->failed = true;
            return;
        }
        size_t cap = (b->cap + (size_t)n) * 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
}

const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

bool addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24 == 127;
    if (sa->sa_family != AF_INET6)
        return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* ---- address prefixes ---------------------------------------------------- */

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static unsigned family_bits(uint8_t family)
{
    return family == AF_INET ? 32 : family == AF_INET6 ? 128 : 0;
}

/* Keeps the first BITS bits of the LEN bytes at P. */
static void mask(uint8_t *p, unsigned len, unsigned bits)
{
    for (unsigned i = 0; i<len; i++, bits = bits> 8 ? bits - 8 : 0) {
        if (bits < 8)
            p[i] &= (uint8_t)(0xff00u >> bits);
    }
}

/* An IPv4 address mapped into IPv6 becomes IPv4, its length less 96. */
static void unmap(struct addr_prefix *a)
{
    if (a->family != AF_INET6 || memcmp(a->bytes, v4_mapped, sizeof v4_mapped) != 0)
        return;
    memmove(a->bytes, a->bytes + 12, 4);
    memset(a->bytes + 4, 0, 12);
    a->family = AF_INET;
    a->bits = (uint8_t)(a->bits > 96 ? a->bits - 96 : 0);
}

void addr_prefix_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                    struct addr_prefix *out)
{
    struct addr_prefix a = {0};
    if (sa->sa_family == AF_INET) {
        memcpy(a.bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        a.family = AF_INET;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(a.bytes, ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr, 16);
        a.family = AF_INET6;
        a.bits = 128;
        unmap(&a);
    }
    unsigned full = family_bits(a.family), bits = a.family == AF_INET ? v4_bits : v6_bits;
    a.bits = (uint8_t)(bits < full ? bits : full);
    mask(a.bytes, full / 8, a.bits);
    *out = a;
}

int addr_prefix_parse(const char *text, size_t len, struct addr_prefix *out)
{
    char addr[INET6_ADDRSTRLEN];
    const char *slash = memchr(text, '/', len);
    size_t addr_len = slash != NULL ? (size_t)(slash - text) : len;
    if (addr_len == 0 || addr_len >= sizeof addr)
        return -EINVAL;
    memcpy(addr, text, addr_len);
    addr[addr_len] = '\0';
    struct addr_prefix a = {.family = AF_INET};
    if (inet_pton(AF_INET, addr, a.bytes) != 1) {
        a.family = AF_INET6;
        if (inet_pton(AF_INET6, addr, a.bytes) != 1)
            return -EINVAL;
    }
    unsigned full = family_bits(a.family), bits = full;
    if (slash != NULL) {
        const char *p = slash + 1, *end = text + len;
        if (p == end || end - p > 3 || (*p == '0' && end - p > 1))
            return -EINVAL;
        for (bits = 0; p < end; p++) {
            if (*p < '0' || *p > '9')
                return -EINVAL;
            bits = bits * 10 + (unsigned)(*p - '0');
        }
        if (bits > full)
            return -EINVAL;
    }
    a.bits = (uint8_t)bits;
    struct addr_prefix masked = a;
    mask(masked.bytes, full / 8, a.bits);
    if (memcmp(masked.bytes, a.bytes, sizeof a.bytes) != 0)
        return -EINVAL; /* "192.0.2.7/24": a host or a network? */
    unmap(&a);
    *out = a;
    return 0;
}

void addr_prefix_format(const struct addr_prefix *p, char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN] = "-";
    if (p->family == 0 || inet_ntop(p->family, p->bytes, text, sizeof text) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    if (p->bits < family_bits(p->family))
        snprintf(buf, len, "%s/%u", text, p->bits);
    else
        snprintf(buf, len, "%s", text);
}

bool addr_prefix_contains(const struct addr_prefix *p, const struct addr_prefix *a)
{
    if (p->family == 0 || p->family != a->family)
        return false;
    struct addr_prefix masked = *a;
    mask(masked.bytes, family_bits(a->family) / 8, p->bits);
    return memcmp(masked.bytes, p->bytes, family_bits(p->family) / 8) == 0;
}

void handle_close(uv_handle_t *handle)
{
    if (!uv_is_closing(handle))
        uv_close(handle, NULL);
}
