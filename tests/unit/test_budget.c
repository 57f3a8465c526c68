/* The buffer budget: fits, first come first served within a client, round
 * robin across clients, cancel, the lone big reservation, the small lane and
 * its reserve, a reload, memory kept for reuse and given up. */
#include "../../server/pool/budget.c"
#include "tests/tap.h"

#define M ((size_t)1 << 20)
#define K ((size_t)1 << 10)

static size_t order[16];
static uint64_t order_client[16];
static int granted_n;

static void on_granted(struct budget_waiter *w)
{
    order_client[granted_n] = w->client;
    order[granted_n++] = w->bytes;
}

/* Gives back what grants FROM..TO-1 took, each for its client. */
static void give_granted(struct budget *b, int from, int to)
{
    for (int i = from; i < to; i++)
        budget_give(b, order_client[i], order[i]);
}

static void test_fifo(void)
{
    struct budget b;
    struct budget_waiter w1 = {.client = 1}, w2 = {.client = 1}, w3 = {.client = 1};
    budget_init(&b, 100 * M);
    granted_n = 0;
    ok(budget_take(&b, &w1, 60 * M, on_granted), "60 of 100: taken now");
    ok(!budget_take(&b, &w2, 50 * M, on_granted), "50 more does not fit: waits");
    ok(!budget_take(&b, &w3, 10 * M, on_granted), "10 fits, but someone waits: waits too");
    ok(!budget_try(&b, 1, 10 * M), "an extra is refused while someone waits");
    is_int(b.waiting, 2, "two waiting");
    budget_give(&b, 1, 60 * M);
    is_int(granted_n, 2, "the 60 back: both granted");
    is_int(order[0], 50 * M, "in arrival order");
    is_int(order[1], 10 * M, "then the second");
    is_int(b.held, 60 * M, "50 + 10 held");
    is_int(b.peak, 60 * M, "peak is 60");
    is_int(b.waits, 2, "two waits counted");
    ok(budget_try(&b, 1, 40 * M), "an extra that fits with nobody waiting");
    ok(!budget_try(&b, 1, 1), "and none beyond the budget");
    budget_give(&b, 1, 100 * M);
    is_int(b.held, 0, "all given back");
}

static void test_cancel_and_big(void)
{
    struct budget b;
    struct budget_waiter w1 = {.client = 1}, w2 = {.client = 1}, w3 = {.client = 1};
    budget_init(&b, 100 * M);
    granted_n = 0;
    ok(budget_take(&b, &w1, 30 * M, on_granted), "30 taken");
    ok(!budget_take(&b, &w2, 500 * M, on_granted), "500 waits for the budget to empty");
    ok(!budget_take(&b, &w3, 20 * M, on_granted), "20 waits behind it");
    budget_cancel(&b, &w2);
    is_int(granted_n, 1, "cancelling the 500 lets the 20 in");
    is_int(order[0], 20 * M, "the 20");
    is_int(b.waiting, 0, "nobody waits");
    ok(!budget_take(&b, &w2, 500 * M, on_granted), "500 again: waits");
    budget_give(&b, 1, 30 * M);
    is_int(granted_n, 1, "20 still held: the 500 waits");
    budget_give(&b, 1, 20 * M);
    is_int(granted_n, 2, "empty: the 500 runs alone");
    is_int(b.held, 500 * M, "held beyond the budget, alone");
    ok(!budget_try(&b, 1, 1), "nothing else meanwhile");
    budget_give(&b, 1, 500 * M);
}

static void test_small_lane(void)
{
    struct budget b;
    struct budget_waiter big1 = {.client = 1}, big2 = {.client = 1}, s[3] = {{.client = 2}};
    budget_init(&b, 1 * M);
    granted_n = 0;
    ok(budget_take(&b, &big1, 1 * M, on_granted), "a big response takes the whole budget");
    ok(!budget_take(&b, &big2, 512 * K, on_granted), "the next big one waits");
    ok(budget_take(&b, &s[0], 64 * K, on_granted), "a small one does not wait behind it");
    ok(budget_take(&b, &s[1], 64 * K, on_granted), "nor a second: the reserve is max/8");
    ok(!budget_take(&b, &s[2], 64 * K, on_granted), "the reserve spent, a third small one waits");
    is_int(b.held, 1 * M + 128 * K, "held: the budget and its reserve, no more");
    budget_give(&b, 2, 64 * K);
    is_int(granted_n, 1, "a small one back: the small one waiting goes first");
    is_int(order[0], 64 * K, "the small one");
    budget_give(&b, 1, 1 * M);
    is_int(granted_n, 2, "the big one back: the waiting big one starts");
    is_int(order[1], 512 * K, "the 512k");
    budget_give(&b, 1, 512 * K);
    budget_give(&b, 0, 128 * K);
    is_int(b.held, 0, "all given back");
}

