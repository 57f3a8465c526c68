/* libFuzzer target: the PROXY protocol header (server/http/proxy_header.c).
 *
 * The verdict must not depend on how the header arrives: every prefix of
 * the input is parsed as a socket that delivers one byte at a time would
 * show it. A header found whole at length N is wanted-more (0) at every
 * shorter prefix and the same length at every longer one; a refusal holds
 * for every longer prefix; a whole header fits its version's limit and a
 * source it names is an IPv4 or IPv6 address. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "server/http/proxy_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2 * PROXY_HEADER_MAX)
        size = 2 * PROXY_HEADER_MAX;
    int first = 0; /* the first non-zero verdict */
    for (size_t n = 0; n <= size; n++) {
        struct proxy_header h;
        int rc = proxy_header_parse(data, n, &h);
        if (first == 0) {
            first = rc;
            if (rc > 0 && ((size_t)rc != n || rc > PROXY_HEADER_MAX))
                abort(); /* whole exactly at its last byte */
            if (rc < 0 && rc != -EINVAL)
                abort();
            if (rc > 0 && !h.local && h.source.ss_family != AF_INET &&
                h.source.ss_family != AF_INET6)
                abort();
        } else if (rc != first) {
            abort(); /* a later byte changed the verdict */
        }
        if (first == 0 && n >= PROXY_HEADER_MAX)
            abort(); /* waiting for more than any header may be */
    }
    return 0;
}
