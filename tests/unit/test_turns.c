/* The loop's turns as pure code: each client's share of a turn. */
#include <stdint.h>

#include "server/http/turns.h"
#include "tests/tap.h"

#define US 1000ull

/* Flows that land in distinct buckets. */
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
    turns_next(&t);
    ok(turns_admit(&t, ATTACKER, true), "the next turn, the flood runs again");
    is_int(turns_used(&t, VICTIM), 0, "each turn begins with nothing spent");
    is_int(t.counters.deferred, 54, "one that waited is not counted twice");
}

/* The request that crosses the share still runs: a turn makes progress. */
static void test_crossing(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    ok(turns_admit(&t, ATTACKER, false), "a first request runs");
    turns_charge(&t, ATTACKER, 5000 * US);
    ok(!turns_admit(&t, ATTACKER, false), "after 5 ms in one request, the next waits");
    turns_next(&t);
    ok(turns_admit(&t, ATTACKER, true), "and runs at the next turn");
}

/* What many clients have waiting cannot make a turn long either: the
 * waiting requests get TURNS_CLIENTS shares of a turn; a new request of a
 * client that spent nothing still goes. */
static void test_turn_bound(void)
{
    struct turns t;
    turns_init(&t, 200 * US);
    int ran = 0;
    for (uint64_t flow = 1; flow <= 100; flow++) {
        if (turns_admit(&t, flow, true)) {
            turns_charge(&t, flow, 100 * US);
            ran++;
        }
    }
    is_int(ran, TURNS_CLIENTS * 2, "100 waiting clients of 100 us each: 4 shares of 200 us run");
    ok(turns_admit(&t, 1000, false), "a client's new request still goes in the poll");
    ok(!turns_admit(&t, 1000, true), "but not one that waited");
    turns_next(&t);
    ok(turns_admit(&t, 100, true), "the next turn takes the others");
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

static void test_off(void)
{
    struct turns t;
    turns_init(&t, 0);
    turns_charge(&t, ATTACKER, 1000000 * US);
    ok(turns_admit(&t, ATTACKER, false), "share 0: everything runs at once");
    turns_set_share(&t, 200 * US);
    ok(!turns_admit(&t, ATTACKER, false), "a share set later bounds the same turn");
}

int main(void)
{
    test_flood_and_victim();
    test_crossing();
    test_turn_bound();
    test_callbacks();
    test_off();
    return tap_done();
}
