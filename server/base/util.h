#ifndef UNCLOG_UTIL_H
#define UNCLOG_UTIL_H

/* Small helpers shared by the core and the handlers, defined once. */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The object that embeds MEMBER at PTR (libuv handles, gateway jobs). */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* uv_close with no callback, once: nothing if HANDLE (a uv_handle_t) is
 * closing already. */
struct uv_handle_s;
void handle_close(struct uv_handle_s *handle);

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

/* The length of a string literal, for bodies sent as constants. */
#define LITERAL_LEN(s) (sizeof(s "") - 1)

/* A text buffer appended to with printf-style calls: over a caller's fixed
 * array, or growing on the heap (then owned: free data). FAILED sticks once
 * something did not fit (fixed) or could not be allocated (growing); what
 * was appended before stays NUL-terminated. */
struct buf {
    char *data;
    size_t len, cap;
    bool grows, failed;
};

/* Over ARRAY of CAP bytes. */
void buf_init_fixed(struct buf *b, char *array, size_t cap);

/* Empty, on the heap. */
void buf_init_growing(struct buf *b);

void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

struct sockaddr;

/* Whether SA is a loopback address: 127.0.0.0/8, ::1, or 127/8 mapped into
 * IPv6 (::ffff:127.0.0.1, what a dual-stack socket sees). */
bool addr_is_loopback(const struct sockaddr *sa);

/* An address prefix: the first BITS bits of an IPv4 or IPv6 address, the
 * rest zero. A whole address is a prefix of 32 or 128 bits. An IPv4
 * address mapped into IPv6 (::ffff:a.b.c.d, what a dual-stack socket sees)
 * is IPv4. */
struct addr_prefix {
    uint8_t family; /* AF_INET or AF_INET6; 0: unknown (not an IP peer) */
    uint8_t bits;   /* the prefix length kept */
    uint8_t bytes[16];
};

/* SA's first V4_BITS (IPv4, and IPv4 mapped into IPv6) or V6_BITS (IPv6),
 * the rest zero, into *OUT; another family is family 0. */
void addr_prefix_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                    struct addr_prefix *out);

/* Parses TEXT[0..LEN) as an address ("192.0.2.7", "2001:db8::1") or a
 * prefix ("192.0.2.0/24", "2001:db8::/32", "::ffff:10.0.0.0/104" is
 * 10.0.0.0/8) into *OUT. Returns 0, or -EINVAL for anything else,
 * a prefix with bits set past its length included ("192.0.2.7/24"). */
int addr_prefix_parse(const char *text, size_t len, struct addr_prefix *out);

/* Writes P as text to BUF (LEN bytes): "127.0.0.2", or with its length
 * when bits were masked off ("10.1.2.0/24", "2001:db8:1:2::/64"); "-" for
 * an unknown family. What addr_prefix_parse reads back. */
void addr_prefix_format(const struct addr_prefix *p, char *buf, size_t len);

/* Whether the whole address A is under prefix P (same family, its first
 * P->bits bits equal). */
bool addr_prefix_contains(const struct addr_prefix *p, const struct addr_prefix *a);

/* Skips spaces and tabs (HTTP's OWS). */
const char *skip_space(const char *p);

#endif
