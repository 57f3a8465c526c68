/* The send share as pure code: passes, clients taking turns by bytes. */
#include <stdint.h>
#include <stdio.h>

#include "server/http/share.h"
#include "tests/tap.h"

#define KB 1024ull
#define MB (1024ull * 1024)

/* Clients that land in distinct buckets. */
#define ATTACKER 1
#define VICTIM   2

static struct share_item items[256];

static struct share_item *item(int i, uint64_t client, size_t bytes)
{
    items[i] = (struct share_item){.client = client, .bytes = bytes};
    return &items[i];
}

static int index_of(const struct share_item *it)
{
    return it == NULL ? -1 : (int)(it - items);
}

/* Runs passes until nothing waits; the indexes in the order they went, as
 * "a b c" (at most LIMIT passes). */
static const char *drain(struct share *s, int limit)
{
    static char out[2048];
    size_t len = 0;
    out[0] = '\0';
    for (int t = 0; t < limit && share_waiting(s); t++) {
        share_new_pass(s);
        struct share_item *it;
        while ((it = share_next(s)) != NULL)
            len +=
                (size_t)snprintf(out + len, sizeof out - len, "%s%d", len ? " " : "", index_of(it));
    }
    return out;
}

/* A share whose passes take one write each, with the pass full: every
 * write admitted waits. */
static void stalled(struct share *s)
{
    share_init(s, 1);
    share_new_pass(s);
    s->pass_used = 1;
}

static void test_at_once(void)
{
    struct share s;
    share_init(&s, 256 * KB);
    ok(share_admit(&s, item(0, ATTACKER, 1 * MB)), "a write goes at once while nothing waits");
    ok(!share_admit(&s, item(1, ATTACKER, 1 * MB)), "the next one waits: the pass is full");
    ok(!share_admit(&s, item(2, VICTIM, 64 * KB)), "and so does another client's");
    is_int(s.counters.at_once, 1, "one went at once");
    is_int(s.counters.deferred, 2, "two were deferred");
    share_new_pass(&s);
    is_int(index_of(share_next(&s)), 1, "the next pass serves the first client in the ring");
    is_int(index_of(share_next(&s)), -1, "one write of 1 MiB fills a 256 KiB pass");
    share_new_pass(&s);
    is_int(index_of(share_next(&s)), 2, "the other client at the next pass");
    ok(!share_waiting(&s), "nothing waits");
    share_new_pass(&s);
    ok(share_admit(&s, item(3, VICTIM, 1 * MB)), "an empty pass lets a write go at once again");
}

/* A client with ten connections, each with a 1 MiB write waiting, and a
 * client with one: by clients, not by connections. */
static void test_many_against_one(void)
{
    struct share s;
    stalled(&s);
    for (int i = 0; i < 10; i++)
        share_admit(&s, item(i, ATTACKER, 1 * MB));
    share_admit(&s, item(10, VICTIM, 1 * MB));
    is_str(drain(&s, 2), "0 10", "the single connection's write goes second, not eleventh");
    /* The victim writes again whenever its last write is out: one write in
     * flight, as a pump with one free slot. */
    int victim_writes = 1, attacker_writes = 1;
    for (int t = 0; t < 38; t++) {
        if (!items[10].node.queued)
            share_admit(&s, item(10, VICTIM, 1 * MB));
        share_new_pass(&s);
        struct share_item *it = share_next(&s);
        if (it == &items[10]) {
            victim_writes++;
        } else if (it != NULL) {
            attacker_writes++;
            share_admit(&s, it); /* its connection writes again */
        }
    }
    is_int(victim_writes, 20, "the victim writes every other pass");
    is_int(attacker_writes, 20, "the attacker the others: bytes shared by client");
    ok(s.counters.lag_max <= SHARE_QUANTUM + 1 * MB, "no client got beyond a quantum and a write");
}

/* Unequal writes: the share is by bytes, not by writes. */
static void test_by_bytes(void)
{
    struct share s;
    stalled(&s);
    for (int i = 0; i < 32; i++)
        share_admit(&s, item(i, ATTACKER, 64 * KB));
    share_admit(&s, item(100, VICTIM, 1 * MB));
    share_admit(&s, item(101, VICTIM, 1 * MB));
    uint64_t bytes[2] = {0, 0}, ahead = 0;
    for (int t = 0; t < 64 && share_waiting(&s); t++) {
        share_new_pass(&s);
        struct share_item *it = share_next(&s);
        bytes[it->client == VICTIM] += it->bytes;
        if (it == &items[101])
            ahead = bytes[1] - bytes[0];
    }
    ok(ahead > 0 && ahead <= SHARE_QUANTUM + 1 * MB,
       "the victim's 2 MiB end when the attacker got 2 MiB, less a quantum and a write");
    is_int(bytes[0], 2 * MB, "the attacker got all of its own");
    ok(s.counters.lag_max <= SHARE_QUANTUM + 1 * MB, "lag within a quantum and a write");
    ok(s.counters.contended > 0, "both waited");
}

/* Debts are paid while clients wait, and forgotten once none waits. */
static void test_debt(void)
{
    struct share s;
    stalled(&s);
    share_admit(&s, item(0, VICTIM, 4 * MB));
    share_admit(&s, item(1, VICTIM, 4 * MB));
    share_admit(&s, item(2, ATTACKER, 64 * KB));
    share_admit(&s, item(3, ATTACKER, 64 * KB));
    share_admit(&s, item(4, ATTACKER, 64 * KB));
    is_str(drain(&s, 8), "0 2 3 4 1", "a 4 MiB write is paid for before its client writes again");
    ok(!share_waiting(&s), "nothing waits");
    s.pass_used = 1;
    share_admit(&s, item(5, VICTIM, 64 * KB));
    share_admit(&s, item(6, ATTACKER, 64 * KB));
    is_str(drain(&s, 4), "5 6", "once nobody waited, no debt is left");
}

static void test_remove(void)
{
    struct share s;
    stalled(&s);
    share_admit(&s, item(0, ATTACKER, 1 * MB));
    share_admit(&s, item(1, VICTIM, 1 * MB));
    share_admit(&s, item(2, VICTIM, 1 * MB));
    share_remove(&s, &items[1]);
    ok(!items[1].node.queued, "a removed write no longer waits");
    share_remove(&s, &items[1]);
    share_remove(&s, &items[2]);
    is_int(s.queue.active, 1, "a client whose writes all left leaves the ring");
    is_str(drain(&s, 4), "0", "the others go on");
    ok(!share_waiting(&s), "nothing waits");
}

/* Whole pieces: a 1 GiB write takes one pass, not 16,384 quanta of visits. */
static void test_huge(void)
{
    struct share s;
    stalled(&s);
    share_admit(&s, item(0, ATTACKER, 1024 * MB));
    share_admit(&s, item(1, ATTACKER, 1024 * MB));
    share_admit(&s, item(2, VICTIM, 1024 * MB));
    is_str(drain(&s, 4), "0 2 1", "huge writes alternate by client");
}

int main(void)
{
    test_at_once();
    test_many_against_one();
    test_by_bytes();
    test_debt();
    test_remove();
    test_huge();
    return tap_done();
}
