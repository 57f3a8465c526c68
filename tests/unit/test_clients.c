/* A client is an address under a prefix (client_of: IPv4 /32 and IPv6 /64
 * by default, ::ffff:a.b.c.d as IPv4), counted exactly even when two share
 * a bucket, and at max_connections the client holding the most gives way
 * (clients_make_room, clients_give_way): its first connection by class
 * (idle, late, slow, busy) closes for a newcomer that holds at least two
 * fewer, a newcomer from the top is refused as top_client, and when nobody
 * holds two more the refusal is full. */
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
    struct addr_prefix addr;
    uint64_t id = client_of((const struct sockaddr *)&ss, v4, v6, &addr);
    addr_prefix_format(&addr, shown, 64);
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
    struct addr_prefix none;
    uint64_t id1 = client_of((const struct sockaddr *)&unix_peer, 32, 64, &none);
    struct sockaddr_storage unspec = {.ss_family = AF_UNSPEC};
    uint64_t id2 = client_of((const struct sockaddr *)&unspec, 32, 64, NULL);
    addr_prefix_format(&none, a, sizeof a);
    ok(id1 == id2 && none.family == 0 && strcmp(a, "-") == 0,
       "a peer that is not IP is one client, shown as -");
}

/* Under KEY, the addresses of 127.0.0.0/16 in 127.0.0.1's bucket: a bit
 * per address in SHARED (65,536 bits); returns how many. */
static unsigned bucket_mates(uint8_t key, uint8_t shared[8192])
{
    uint8_t k[16];
    memset(k, key, sizeof k);
    clients_set_key(k);
    char shown[64];
    uint32_t own = bucket_of(client("127.0.0.1", 32, 64, shown));
    unsigned n = 0;
    memset(shared, 0, 8192);
    for (unsigned host = 0; host < 65536; host++) {
        char text[32];
        snprintf(text, sizeof text, "127.0.%u.%u", host / 256, host % 256);
        if (host != 1 && bucket_of(client(text, 32, 64, shown)) == own) {
            shared[host / 8] |= (uint8_t)(1u << host % 8);
            n++;
        }
    }
    return n;
}

/* Which addresses share a bucket depends on the key: whoever does not
 * know it cannot pick an address in another's bucket. */
static void test_keyed(void)
{
    static uint8_t a[8192], b[8192];
    unsigned na = bucket_mates(1, a), nb = bucket_mates(2, b);
    ok(na > 0 && nb > 0, "under either key some of 127.0.0.0/16 share 127.0.0.1's bucket");
    ok(memcmp(a, b, sizeof a) != 0, "under another key, other addresses share it");
    static const uint8_t zero[16];
    clients_set_key(zero);
}

/* The clients the tests made, by id: their masked addresses. */
#define KNOWN 8192
static struct {
    uint64_t id;
    struct addr_prefix addr;
} known[KNOWN];
static unsigned nknown;

/* Host HOST of 10.0/16 as a client: its id, its address known. */
static uint64_t host_client(unsigned host)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(0x0a000000u | host);
    struct addr_prefix addr;
    uint64_t id = client_of((const struct sockaddr *)&sa, 32, 64, &addr);
    if (nknown == KNOWN)
        abort();
    known[nknown].id = id;
    known[nknown++].addr = addr;
    return id;
}

static const struct addr_prefix *addr_of(uint64_t id)
{
    for (unsigned i = 0; i < nknown; i++) {
        if (known[i].id == id)
            return &known[i].addr;
    }
    abort();
}

/* N ids of clients in N distinct buckets: 10.0.0.1 onwards. */
static void distinct_clients(uint64_t *ids, unsigned n)
{
    unsigned found = 0;
    for (unsigned host = 1; found < n; host++) {
        uint64_t id = host_client(host);
        bool taken = false;
        for (unsigned i = 0; i < found; i++)
            taken |= bucket_of(ids[i]) == bucket_of(id);
        if (!taken)
            ids[found++] = id;
    }
}

/* Two ids of distinct clients in one bucket: the first two of 10.0/16
 * whose ids fall in one (4096 buckets: a few dozen hosts in). */
static void colliding_clients(uint64_t ids[2])
{
    static uint64_t seen[CLIENTS_BUCKETS];
    memset(seen, 0, sizeof seen);
    for (unsigned host = 1; host < 65536; host++) {
        uint64_t id = host_client(host);
        uint32_t b = bucket_of(id);
        if (seen[b] != 0) {
            ids[0] = seen[b];
            ids[1] = id;
            return;
        }
        seen[b] = id;
    }
    abort();
}

