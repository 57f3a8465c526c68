#ifndef UNCLOG_PROXY_HEADER_H
#define UNCLOG_PROXY_HEADER_H

/* The PROXY protocol's header (HAProxy's proxy-protocol.txt, versions 1
 * and 2): what a load balancer sends first on a connection to name the
 * client it relays. Pure: no libuv, no allocation; it reads bytes as they
 * come, however few at a time, and says when the header is whole.
 *
 * Version 1 is one line of text of at most 107 bytes ending in CRLF:
 * "PROXY TCP4 SRC DST SPORT DPORT", TCP6 likewise, or "PROXY UNKNOWN"
 * and anything up to the CRLF. Version 2 is a 16-byte binary block (a
 * 12-byte signature, version and command, family and protocol, length)
 * and the addresses and TLVs it counts, which we skip. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROXY_V1_MAX 107
/* The spec's senders send the header in one segment; the smallest IPv4
 * MSS is 536 bytes: a longer header is refused rather than waited for. */
#define PROXY_HEADER_MAX 536

struct proxy_header {
    /* The connection is the peer's own: a v2 LOCAL command (a health
     * check; its family and address block, whatever they are, ignored), v1
     * UNKNOWN, or a family or protocol we serve as the peer (v2 UNSPEC,
     * UNIX, DGRAM). SOURCE is then unset: the header names no client. */
    bool local;
    struct sockaddr_storage source; /* else the client: AF_INET or AF_INET6, its port */
};

/* Parses the PROXY header at the start of P[0..LEN), the bytes received
 * so far. Returns the header's length (> 0) once it is whole, *OUT filled
 * (the bytes after it are the client's); 0 while P is a proper beginning
 * of a header that may still turn out valid (LEN 0 included); -EINVAL as
 * soon as P cannot begin a valid header, or is longer than the version's
 * limit (PROXY_V1_MAX, PROXY_HEADER_MAX) without ending. */
int proxy_header_parse(const uint8_t *p, size_t len, struct proxy_header *out);

#endif