static void test_set_max(void)
{
    struct budget b;
    struct budget_waiter w1 = {.client = 1}, w2 = {.client = 1};
    budget_init(&b, 100 * M);
    granted_n = 0;
    ok(budget_take(&b, &w1, 80 * M, on_granted), "80 taken");
    ok(!budget_take(&b, &w2, 80 * M, on_granted), "80 more waits");
    budget_set_max(&b, 200 * M);
    is_int(granted_n, 1, "a larger budget grants the waiter");
    budget_set_max(&b, 50 * M);
    is_int(b.held, 160 * M, "a smaller one takes nothing back");
    ok(!budget_try(&b, 1, 1), "but lets nothing more in");
}

/* What the owner keeps (idle zlib states): here a counter it frees. */
static size_t kept_owned;
static int reclaims;

static size_t reclaim_all(void *arg)
{
    (void)arg;
    size_t bytes = kept_owned;
    kept_owned = 0;
    reclaims++;
    return bytes;
}

static bool keep(struct budget *b, size_t bytes)
{
    if (!budget_keep(b, bytes))
        return false;
    kept_owned += bytes;
    return true;
}

static void test_kept(void)
{
    struct budget b;
    struct budget_waiter w1 = {.client = 1}, w2 = {.client = 2};
    budget_init(&b, 100 * M);
    ok(!budget_keep(&b, M), "nothing is kept without a reclaim callback");
    b.reclaim = reclaim_all;
    kept_owned = 0;
    reclaims = 0;
    granted_n = 0;
    ok(keep(&b, 30 * M), "30 kept");
    ok(!keep(&b, 80 * M), "80 more would pass the budget: not kept");
    ok(budget_take(&b, &w1, 60 * M, on_granted), "60 taken beside the 30 kept");
    is_int(reclaims, 0, "... which stay");
    ok(budget_try(&b, 1, 20 * M), "an extra that fits beside them too");
    budget_give(&b, 1, 20 * M);
    ok(budget_try(&b, 1, 30 * M), "an extra that fits only without them");
    is_int(reclaims, 1, "... has them given up");
    is_int(b.kept, 0, "nothing kept");
    budget_give(&b, 1, 30 * M);
    ok(keep(&b, 30 * M), "30 kept again");
    ok(budget_take(&b, &w2, 40 * M, on_granted), "a reservation that fits only without them");
    is_int(reclaims, 2, "... has them given up, and goes at once");
    is_int(b.held, 100 * M, "100 held");
    ok(!keep(&b, 1), "a full budget keeps nothing");
    budget_give(&b, 2, 40 * M);
    ok(keep(&b, 30 * M), "30 kept");
    struct budget_waiter w3 = {.client = 3};
    ok(!budget_take(&b, &w3, 60 * M, on_granted), "60 does not fit even without them: waits");
    is_int(b.kept, 0, "and they were given up");
    ok(!keep(&b, M), "nothing is kept while someone waits");
    budget_give(&b, 1, 60 * M);
    is_int(granted_n, 1, "the waiter is granted");
    ok(keep(&b, 10 * M), "10 kept");
    budget_unkeep(&b, 10 * M);
    kept_owned -= 10 * M;
    is_int(b.kept, 0, "taken back for use: not kept");
    budget_give(&b, 3, 60 * M);
    ok(keep(&b, 30 * M), "30 kept");
    budget_set_max(&b, 80 * M);
    is_int(b.kept, 30 * M, "a smaller budget they still fit in keeps them");
    budget_set_max(&b, 20 * M);
    is_int(b.kept, 0, "one they do not fit in has them given up");
}

/* Client MANY has eight responses waiting for the budget, client ONE then
 * one: ONE is granted first or second (within one round), not ninth as
 * first come first served had it; in either lane, whichever client's
 * bucket comes first. */
