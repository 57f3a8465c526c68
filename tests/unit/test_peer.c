/* Which peers /settings trusts: loopback over IPv4, IPv6 and IPv4 mapped
 * into IPv6 (a dual-stack socket's view of 127.0.0.1), and nothing else. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "server/base/util.h"
#include "tests/tap.h"

static bool v4(const char *text)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, text, &a.sin_addr) != 1)
        return false;
    return addr_is_loopback((const struct sockaddr *)&a);
}

static bool v6(const char *text)
{
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, text, &a.sin6_addr) != 1)
        return false;
    return addr_is_loopback((const struct sockaddr *)&a);
}

int main(void)
{
    ok(v4("127.0.0.1"), "IPv4 127.0.0.1 is loopback");
    ok(v4("127.255.3.4"), "all of 127/8 is");
    ok(!v4("128.0.0.1"), "128.0.0.1 is not");
    ok(!v4("10.0.0.1"), "a private address is not");
    ok(!v4("0.0.0.0"), "0.0.0.0 is not");
    ok(!v4("1.0.0.127"), "127 in the last byte is not");
    ok(v6("::1"), "IPv6 ::1 is loopback");
    ok(!v6("::2"), "::2 is not");
    ok(!v6("::"), ":: is not");
    ok(!v6("fe80::1"), "link-local fe80::1 is not");
    ok(!v6("2001:db8::1"), "a global IPv6 address is not");
    ok(v6("::ffff:127.0.0.1"), "v4-mapped 127.0.0.1 is loopback");
    ok(v6("::ffff:127.1.2.3"), "v4-mapped 127/8 is");
    ok(!v6("::ffff:192.168.1.1"), "v4-mapped 192.168.1.1 is not");
    ok(!v6("::127.0.0.1"), "the deprecated v4-compatible ::127.0.0.1 is not");
    ok(!v6("64:ff9b::7f00:1"), "NAT64 of 127.0.0.1 is not");
    struct sockaddr_un_like {
        unsigned short family;
        char path[108];
    } u = {.family = 1 /* AF_UNIX */};
    ok(!addr_is_loopback((const struct sockaddr *)(const void *)&u), "another family is not");
    return tap_done();
}