#define LINKS 64
static struct client_link links[LINKS];
static unsigned nlinks;

/* Joins a connection of ID in CLASS; returns its link. */
static struct client_link *join_as(struct clients *t, uint64_t id, enum client_class class)
{
    if (nlinks == LINKS)
        abort();
    struct client_link *l = &links[nlinks++];
    if (clients_join(t, l, id, addr_of(id)) != 0)
        abort();
    clients_set_class(t, l, class);
    return l;
}

/* Joins a connection of ID, idle or busy; returns its link. */
static struct client_link *join(struct clients *t, uint64_t id, bool idle)
{
    return join_as(t, id, idle ? CLIENT_IDLE : CLIENT_BUSY);
}

static struct client_link *make_room(uint64_t id, enum clients_refusal *why);

static struct clients table; /* 4096 buckets: not on the stack */

/* Every connection leaves (which frees the clients), then a new table. */
static void reset(void)
{
    for (unsigned i = 0; i < nlinks; i++)
        clients_leave(&table, &links[i]);
    if (table.nheap != 0 || table.heap != NULL)
        abort(); /* a client outlived its connections */
    memset(&table, 0, sizeof table);
    memset(links, 0, sizeof links);
    nlinks = 0;
}

static struct client_link *make_room(uint64_t id, enum clients_refusal *why)
{
    return clients_make_room(&table, id, addr_of(id), why);
}

static unsigned held(uint64_t id)
{
    return clients_held(&table, id, addr_of(id));
}

