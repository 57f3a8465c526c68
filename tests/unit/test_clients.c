/* A client is an address under a prefix (client_of: IPv4 /32 and IPv6 /64
 * by default, ::ffff:a.b.c.d as IPv4). */
#include "../../server/http/clients.c"

#include <stdlib.h>

#include "tests/tap.h"

/* TEXT (IPv4, or IPv6 when it has a colon) as a client under V4, V6 bits:
 * its id, and its text in *SHOWN. */
static uint64_t client(const char *text, unsigned v4, unsigned v6, char shown[64])
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(text, ':') != NULL) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(80);
        if (inet_pton(AF_INET6, text, &a->sin6_addr) != 1)
            abort();
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(80);
        if (inet_pton(AF_INET, text, &a->sin_addr) != 1)
            abort();
    }
    struct client_addr addr;
    uint64_t id = client_of((const struct sockaddr *)&ss, v4, v6, &addr);
    client_format(&addr, shown, 64);
    return id;
}

static void test_prefix(void)
{
    static const struct {
        const char *addr;
        unsigned v4, v6;
        const char *shown;
    } cases[] = {
        {"192.0.2.77", 32, 64, "192.0.2.77"},
        {"192.0.2.77", 24, 64, "192.0.2.0/24"},
        {"192.0.2.77", 31, 64, "192.0.2.76/31"},
        {"192.0.2.77", 1, 64, "128.0.0.0/1"},
        {"192.0.2.77", 0, 64, "0.0.0.0/0"},
        {"192.0.2.77", 40, 64, "192.0.2.77"}, /* beyond 32: all of it */
        {"2001:db8:1:2:3:4:5:6", 32, 64, "2001:db8:1:2::/64"},
        {"2001:db8:1:2:3:4:5:6", 32, 128, "2001:db8:1:2:3:4:5:6"},
        {"2001:db8:1:ffff:3:4:5:6", 32, 57, "2001:db8:1:ff80::/57"},
        {"2001:db8:1:2:3:4:5:6", 32, 0, "::/0"},
        {"::ffff:192.0.2.77", 32, 64, "192.0.2.77"},    /* mapped: IPv4's prefix */
        {"::ffff:192.0.2.77", 24, 128, "192.0.2.0/24"}, /* whatever IPv6's is */
        {"::192.0.2.77", 24, 128, "::192.0.2.77"},      /* v4-compatible is IPv6 */
        {"::1", 32, 64, "::/64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char shown[64], desc[128];
        client(cases[i].addr, cases[i].v4, cases[i].v6, shown);
        snprintf(desc, sizeof desc, "%s under %u,%u is %s", cases[i].addr, cases[i].v4, cases[i].v6,
                 cases[i].shown);
        is_str(shown, cases[i].shown, desc);
    }

    char a[64], b[64];
    ok(client("2001:db8:1:2::1", 32, 64, a) == client("2001:db8:1:2:ffff::9", 32, 64, b),
       "two hosts of one /64 are one client");
    ok(client("2001:db8:1:2::1", 32, 64, a) != client("2001:db8:1:3::1", 32, 64, b),
       "the next /64 is another");
    ok(client("2001:db8:1:2::1", 32, 128, a) != client("2001:db8:1:2::2", 32, 128, b),
       "under /128 each address is its own");
    ok(client("::ffff:127.0.0.2", 32, 64, a) == client("127.0.0.2", 32, 64, b),
       "::ffff:127.0.0.2 is the client 127.0.0.2");
    ok(client("127.0.0.2", 32, 64, a) != client("127.0.0.3", 32, 64, b),
       "127.0.0.2 and 127.0.0.3 are two clients");
    ok(client("127.0.0.2", 24, 64, a) == client("127.0.0.3", 24, 64, b), "under /24 they are one");
    ok(client("10.0.0.1", 8, 64, a) != client("10.0.0.1", 16, 64, b),
       "the prefix length is part of the id");
    ok(client("0.0.0.0", 0, 0, a) != client("::", 0, 0, b),
       "under /0 all of IPv4 is one client, and all of IPv6 another");

    struct sockaddr_storage unix_peer = {.ss_family = AF_UNIX};
    struct client_addr none;
    uint64_t id1 = client_of((const struct sockaddr *)&unix_peer, 32, 64, &none);
    struct sockaddr_storage unspec = {.ss_family = AF_UNSPEC};
    uint64_t id2 = client_of((const struct sockaddr *)&unspec, 32, 64, NULL);
    client_format(&none, a, sizeof a);
    ok(id1 == id2 && none.family == 0 && strcmp(a, "-") == 0,
       "a peer that is not IP is one client, shown as -");
}

int main(void)
{
    test_prefix();
    return tap_done();
}
