/* Which peers /settings trusts: loopback over IPv4, IPv6 and IPv4 mapped
 * into IPv6 (a dual-stack socket's view of 127.0.0.1), and nothing else.
 * And the address prefixes stats_from lets in: parsed, printed back, and
 * which peers they hold. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
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

/* Prefixes as stats_from takes them: TEXT reads back as SHOWN, or is
 * refused (SHOWN NULL). */
static const struct {
    const char *text, *shown;
} parse_cases[] = {
    {"192.0.2.7", "192.0.2.7"},
    {"192.0.2.0/24", "192.0.2.0/24"},
    {"0.0.0.0/0", "0.0.0.0/0"},
    {"10.0.0.0/8", "10.0.0.0/8"},
    {"192.0.2.7/32", "192.0.2.7"},
    {"2001:db8::/32", "2001:db8::/32"},
    {"2001:db8::7", "2001:db8::7"},
    {"::/0", "::/0"},
    {"::ffff:10.0.0.0/104", "10.0.0.0/8"}, /* mapped IPv4 is IPv4 */
    {"::ffff:192.0.2.7", "192.0.2.7"},
    {"192.0.2.7/24", NULL}, /* a host or a network? */
    {"2001:db8::1/32", NULL},
    {"192.0.2.0/33", NULL},
    {"2001:db8::/129", NULL},
    {"192.0.2.0/", NULL},
    {"192.0.2.0/024", NULL},
    {"192.0.2.0/2x", NULL},
    {"/24", NULL},
    {"", NULL},
    {"192.0.2", NULL},
    {"example.com", NULL},
    {"192.0.2.0/24/8", NULL},
    {" 192.0.2.7", NULL}, /* the caller trims */
};

/* Whether TEXT, a prefix, holds the peer PEER (an IPv4 or IPv6 address as
 * a socket gives it). */
static bool holds(const char *text, const char *peer)
{
    struct addr_prefix p, a;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (addr_prefix_parse(text, strlen(text), &p) != 0)
        return false;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, peer, &in->sin_addr) == 1)
        in->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, peer, &in6->sin6_addr) == 1)
        in6->sin6_family = AF_INET6;
    else
        return false;
    addr_prefix_of((const struct sockaddr *)&ss, 32, 128, &a);
    return addr_prefix_contains(&p, &a);
}

static void prefixes(void)
{
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        struct addr_prefix p;
        char shown[64] = "(refused)", desc[128];
        const char *text = parse_cases[i].text, *want = parse_cases[i].shown;
        if (addr_prefix_parse(text, strlen(text), &p) == 0)
            addr_prefix_format(&p, shown, sizeof shown);
        snprintf(desc, sizeof desc, "prefix '%s': %s", text, want ? want : "refused");
        is_str(shown, want ? want : "(refused)", desc);
    }
    struct addr_prefix p;
    ok(addr_prefix_parse("192.0.2.0/24", 9, &p) == 0 && p.bits == 32,
       "only LEN bytes are read: 192.0.2.0 of 192.0.2.0/24");
    ok(holds("192.0.2.0/24", "192.0.2.2"), "192.0.2.0/24 holds 192.0.2.2");
    ok(holds("192.0.2.0/24", "192.0.2.255"), "and 192.0.2.255");
    ok(!holds("192.0.2.0/24", "192.0.3.2"), "not 192.0.3.2");
    ok(holds("192.0.2.0/24", "::ffff:192.0.2.9"), "and a dual-stack socket's ::ffff:192.0.2.9");
    ok(holds("192.0.2.7", "192.0.2.7"), "an address holds itself");
    ok(!holds("192.0.2.7", "192.0.2.8"), "and no other");
    ok(holds("0.0.0.0/0", "203.0.113.1"), "0.0.0.0/0 holds every IPv4 peer");
    ok(!holds("0.0.0.0/0", "2001:db8::1"), "but no IPv6 one");
    ok(holds("2001:db8::/32", "2001:db8:1::5"), "2001:db8::/32 holds 2001:db8:1::5");
    ok(!holds("2001:db8::/32", "2001:db9::5"), "not 2001:db9::5");
    ok(!holds("::/0", "192.0.2.2"), "::/0 holds no IPv4 peer");
    ok(holds("10.0.0.0/7", "11.255.0.1"), "a length off a byte boundary: 10.0.0.0/7 holds 11.x");
    ok(!holds("10.0.0.0/7", "12.0.0.1"), "not 12.x");
    struct addr_prefix unknown = {0}, any;
    addr_prefix_parse("0.0.0.0/0", 9, &any);
    ok(!addr_prefix_contains(&any, &unknown), "no prefix holds a peer of another family");
}

int main(void)
{
    prefixes();
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