static void test_make_room(void)
{
    uint64_t id[4];
    distinct_clients(id, 4);
    enum clients_refusal why = CLIENTS_REFUSALS;

    /* The hog A holds 5, three of them idle (the second oldest first). */
    reset();
    struct client_link *a[5];
    for (int i = 0; i < 5; i++)
        a[i] = join(&table, id[0], false);
    clients_set_class(&table, a[1], CLIENT_IDLE);
    clients_set_class(&table, a[3], CLIENT_IDLE);
    clients_set_class(&table, a[4], CLIENT_IDLE);
    is_int(held(id[0]), 5, "A holds 5");
    ok(make_room(id[1], &why) == a[1], "B, holding none, gets A's longest idle connection closed");
    ok(a[1]->class == CLIENT_NONE && table.bucket[a[1]->bucket].idle == 2,
       "  it left A's idle list");
    is_int(table.evicted[CLIENTS_FOR_LIMIT], 1, "  counted as evicted for the limit");
    is_int(table.bucket[a[1]->bucket].evicted, 1, "  and as A's");
    clients_leave(&table, a[1]);
    join(&table, id[1], false);
    ok(make_room(id[1], &why) == a[3], "B again (1 against A's 4): the next oldest of A's");
    clients_leave(&table, a[3]);
    join(&table, id[1], false);
    /* A 3, B 2: a swap would leave B ahead. */
    ok(make_room(id[1], &why) == NULL && why == CLIENTS_TOP_CLIENT,
       "B with 2 against A's 3 is refused: top_client");
    ok(make_room(id[0], &why) == NULL && why == CLIENTS_TOP_CLIENT,
       "A's own newcomer is refused: top_client");
    is_int(table.refused[CLIENTS_TOP_CLIENT], 2, "  both counted");
    is_int(table.bucket[bucket_of(id[0])].refused, 1, "  one as A's");
    ok(make_room(id[2], &why) == a[4], "C, holding none, gets A's last idle one");
    clients_leave(&table, a[4]);
    join(&table, id[2], false);
    /* A 2 (busy), B 2, C 1: nobody idle. */
    ok(make_room(id[3], &why) == a[0],
       "with no idle connection, D still gets one of the top's: A's busy one, busy longest");
    is_int(table.evicted_class[CLIENT_BUSY], 1, "  counted as busy");
    clients_leave(&table, a[0]);
    join(&table, id[3], false);
    /* A 1, B 2, C 1, D 1. */
    ok(make_room(id[3], &why) == NULL && why == CLIENTS_TOP_CLIENT,
       "then D's second is refused: top_client (B holds only one more)");
    uint64_t e = host_client(60000);
    struct client_link *l = make_room(e, &why);
    ok(l != NULL && l->bucket == bucket_of(id[1]), "and E's first gets B's: B holds two");

    /* The top holds no idle connection: it still gives, not the next holder. */
    reset();
    struct client_link *a0 = join(&table, id[0], false);
    for (int i = 0; i < 5; i++)
        join(&table, id[0], false);
    join(&table, id[1], true);
    join(&table, id[1], true);
    join(&table, id[1], false);
    ok(make_room(id[2], &why) == a0,
       "A's 6 all busy: A gives its busy one for C, not B (3) an idle one");
    ok(make_room(id[1], &why) == a0 + 1, "A left 5: B's own newcomer (3) gets A's next busy one");
    ok(make_room(id[1], &why) == NULL && why == CLIENTS_TOP_CLIENT,
       "A 4, B 3: a swap would leave B ahead: top_client");
    ok(make_room(id[0], &why) == NULL && why == CLIENTS_TOP_CLIENT, "A's newcomer: top_client");

    /* Refusals change nothing; the class decides within the top. */
    reset();
    for (int i = 0; i < 3; i++)
        join(&table, id[0], false);
    join(&table, id[1], false);
    for (int i = 0; i < 3; i++)
        ok(make_room(id[0], &why) == NULL && why == CLIENTS_TOP_CLIENT,
           "A (3, all busy) is refused as top_client, again and again");
    struct client_link *b1 = join(&table, id[1], false);
    for (int i = 0; i < 3; i++)
        join(&table, id[1], false);
    ok(make_room(id[0], &why) == links + 3,
       "B joined to 5: A's newcomer (3) gets B's busy one, busy longest");
    clients_set_class(&table, b1 + 1, CLIENT_IDLE);
    ok(make_room(id[2], &why) == b1 + 1, "one of B's (4) went idle: it gives way for C first");
    ok(make_room(id[0], &why) == NULL && why == CLIENTS_TOP_CLIENT,
       "B left 3: A's newcomer (3) is top_client again");

    /* Everyone holds one: nobody gives, and a newcomer is not the top. */
    reset();
    for (int i = 0; i < 3; i++)
        join(&table, id[i], true);
    ok(make_room(id[3], &why) == NULL && why == CLIENTS_FULL,
       "one idle connection each: D is refused, full");
    ok(make_room(id[0], &why) == NULL && why == CLIENTS_TOP_CLIENT, "and A's second: top_client");

    /* Clients on many addresses, each about at its share, do not close
     * each other's connections in turn: one at its share is refused even
     * when the top holds two more; one below it still gets in. */
    reset();
    int holds[4] = {5, 3, 3, 1}; /* 12 over 4 clients: a share of 3 */
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < holds[i]; k++)
            join(&table, id[i], true);
    ok(make_room(id[1], &why) == NULL && why == CLIENTS_SHARE,
       "B at its share (3 of 12 over 4) is refused, share, though A holds two more");
    ok(make_room(id[3], &why) != NULL, "D, below its share (1), gets one of A's");
}

/* Newcomers in one poll: an evicted connection closes only when the loop
 * runs its close callback, after the poll, but it counts no more for its
 * client from the moment it is chosen. */
static void test_burst(void)
{
    uint64_t id[2];
    distinct_clients(id, 2);
    enum clients_refusal why = CLIENTS_REFUSALS;
    reset();
    for (int i = 0; i < 10; i++)
        join(&table, id[0], true);
    struct client_link *gone[10];
    unsigned evicted = 0, refused = 0;
    for (int i = 0; i < 10; i++) {
        struct client_link *l = make_room(id[1], &why);
        if (l == NULL) {
            refused += why == CLIENTS_TOP_CLIENT;
            continue;
        }
        gone[evicted++] = l;
        join(&table, id[1], false);
    }
    is_int(evicted, 5, "A's 10 idle against 10 of B's in one poll: 5 give way");
    is_int(refused, 5, "  and B's other 5 are refused as top_client");
    is_int(held(id[0]), 5, "  A holds 5");
    is_int(held(id[1]), 5, "  B holds 5");
    for (unsigned i = 0; i < evicted; i++)
        clients_leave(&table, gone[i]);
    is_int(held(id[0]), 5, "A's evicted ones closing later leave its count as it was");
}

/* Behind a load balancer L (its id) a connection counts as the balancer's
 * until its header names its client: then it is admitted as a newcomer of
 * that client would be, its own place in the balancer's count given up
 * first. */
