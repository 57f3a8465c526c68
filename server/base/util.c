#include "server/base/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

void buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
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
