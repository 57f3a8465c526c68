/* The fair queue alone: buckets by client, a FIFO in each, the ring, round
 * robin and deficit round robin by bytes. */
#include <stdint.h>
#include <stdio.h>

#include "server/base/fairq.h"
#include "server/base/util.h"
#include "tests/tap.h"

#define KB 1024ull

/* Clients that land in distinct buckets of 64 (checked below). */
#define A 1
#define B 2
#define C 3

struct item {
    struct fairq_node node;
    uint64_t bytes;
};

static struct item items[64];
static struct fairq_bucket buckets[64];

static struct item *of(struct fairq_node *n)
{
    return n == NULL ? NULL : container_of(n, struct item, node);
}

static int index_of(struct fairq_node *n)
{
    return n == NULL ? -1 : (int)(of(n) - items);
}

static void push(struct fairq *q, int i, uint64_t client, uint64_t bytes)
{
    items[i] = (struct item){.bytes = bytes};
    fairq_push(q, &items[i].node, client);
}

/* Pushes one node a letter of CLIENTS ('A' is client A ...), item 0 first. */
static void fill(struct fairq *q, const char *clients)
{
    for (int i = 0; clients[i] != '\0'; i++)
        push(q, i, (uint64_t)(clients[i] - 'A' + A), 0);
}

/* Serves until nothing waits, round robin (QUANTUM 0) or by deficit
 * round robin with QUANTUM: the indexes as "a b c". */
static const char *drain(struct fairq *q, uint64_t quantum)
{
    static char out[512];
    size_t len = 0;
    out[0] = '\0';
    while (q->queued > 0) {
        struct fairq_node *n;
        if (quantum == 0) {
            n = fairq_serve(q);
        } else {
            uint32_t b = fairq_drr_next(q, quantum);
            n = fairq_oldest(q, b);
            fairq_charge(q, b, of(n)->bytes);
            fairq_remove(q, n);
        }
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%d", len ? " " : "", index_of(n));
    }
    return out;
}

static void test_bucket_of(void)
{
    uint32_t a = fairq_bucket_of(A, 64), b = fairq_bucket_of(B, 64), c = fairq_bucket_of(C, 64);
    ok(a != b && b != c && a != c, "the test's clients are in distinct buckets");
    ok(a < 64 && b < 64 && c < 64, "a bucket is within the table");
    is_int(fairq_bucket_of(A, 64), a, "a client is always in the same bucket");
    is_int(fairq_bucket_of(A, 1), 0, "one bucket holds everyone");
    int seen[1024] = {0}, dup = 0;
    for (uint64_t id = 1; id <= 100; id++)
        dup += seen[fairq_bucket_of(id, 1024)]++ > 0;
    is_int(dup, 0, "a hundred consecutive ids in 1,024 buckets do not collide");
    /* Folding: a table of fewer buckets reads a larger one's by bucket. */
    int folded = 0;
    for (uint64_t id = 1; id <= 10000; id++) {
        uint64_t x = id * 0xd6e8feb86659fd93ull; /* ids spread like keyed hashes */
        folded += fairq_bucket_fold(fairq_bucket_of(x, 4096), 1024) == fairq_bucket_of(x, 1024) &&
                  fairq_bucket_fold(fairq_bucket_of(x, 1024), 64) == fairq_bucket_of(x, 64);
    }
    is_int(folded, 10000,
           "fairq_bucket_fold: an id's bucket of 4,096 folds into its bucket of "
           "1,024, and that into its bucket of 64");
}