static void test_rejoin(void)
{
    uint64_t id[3];
    distinct_clients(id, 3);
    uint64_t lb = host_client(60010);
    enum clients_refusal why = CLIENTS_REFUSALS;
    struct client_link *evict;

    /* A lone client A holds 3 (all busy); its fourth comes through L at the limit. */
    reset();
    for (int i = 0; i < 3; i++)
        join(&table, id[0], false);
    struct client_link *l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, id[0], addr_of(id[0]), true, &evict, &why), 1,
           "A (3) at the limit: its fourth, named in the header, is refused");
    ok(evict == NULL && why == CLIENTS_TOP_CLIENT, "  as top_client, nothing evicted");
    ok(l->client == NULL && held(lb) == 0 && held(id[0]) == 3,
       "  it counts for nobody, the balancer holds nothing, A its 3");
    is_int(table.bucket[bucket_of(id[0])].refused, 1, "  the refusal is A's");

    /* A 2, B 2 at the limit: A's fifth is refused, not B's evicted for a tie. */
    reset();
    for (int i = 0; i < 2; i++) {
        join(&table, id[0], false);
        join(&table, id[1], false);
    }
    l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, id[0], addr_of(id[0]), true, &evict, &why), 1,
           "A 2, B 2: A's fifth through the balancer is refused");
    ok(evict == NULL && why == CLIENTS_TOP_CLIENT && table.evicted[CLIENTS_FOR_LIMIT] == 0,
       "  top_client, and no eviction for a tie");

    /* A newcomer C holding none at the limit: A's oldest gives way. */
    struct client_link *a0 = links;
    l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, id[2], addr_of(id[2]), true, &evict, &why), 0,
           "C, holding none, is admitted");
    ok(evict == a0 && held(id[0]) == 1 && held(id[2]) == 1 && held(lb) == 0,
       "  A's busy longest gives way; C holds its one, the balancer none");
    ok(l->client != NULL && l->bucket == bucket_of(id[2]), "  the link is C's");
    clients_leave(&table, evict);

    /* Below the limit the header only moves the connection. */
    l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, id[0], addr_of(id[0]), false, &evict, &why), 0,
           "not at the limit: A's connection moves in");
    ok(evict == NULL && held(id[0]) == 2 && held(lb) == 0, "  nothing evicted, A holds 2");

    /* The balancer's own connection (LOCAL) is decided as the balancer's,
     * which holds only the connections whose header is on its way. */
    l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, lb, addr_of(lb), true, &evict, &why), 0,
           "a LOCAL header at the limit (A 2, B 2, C 1): the balancer's is admitted");
    ok(evict != NULL && evict->client != l->client && held(lb) == 1,
       "  a top client's gives way; the balancer holds it");
    clients_leave(&table, evict);
    struct client_link *pending = join(&table, lb, false);
    l = join(&table, lb, false);
    is_int(clients_rejoin(&table, l, lb, addr_of(lb), true, &evict, &why), 1,
           "another, with two of the balancer's besides it against the top's 2: refused");
    ok(evict == NULL && why == CLIENTS_TOP_CLIENT && held(lb) == 2 && pending->client != NULL,
       "  as top_client; the balancer keeps its two");
}

static void test_give_way(void)
{
    uint64_t id[2];
    distinct_clients(id, 2);
    reset();
    struct client_link *a0 = join(&table, id[0], true);
    join(&table, id[1], true);
    ok(clients_give_way(&table) == NULL, "out of fds, nobody holding two gives nothing");
    struct client_link *a1 = join(&table, id[0], false);
    ok(clients_give_way(&table) == a0, "A holding two gives its idle one");
    is_int(table.evicted[CLIENTS_FOR_FDS], 1, "  counted as evicted for fds");
    ok(clients_give_way(&table) == NULL, "and then nothing: its other one is busy");
    clients_set_class(&table, a1, CLIENT_IDLE);
    clients_leave(&table, a1);
    is_int(table.bucket[a1->bucket].idle, 0, "an idle connection that goes leaves the list");
    ok(a1->client == NULL && a1->class == CLIENT_NONE, "  and it is in none");
    clients_leave(&table, a0);
    is_int(held(id[0]), 0, "A holds none");
}

/* Within the top, the connection that costs most for the least progress
 * gives way first: idle, late head, slow, then the one busy longest; out
 * of fds, never a busy one. */
