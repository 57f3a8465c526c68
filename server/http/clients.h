#ifndef UNCLOG_CLIENTS_H
#define UNCLOG_CLIENTS_H

/* A client is an address under a prefix (IPv4 /32 and IPv6 /64 by default,
 * client_prefix); its id is that masked address hashed: whose share of the
 * pool a connection's work uses. Pure: no libuv. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A client: an address with only its first BITS kept. */
struct client_addr {
    uint8_t family; /* AF_INET or AF_INET6; 0: unknown (not an IP peer) */
    uint8_t bits;   /* the prefix length kept */
    uint8_t bytes[16];
};

/* The client SA belongs to: its first V4_BITS (IPv4, and IPv4 mapped into
 * IPv6 as ::ffff:a.b.c.d) or V6_BITS (IPv6), the rest zero, in *OUT when
 * OUT is not NULL. Returns the client's id: that masked address (family,
 * prefix length and bytes) hashed. Another family is one client of its own
 * (family 0). */
uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct client_addr *out);

/* Writes A as text to BUF (LEN bytes): "127.0.0.2", or with its prefix
 * when bits were masked off ("10.1.2.0/24", "2001:db8:1:2::/64"); "-" for
 * an unknown family. */
void client_format(const struct client_addr *a, char *buf, size_t len);

#endif
