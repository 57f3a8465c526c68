#ifndef UNCLOG_UTIL_H
#define UNCLOG_UTIL_H

/* Small helpers shared by the core and the handlers, defined once. */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* The object that embeds MEMBER at PTR (libuv handles, gateway jobs). */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

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

/* Skips spaces and tabs (HTTP's OWS). */
const char *skip_space(const char *p);

#endif