static void test_clients(size_t each, const char *lane, uint64_t many, uint64_t one)
{
    struct budget b;
    struct budget_waiter holder = {.client = 9}, w[9];
    char desc[96];
    budget_init(&b, 8 * each);
    granted_n = 0;
    ok(budget_take(&b, &holder, 10 * each, on_granted), "one response holds it all, alone");
    for (int i = 0; i < 9; i++) {
        w[i] = (struct budget_waiter){.client = i < 8 ? many : one};
        ok(!budget_take(&b, &w[i], each, on_granted), "the others wait");
    }
    budget_give(&b, 9, 10 * each);
    int at = -1;
    for (int i = 0; i < granted_n; i++) {
        if (order_client[i] == one)
            at = i;
    }
    snprintf(desc, sizeof desc, "%s lane, client %d: granted first or second, not ninth", lane,
             (int)one);
    ok(at == 0 || at == 1, desc);
    ok(granted_n >= 8, "as many as fit are granted at once");
    int given = granted_n;
    give_granted(&b, 0, given);
    is_int(granted_n, 9, "then the rest");
    give_granted(&b, given, granted_n);
    is_int(b.held, 0, "all given back");
    is_int(b.waiting, 0, "nobody waits");
}

/* Round robin never passes the waiter whose turn it is: client ONE waits
 * for 50 while client TWO keeps asking for 10, which would fit; TWO is
 * granted once at most (if its bucket comes first) before ONE. */
static void test_turn_kept(uint64_t one, uint64_t two)
{
    struct budget b;
    struct budget_waiter holder = {.client = 3}, half = {.client = one}, little[4];
    budget_init(&b, 100 * M);
    granted_n = 0;
    ok(budget_take(&b, &holder, 60 * M, on_granted), "60 held");
    ok(!budget_take(&b, &half, 50 * M, on_granted), "client 1 waits for 50");
    for (int i = 0; i < 4; i++) {
        little[i] = (struct budget_waiter){.client = two};
        ok(!budget_take(&b, &little[i], 10 * M, on_granted), "client 2 waits for 10");
        budget_set_max(&b, 100 * M); /* looks at the waiters again */
    }
    ok(granted_n <= 1, "while client 1 waits, client 2 is granted once at most");
    budget_give(&b, 3, 60 * M);
    ok(order[0] == 50 * M || order[1] == 50 * M, "client 1's turn once the 60 is back");
    for (int i = 0; i < granted_n; i++) /* each give may grant more */
        give_granted(&b, i, i + 1);
}

/* While client 2 waits, client 1 takes no more than its fair share (the
 * budget over the clients holding or waiting), even what the small lane's
 * reserve has room for; client 2 goes first once memory is back, and
 * client 1 takes what fits once nobody else waits. */
static void test_fair_share(void)
{
    struct budget b;
    struct budget_waiter a1 = {.client = 1}, a2 = {.client = 1}, a3 = {.client = 1},
                         v = {.client = 2};
    budget_init(&b, 2 * M);
    granted_n = 0;
    ok(budget_take(&b, &a1, 1 * M, on_granted), "client 1 takes 1M");
    ok(budget_take(&b, &a2, 1 * M, on_granted), "and 1M more: nobody waits");
    ok(!budget_take(&b, &v, 1 * M, on_granted), "client 2's 1M waits");
    ok(!budget_take(&b, &a3, 64 * K, on_granted),
       "client 1, past its share while client 2 waits: its 64k waits, reserve or not");
    is_int(b.bucket_held[bucket_of(1)], 2 * M, "client 1 holds 2M");
    budget_give(&b, 1, 1 * M);
    is_int(granted_n, 2, "1M back: both granted");
    is_int(order_client[0], 2, "client 2 first, though client 1's 64k is in the small lane");
    is_int(order[1], 64 * K, "then client 1's 64k, nobody else waiting");
    budget_give(&b, 2, 1 * M);
    budget_give(&b, 1, 1 * M + 64 * K);
    is_int(b.held, 0, "all given back");
    is_int(b.bucket_held[bucket_of(1)] + b.bucket_held[bucket_of(2)], 0, "by each client too");
}

/* What client ID holds by the ledger a table of 4,096 buckets reads. */
static size_t held_of(const struct budget *b, uint64_t id)
{
    return budget_held_in(b, fairq_bucket_of(id, 4096));
}

/* Who gives way (budget_gives_way): only a client over its fair share, and
 * only while another client waits; and the ledger by client counts every
 * take, whichever call made it, as a larger table reads it (budget_held_in). */