static void test_classes(void)
{
    uint64_t id[3];
    distinct_clients(id, 3);
    enum clients_refusal why = CLIENTS_REFUSALS;
    reset();
    struct client_link *busy = join_as(&table, id[0], CLIENT_BUSY);
    struct client_link *slow = join_as(&table, id[0], CLIENT_SLOW);
    struct client_link *late = join_as(&table, id[0], CLIENT_LATE);
    struct client_link *idle = join_as(&table, id[0], CLIENT_IDLE);
    struct client_link *busy2 = join_as(&table, id[0], CLIENT_BUSY);
    join_as(&table, id[1], CLIENT_IDLE);
    is_int(table.bucket[bucket_of(id[0])].idle, 2, "A's idle and late ones show as idle");
    ok(make_room(id[2], &why) == idle, "A (5) gives its idle one first, not B its idle one");
    ok(make_room(id[2], &why) == late, "A (4) then its late head");
    ok(clients_give_way(&table) == slow, "out of fds, A (3) gives its slow one");
    ok(clients_give_way(&table) == NULL, "and then nothing: never a busy one out of fds");
    clients_set_class(&table, busy2, CLIENT_IDLE);
    clients_set_class(&table, busy2, CLIENT_BUSY);
    join_as(&table, id[0], CLIENT_BUSY);
    join_as(&table, id[0], CLIENT_BUSY);
    ok(make_room(id[2], &why) == busy,
       "at the limit A (4) gives the one busy longest (the other went idle and back)");
    is_int(table.evicted_class[CLIENT_IDLE], 1, "/stats: 1 idle");
    is_int(table.evicted_class[CLIENT_LATE], 1, "  1 late head");
    is_int(table.evicted_class[CLIENT_SLOW], 1, "  1 slow");
    is_int(table.evicted_class[CLIENT_BUSY], 1, "  1 busy");
    is_int(table.evicted[CLIENTS_FOR_FDS], 1, "  1 of them for fds");
}

/* Two addresses in one bucket are two clients: counted apart, and neither
 * refused nor evicted for the other's count. */
static void test_exact(void)
{
    uint64_t id[2];
    colliding_clients(id);
    enum clients_refusal why = CLIENTS_REFUSALS;
    reset();
    ok(bucket_of(id[0]) == bucket_of(id[1]) && id[0] != id[1], "two clients in one bucket");
    struct client_link *victim = join_as(&table, id[1], CLIENT_IDLE);
    for (int i = 0; i < 6; i++)
        join_as(&table, id[0], CLIENT_BUSY);
    is_int(held(id[0]), 6, "the hog holds 6");
    is_int(held(id[1]), 1, "the victim in its bucket holds 1, its own");
    is_int(table.bucket[bucket_of(id[0])].addresses, 2, "the bucket holds two addresses");
    struct client_link *l = make_room(id[1], &why);
    ok(l != NULL && l->client != victim->client && l != victim,
       "the victim's newcomer is not refused as the top: the hog's busy one gives way");
    clients_leave(&table, l);
    join_as(&table, id[1], CLIENT_BUSY);
    uint64_t other = host_client(60002);
    l = make_room(other, &why);
    ok(l != NULL && l->client != victim->client,
       "another client's newcomer takes the hog's, not the victim's idle one");
    struct clients_row top[CLIENTS_TOP];
    unsigned n = clients_top(&table, 0, top);
    ok(n == 1 && top[0].conns == 6, "the top's row: the bucket's 6 connections (4 + 2)");
    struct clients_peer peer;
    clients_peer(&table, 0, &peer);
    is_int(peer.row[0].addresses, 2, "  with its two addresses");
    for (unsigned i = 0; i < nlinks; i++)
        clients_leave(&table, &links[i]);
    is_int(table.bucket[bucket_of(id[0])].addresses, 0, "all gone: no address left");
    ok(table.bucket[bucket_of(id[0])].chain == NULL && table.nheap == 0, "  no client, no heap");
}

