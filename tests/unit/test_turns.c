/* The loop's turns as pure code: each client's share of a pass. */
#include <stdint.h>

#include "server/base/util.h"
#include "server/http/turns.h"
#include "tests/tap.h"

#define US 1000ull

/* Clients that land in distinct buckets. */
#define ATTACKER 1
#define VICTIM   2

/* A flood of 64 requests ready in one poll, each taking 20 µs of the loop,
 * and one request of another client in the same poll, after them. */
static void test_flood_and_victim(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    int ran = 0;
    for (int i = 0; i < 64; i++) {
        if (turns_admit(&t, ATTACKER, false)) {
            turns_charge(&t, ATTACKER, 20 * US);
            ran++;
        }
    }
    is_int(ran, 10, "the flood runs 10 requests of 20 us in a 200 us share");
    ok(turns_admit(&t, VICTIM, false), "the other client's request runs in the same poll");
    turns_charge(&t, VICTIM, 20 * US);
    is_int(t.counters.at_once, 11, "11 went at once");
    is_int(t.counters.deferred, 54, "54 waited");
    turns_new_pass(&t);
    ok(turns_admit(&t, ATTACKER, true), "the next pass, the flood runs again");
    is_int(turns_used(&t, VICTIM), 0, "each pass begins with nothing spent");
    is_int(t.counters.deferred, 54, "one that waited is not counted twice");
}

/* The request that crosses the share still runs: a pass makes progress. */
static void test_crossing(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    ok(turns_admit(&t, ATTACKER, false), "a first request runs");
    turns_charge(&t, ATTACKER, 5000 * US);
    ok(!turns_admit(&t, ATTACKER, false), "after 5 ms in one request, the next waits");
    turns_new_pass(&t);
    ok(turns_admit(&t, ATTACKER, true), "and runs at the next pass");
}

/* What many clients have waiting cannot make a pass long either: the
 * waiting requests get TURNS_CLIENTS shares of a pass; a new request of a
 * client that spent nothing still goes. */
static void test_turn_bound(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    int ran = 0;
    for (uint64_t client = 1; client <= 100; client++) {
        if (turns_admit(&t, client, true)) {
            turns_charge(&t, client, 100 * US);
            ran++;
        }
    }
    is_int(ran, TURNS_CLIENTS * 2, "100 waiting clients of 100 us each: 4 shares of 200 us run");
    ok(turns_admit(&t, 1000, false), "a client's new request still goes in the poll");
    ok(!turns_admit(&t, 1000, true), "but not one that waited");
    turns_new_pass(&t);
    ok(turns_admit(&t, 100, true), "the next pass takes the others");
}

/* Work that ran before the waiting requests in a pass (timers, write
 * callbacks resuming pipelined requests) spent the pass's bound: the first
 * waiting request still goes, or they could wait for as long as four
 * clients keep that up. */
static void test_waiting_progress(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    for (uint64_t client = 1; client <= TURNS_CLIENTS; client++) {
        ok(turns_admit(&t, client, false), "a client's request goes at once");
        turns_charge(&t, client, 200 * US);
    }
    ok(turns_admit(&t, 100, true), "the pass's bound is spent: the first waiting one still goes");
    turns_charge(&t, 100, 100 * US);
    ok(!turns_admit(&t, 101, true), "  but not the next");
    turns_new_pass(&t);
    ok(turns_admit(&t, 101, true), "which goes in the next pass");
}

/* Pool callbacks count too: a client whose callbacks spent its share
 * waits with its next request. */
static void test_callbacks(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    turns_charge(&t, ATTACKER, 250 * US); /* conn_turns_charge from the gateway */
    ok(!turns_admit(&t, ATTACKER, false), "callbacks spent the share: the request waits");
    ok(turns_admit(&t, VICTIM, false), "another client's does not");
}

/* A waiting request: a connection's node and its client. */
struct request {
    struct fairq_node node;
    uint64_t client;
};

static struct request items[128];

static struct request *wait_item(struct turns *t, int i, uint64_t client)
{
    items[i] = (struct request){.client = client};
    turns_wait(t, &items[i].node, client);
    return &items[i];
}

/* The request a node is, or NULL. */
static struct request *next_waiting(struct turns *t)
{
    struct fairq_node *n = turns_next_waiting(t);
    return n == NULL ? NULL : container_of(n, struct request, node);
}

static int index_of(const struct request *it)
{
    return it == NULL ? -1 : (int)(it - items);
}

/* The waiting queue: 64 requests of the flood and then one of another
 * client wait; the next pass serves them client by client, each while it
 * has time left, not in the order they came. */
static void test_queue(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    for (int i = 0; i < 64; i++)
        wait_item(&t, i, ATTACKER);
    wait_item(&t, 64, VICTIM);
    is_int(turns_waiting(&t), 65, "65 wait");
    is_int(t.queue.active, 2, "in two clients' queues");
    turns_new_pass(&t);
    struct request *it = next_waiting(&t);
    is_int(index_of(it), 0, "the flood's oldest goes first");
    turns_charge(&t, ATTACKER, 20 * US);
    is_int(index_of(next_waiting(&t)), 64, "then the other client's, not the flood's 2nd");
    turns_charge(&t, VICTIM, 20 * US);
    int ran = 2;
    while ((it = next_waiting(&t)) != NULL) {
        turns_charge(&t, it->client, 20 * US);
        ran++;
    }
    is_int(ran, 11, "the flood runs on until its share is spent (10 of its requests)");
    is_int(turns_waiting(&t), 54, "the others wait for the next pass");
    is_int(t.queue.active, 1, "in one queue");
    turns_remove(&t, &items[10].node);
    turns_remove(&t, &items[10].node);
    is_int(turns_waiting(&t), 53, "a removed request leaves the queue, once");
    turns_new_pass(&t);
    is_int(index_of(next_waiting(&t)), 11, "the next pass goes on in order");
    for (int i = 12; i < 64; i++)
        turns_remove(&t, &items[i].node);
    is_int(t.queue.active, 0, "the emptied queue leaves the ring");
    ok(next_waiting(&t) == NULL, "nothing waits");
}

/* The pass's bound stops the waiting even when a client has time left. */
static void test_queue_bound(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    for (int i = 0; i < 10; i++)
        wait_item(&t, i, (uint64_t)i + 1);
    int ran = 0;
    struct request *it;
    while ((it = next_waiting(&t)) != NULL) {
        turns_charge(&t, it->client, 300 * US);
        ran++;
    }
    is_int(ran, 3, "ten clients of 300 us each: three run, the third crossing the bound of 800 us");
    ok(turns_admit(&t, 100, false), "a new client's request still goes in the poll");
}

static void test_off(void)
{
    struct turns t;
    turns_init(&t, 0);
    turns_charge(&t, ATTACKER, 1000000 * US);
    ok(turns_admit(&t, ATTACKER, false), "share 0: everything runs at once");
    turns_set_share(&t, 200 * US);
    ok(!turns_admit(&t, ATTACKER, false), "a share set later bounds the same pass");
}

int main(void)
{
    test_flood_and_victim();
    test_crossing();
    test_turn_bound();
    test_waiting_progress();
    test_callbacks();
    test_queue();
    test_queue_bound();
    test_off();
    return tap_done();
}