static void test_fifo_and_ring(void)
{
    struct fairq q;
    fairq_init(&q, buckets, 64);
    is_int(fairq_first(&q), FAIRQ_NONE, "an empty queue has an empty ring");
    ok(fairq_push(&q, &items[0].node, B), "the first node of a bucket joins the ring");
    ok(!fairq_push(&q, &items[1].node, B), "a second does not");
    ok(fairq_push(&q, &items[2].node, A), "another client's joins");
    is_int(q.active, 2, "two buckets in the ring");
    is_int(q.queued, 3, "three nodes");
    is_int(fairq_first(&q), fairq_bucket_of(B, 64), "the ring in the order they began to wait");
    is_int(fairq_next(&q, (uint32_t)fairq_first(&q)), fairq_bucket_of(A, 64), "then A");
    is_int(index_of(fairq_oldest(&q, fairq_bucket_of(B, 64))), 0, "oldest first in a bucket");
    fairq_remove(&q, &items[0].node);
    ok(!items[0].node.queued, "a removed node is not queued");
    fairq_remove(&q, &items[0].node);
    is_int(q.queued, 2, "removing it twice does nothing");
    is_int(index_of(fairq_oldest(&q, fairq_bucket_of(B, 64))), 1, "its successor is the oldest");
    fairq_remove(&q, &items[1].node);
    is_int(q.active, 1, "an emptied bucket leaves the ring");
    is_int(fairq_first(&q), fairq_bucket_of(A, 64), "the ring closes over it");
    fairq_push(&q, &items[3].node, B);
    fairq_rotate(&q);
    is_int(fairq_first(&q), fairq_bucket_of(B, 64), "rotate: the first goes last");
    fairq_remove(&q, &items[2].node);
    fairq_remove(&q, &items[3].node);
    is_int(fairq_first(&q), FAIRQ_NONE, "empty again");
    is_int(q.queued, 0, "nothing waits");

    /* Removal from the middle of a bucket keeps its order. */
    fill(&q, "CCCC");
    fairq_remove(&q, &items[1].node);
    fairq_remove(&q, &items[3].node);
    push(&q, 4, C, 0);
    is_str(drain(&q, 0), "0 2 4", "removals in the middle and at the end keep the rest in order");
}

/* Round robin: a client with many nodes gets one per round. */
static void test_serve(void)
{
    struct fairq q;
    fairq_init(&q, buckets, 64);
    fill(&q, "AAAABCB");
    is_str(drain(&q, 0), "0 4 5 1 6 2 3", "one node a bucket a round, in ring order");
    is_int(q.active, 0, "every bucket left");

    struct fairq one;
    struct fairq_bucket single[1];
    fairq_init(&one, single, 1);
    fill(&one, "ABA");
    is_str(drain(&one, 0), "0 1 2", "with one bucket, first come first served");
}

/* Deficit round robin by bytes: equal bytes for unequal nodes. */
static void test_drr(void)
{
    struct fairq q;
    fairq_init(&q, buckets, 64);
    for (int i = 0; i < 3; i++)
        push(&q, i, A, 128 * KB);
    for (int i = 3; i < 9; i++)
        push(&q, i, B, 64 * KB);
    /* A: 64k credit, takes 128k (debt 64k). B takes 64k. A: 0 credit,
     * passes; B 64k. A: 64k, takes 128k; ... */
    is_str(drain(&q, 64 * KB), "0 3 4 1 5 6 2 7 8",
           "two buckets get equal bytes, a debt of one node at most");
    is_int(q.active, 0, "the ring is empty");

    /* A debt is kept while the bucket waits again in the same busy
     * period, and forgotten once nobody waits. */
    fairq_init(&q, buckets, 64);
    push(&q, 0, A, 256 * KB);
    push(&q, 1, B, 1 * KB);
    uint32_t b = fairq_drr_next(&q, 64 * KB);
    fairq_charge(&q, b, 256 * KB);
    fairq_remove(&q, &items[0].node);
    is_int(q.bucket[b].deficit, -192 * (int64_t)KB, "A left the ring in debt");
    push(&q, 2, A, 1 * KB);
    is_int(q.bucket[b].deficit, -192 * (int64_t)KB, "and comes back with it while B waits");
    fairq_remove(&q, &items[1].node);
    fairq_remove(&q, &items[2].node);
    push(&q, 3, A, 1 * KB);
    is_int(q.bucket[b].deficit, 0, "once nobody waited, the debt is forgotten");
    fairq_remove(&q, &items[3].node);

    /* Every bucket deep in debt: the rounds that give nothing are skipped. */
    fairq_init(&q, buckets, 64);
    push(&q, 0, A, 1 * KB);
    push(&q, 1, B, 1 * KB);
    q.bucket[fairq_bucket_of(A, 64)].deficit = -640 * (int64_t)KB;
    q.bucket[fairq_bucket_of(B, 64)].deficit = -320 * (int64_t)KB;
    b = fairq_drr_next(&q, 64 * KB);
    is_int(b, fairq_bucket_of(B, 64), "the smaller debt is paid first");
    is_int(q.bucket[b].deficit, 64 * (int64_t)KB, "with one quantum of credit, as by rounds");
    is_int(q.bucket[fairq_bucket_of(A, 64)].deficit, -256 * (int64_t)KB,
           "the other got the same quanta");
}

int main(void)
{
    test_bucket_of();
    test_fifo_and_ring();
    test_serve();
    test_drr();
    return tap_done();
}