/* The heap's root holds the most, whatever joins and leaves. */
static void test_heap(void)
{
    uint64_t id[40];
    distinct_clients(id, 40);
    reset();
    static struct client_link many[40][12];
    unsigned want[40] = {0};
    unsigned seed = 7;
    bool right = true;
    for (unsigned step = 0; step < 3000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned c = (seed >> 16) % 40;
        bool add = ((seed >> 8) & 3) != 0 ? want[c] < 12 : want[c] == 0;
        if (add)
            clients_join(&table, &many[c][want[c]++], id[c], addr_of(id[c]));
        else
            clients_leave(&table, &many[c][--want[c]]);
        unsigned most = 0;
        for (unsigned k = 0; k < 40; k++)
            most = want[k] > most ? want[k] : most;
        right &= most == 0 ? table.nheap == 0 : table.heap[0]->conns == most;
    }
    ok(right, "3000 joins and leaves of 40 clients: the root always holds the most");
    for (unsigned c = 0; c < 40; c++) {
        while (want[c] > 0)
            clients_leave(&table, &many[c][--want[c]]);
    }
    ok(table.nheap == 0 && table.heap == NULL, "all gone: the heap is freed");
}

static void test_top(void)
{
    uint64_t id[10];
    distinct_clients(id, 10);
    reset();
    for (unsigned c = 0; c < 10; c++) {
        for (unsigned i = 0; i < c + 1; i++)
            join(&table, id[c], false);
    }
    struct clients_row top[CLIENTS_TOP];
    unsigned n = clients_top(&table, 0, top);
    is_int(n, CLIENTS_TOP, "ten clients: the top eight are shown");
    bool ordered = true;
    for (unsigned i = 0; i < n; i++)
        ordered &= top[i].bucket == bucket_of(id[9 - i]) && top[i].conns == 10 - i;
    ok(ordered, "  most first: 10, 9, ... 3 connections");
    reset();
    join(&table, id[3], false);
    n = clients_top(&table, 0, top);
    ok(n == 1 && top[0].bucket == bucket_of(id[3]), "one client: one row");
}

/* Client ID's figures of the last second at NOW_MS, as clients_top shows
 * them (0, 0 when it has no row). */
static void used_at(uint64_t id, uint64_t now_ms, uint64_t *pool_ns, uint64_t *sent)
{
    struct clients_row top[CLIENTS_TOP];
    unsigned n = clients_top(&table, now_ms, top);
    *pool_ns = *sent = 0;
    for (unsigned i = 0; i < n; i++) {
        if (top[i].bucket == bucket_of(id)) {
            *pool_ns = top[i].pool_ns;
            *sent = top[i].sent;
        }
    }
}

/* "The last second" is the window running now and the whole one before:
 * what was added within the last CLIENTS_WINDOW_MS always counts, what is
 * two windows old never does; reading rolls nothing. */
static void test_window(void)
{
    uint64_t id[1], pool, sent;
    distinct_clients(id, 1);
    reset();
    clients_sent(&table, id[0], 100, 500);
    clients_ran(&table, id[0], 7000, 900);
    used_at(id[0], 999, &pool, &sent);
    ok(sent == 100 && pool == 7000, "the window running now counts");
    used_at(id[0], 1499, &pool, &sent);
    ok(sent == 100 && pool == 7000, "and the whole one before (1 s later)");
    used_at(id[0], 2000, &pool, &sent);
    ok(sent == 0 && pool == 0, "two windows on: nothing (and the client has no row)");
    clients_sent(&table, id[0], 10, 1200);
    used_at(id[0], 1999, &pool, &sent);
    is_int(sent, 110, "read at 1999: 500's 100 and 1200's 10 (reading rolled nothing)");
    clients_sent(&table, id[0], 1, 2100);
    used_at(id[0], 2100, &pool, &sent);
    ok(sent == 11 && pool == 0, "added at 2100: the window before (1200's 10) stays, 0..999 went");
    clients_sent(&table, id[0], 5, 4000);
    used_at(id[0], 4000, &pool, &sent);
    is_int(sent, 5, "a window skipped: both old ones are over");
}