static void test_gives_way(void)
{
    struct budget b;
    struct budget_waiter a = {.client = 1}, a2 = {.client = 1}, v = {.client = 2};
    budget_init(&b, 2 * M);
    granted_n = 0;
    ok(budget_take(&b, &a, 1 * M, on_granted), "client 1 takes 1M");
    ok(budget_try(&b, 1, 1 * M), "and an extra 1M: the budget is full");
    ok(!budget_gives_way(&b, 1), "nobody waits: client 1 keeps it all (work-conserving)");
    ok(!budget_take(&b, &a2, 1 * M, on_granted), "client 1's own 1M more waits");
    ok(!budget_gives_way(&b, 1), "its own waiter does not make client 1 give way");
    ok(!budget_take(&b, &v, 1 * M, on_granted), "client 2's 1M waits");
    ok(budget_gives_way(&b, 1), "now client 1, over its share of 1M, gives way");
    ok(!budget_gives_way(&b, 2), "client 2, holding nothing, does not");
    size_t above = budget_give_above(&b);
    ok(budget_gives(&b, above, 1) && !budget_gives(&b, above, 2),
       "budget_give_above: client 1's bucket alone");
    budget_give(&b, 1, 1 * M);
    is_int(granted_n, 1, "client 1 gives 1M back: client 2 is granted");
    is_int(order_client[0], 2, "client 2 first");
    ok(!budget_gives_way(&b, 1), "client 1 within its share now: it keeps the rest");
    is_int(held_of(&b, 1), 1 * M, "the ledger: client 1 holds 1M (a take, a try, a give)");
    is_int(held_of(&b, 2), 1 * M, "and client 2 its grant");
    budget_give(&b, 2, 1 * M);
    is_int(granted_n, 2, "then client 1's own");
    budget_give(&b, 1, 2 * M);
    is_int(held_of(&b, 1) + held_of(&b, 2), 0, "all given back, in the ledger too");
    ok(budget_try(&b, 1, 3 * M / 2) && budget_try(&b, 2, M / 2), "1.5M and 0.5M held");
    ok(!budget_gives_way(&b, 1),
       "client 1 holds past an even share, but nobody waits: it keeps it");
    budget_give(&b, 1, 3 * M / 2);
    budget_give(&b, 2, M / 2);
}

/* Clients all at their share hand nothing round: a waiter past its share
 * makes nobody give way (else each give is granted to a client that then
 * gives way in turn, without end); a waiter within its share does. */
static void test_gives_way_needy(void)
{
    struct budget b;
    struct budget_waiter w1 = {.client = 1}, w2 = {.client = 2}, w3 = {.client = 3};
    budget_init(&b, 4 * M);
    granted_n = 0;
    ok(budget_try(&b, 1, 2 * M) && budget_try(&b, 2, 2 * M), "two clients hold 2M each");
    ok(!budget_take(&b, &w1, 1 * M, on_granted) && !budget_take(&b, &w2, 1 * M, on_granted),
       "and each waits for 1M more");
    ok(!budget_gives_way(&b, 1) && !budget_gives_way(&b, 2),
       "each at its share of 2M, waiting past it: nobody gives way");
    is_int(budget_give_above(&b) == SIZE_MAX, 1, "budget_give_above: nobody needs anything");
    ok(!budget_take(&b, &w3, 1 * M, on_granted), "a third client's first 1M waits");
    ok(budget_gives_way(&b, 1) && budget_gives_way(&b, 2),
       "it holds nothing: both, over the share of 4M/3, give way");
    budget_give(&b, 1, 1 * M);
    is_int(granted_n, 1, "client 1 gives 1M back: one grant");
    is_int(order_client[0], 3, "to the third client, within its share");
    ok(!budget_gives_way(&b, 2), "then everyone who waits is past the share: nobody gives way");
    budget_cancel(&b, &w1);
    budget_cancel(&b, &w2);
    budget_give(&b, 1, 1 * M);
    budget_give(&b, 2, 2 * M);
    budget_give(&b, 3, 1 * M);
    is_int(b.held, 0, "all given back");
    is_int(b.clients, 0, "and no client counted");
}

int main(void)
{
    test_gives_way();
    test_gives_way_needy();
    test_fair_share();
    test_fifo();
    test_cancel_and_big();
    test_small_lane();
    test_set_max();
    test_kept();
    test_turn_kept(1, 2);
    test_turn_kept(2, 1);
    for (uint64_t one = 1; one <= 2; one++) {
        test_clients(1 * M, "big", 3 - one, one);
        test_clients(16 * K, "small", 3 - one, one);
    }
    return tap_done();
}
