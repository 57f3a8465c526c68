/* A client is an address under a prefix. */
#include "server/http/clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* ---- a client is an address ------------------------------------------- */

/* Keeps the first BITS bits of the LEN bytes at P. */
static void mask(uint8_t *p, unsigned len, unsigned bits)
{
    for (unsigned i = 0; i<len; i++, bits = bits> 8 ? bits - 8 : 0) {
        if (bits < 8)
            p[i] &= (uint8_t)(0xff00u >> bits);
    }
}

uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct client_addr *out)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct client_addr a = {0};
    unsigned len = 0;
    if (sa->sa_family == AF_INET) {
        memcpy(a.bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        a.family = AF_INET;
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        bool mapped = memcmp(b, v4_mapped, sizeof v4_mapped) == 0;
        memcpy(a.bytes, mapped ? b + 12 : b, mapped ? 4 : 16);
        a.family = mapped ? AF_INET : AF_INET6;
    }
    if (a.family == AF_INET) {
        len = 4;
        a.bits = (uint8_t)(v4_bits < 32 ? v4_bits : 32);
    } else if (a.family == AF_INET6) {
        len = 16;
        a.bits = (uint8_t)(v6_bits < 128 ? v6_bits : 128);
    }
    mask(a.bytes, len, a.bits);
    /* FNV-1a of what tells clients apart (the family, the prefix, the
     * bytes), then MurmurHash3's finaliser: neighbouring addresses differ
     * only in their last byte, which FNV alone spreads in a pattern. */
    uint64_t h = 14695981039346656037ull;
    const uint8_t head[2] = {a.family, a.bits};
    for (unsigned i = 0; i < 2 + len; i++)
        h = (h ^ (i < 2 ? head[i] : a.bytes[i - 2])) * 1099511628211ull;
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ull;
    if (out != NULL)
        *out = a;
    return h ^ (h >> 33);
}

void client_format(const struct client_addr *a, char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN] = "-";
    unsigned full = a->family == AF_INET ? 32 : 128;
    if (a->family == 0 || inet_ntop(a->family, a->bytes, text, sizeof text) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    if (a->bits < full)
        snprintf(buf, len, "%s/%u", text, a->bits);
    else
        snprintf(buf, len, "%s", text);
}