/* Ranked by the sum of the shares of pool time, bytes and connections. */
static void test_rank(void)
{
    uint64_t id[12];
    distinct_clients(id, 12);
    reset();
    const uint64_t now = 10500;
    /* 0: a download (pool and bytes), 1: a smaller one, 2: an observer's
     * connection, 3: a hog of 6 idle connections, 4: pool work only. */
    join(&table, id[0], false);
    clients_sent(&table, id[0], 9000000, now - 1000);
    clients_ran(&table, id[0], 6000000, now);
    join(&table, id[1], false);
    clients_ran(&table, id[1], 1000000, now);
    clients_sent(&table, id[1], 1000000, now);
    join(&table, id[2], false);
    for (unsigned i = 0; i < 6; i++)
        join(&table, id[3], true);
    clients_ran(&table, id[4], 3000000, now);
    struct clients_row top[CLIENTS_TOP];
    unsigned n = clients_top(&table, now, top);
    is_int(n, 5, "five clients with a connection, pool time or bytes: five rows");
    /* Shares: pool 0.6 0.1 0 0 0.3; bytes 0.9 0.1 0 0 0; conns 1/9 1/9 1/9 6/9 0. */
    const unsigned want[5] = {0, 3, 1, 4, 2};
    bool ordered = n == 5;
    for (unsigned i = 0; i < n && ordered; i++)
        ordered = top[i].bucket == bucket_of(id[want[i]]);
    ok(ordered, "  the download (1.61), the hog (0.67), the small one (0.31), pool only (0.3), "
                "the observer (0.11)");
    is_int(top[0].pool_permille, 600, "  the download's pool share: 600 permille");
    ok(top[0].sent == 9000000 && top[0].pool_ns == 6000000,
       "  its bytes of the window before count, and its pool time");

    /* Seven more with a connection each: the eight shown are the top eight. */
    for (unsigned c = 5; c < 12; c++)
        join(&table, id[c], false);
    n = clients_top(&table, now, top);
    ok(n == CLIENTS_TOP && top[0].bucket == bucket_of(id[0]) && top[1].bucket == bucket_of(id[3]),
       "twelve clients: eight rows, the same two first");
}

/* The value of figure DEF in rank RANK ("1".."8") of S's top_clients (of
 * the client: the last digit of its address), or -1. */
static long long top_figure(const struct snapshot *s, const char *rank, const struct snap_def *def)
{
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type == SNAP_FIGURE && e->def == def && e->parent != SNAP_TOP &&
            strcmp(s->entry[e->parent].name, rank) == 0)
            return def->kind == SNAP_INFO ? (long long)(e->text[7] - '0') : (long long)e->value;
    }
    return -1;
}

/* With workers, the top of every worker is summed by client and ranked again. */
static void test_peers(void)
{
    char x_text[64];
    uint64_t x = client("10.0.0.1", 32, 64, x_text);
    struct addr_prefix x_addr;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "10.0.0.1", &sa.sin_addr);
    client_of((const struct sockaddr *)&sa, 32, 64, &x_addr);
    reset();
    clients_join(&table, &links[nlinks++], x, &x_addr);
    clients_ran(&table, x, 1000, 100);
    struct clients_peer peer = {.all_pool_ns = 10000, .all_conns = 13, .n = 2};
    peer.row[0] = (struct clients_peer_row){.conns = 10, .idle = 10, .pool_ns = 8000};
    strcpy(peer.row[0].client, "10.0.0.3");
    peer.row[1] = (struct clients_peer_row){.conns = 3, .pool_ns = 1000};
    strcpy(peer.row[1].client, x_text);
    struct snapshot s;
    snap_init(&s);
    clients_stats(&table, 100, &peer, 1, &s);
    ok(snap_complete(&s), "a top with a peer's: complete");
    /* Scores: 10.0.0.3 8/11 + 10/14, 10.0.0.1 2/11 + 4/14 (no bytes). */
    is_int(top_figure(&s, "1", &top_client_def), 3, "rank 1: the peer's hog 10.0.0.3");
    is_int(top_figure(&s, "1", &top_idle_def), 10, "  with its idle connections");
    is_int(top_figure(&s, "2", &top_client_def), 1, "rank 2: 10.0.0.1, on both workers");
    is_int(top_figure(&s, "2", &top_conns_def), 4, "  its connections summed: 1 + 3");
    is_int(top_figure(&s, "2", &top_pool_def), 2, "  its pool time summed: 2 us");
    is_int(top_figure(&s, "2", &top_pool_share_def), 181, "  its share of both's pool time: 2/11");
    is_int(top_figure(&s, "3", &top_conns_def), -1, "two clients: two rows");
    snap_free(&s);
    snap_init(&s);
    clients_stats(&table, 100, NULL, 0, &s);
    ok(top_figure(&s, "1", &top_conns_def) == 1 && top_figure(&s, "2", &top_conns_def) == -1,
       "alone: its own top only");
    snap_free(&s);
}

int main(void)
{
    test_peers();
    test_prefix();
    test_keyed();
    test_make_room();
    test_burst();
    test_give_way();
    test_rejoin();
    test_classes();
    test_exact();
    test_heap();
    test_top();
    test_window();
    test_rank();
    return tap_done();
}
