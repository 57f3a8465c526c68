/* The scheduling policy as pure code: no threads, no clock. */
#include <stdint.h>
#include <stdio.h>

#include "server/pool/sched.h"
#include "tests/tap.h"

#define KB 1024ull
#define MB (1024ull * 1024)

static struct sched_item items[128];

static struct sched_item *item(int i, uint64_t cost, uint64_t remaining, uint64_t client)
{
    struct sched_item *it = &items[i];
    *it = (struct sched_item){.cost = cost, .remaining = remaining, .client = client};
    return it;
}

/* A CPU-bound item (a deflate), marked before it is pushed. */
static struct sched_item *cpu_item(int i, uint64_t cost, uint64_t remaining, uint64_t client)
{
    struct sched_item *it = item(i, cost, remaining, client);
    it->cpu = true;
    return it;
}

static int index_of(const struct sched_item *it)
{
    return it == NULL ? -1 : (int)(it - items);
}

/* Starts what may start and returns the indexes in order, as "a b c". */
static const char *drain(struct sched *s, bool finish)
{
    static char out[256];
    size_t len = 0;
    out[0] = '\0';
    struct sched_item *it;
    while ((it = sched_next(s)) != NULL) {
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%d", len ? " " : "", index_of(it));
        if (finish)
            sched_done(s, it);
    }
    return out;
}

static void test_fifo(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FIFO, 2, 0);
    sched_push(&s, item(0, 16 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * KB, 1 * KB, 2));
    sched_push(&s, item(2, 16 * MB, 16 * MB, 1));
    is_str(drain(&s, false), "0 1", "fifo: arrival order, as many as threads");
    sched_done(&s, &items[0]);
    is_str(drain(&s, false), "2", "fifo: the next one when a thread frees");
    is_int(s.counters.bulk_over_short, 1,
           "fifo: the bulk piece started before a waiting short job");
    sched_init(&s, SCHED_MODE_FIFO, 1, 0);
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * KB, 1 * KB, 2));
    sched_push(&s, item(2, 1 * MB, 15 * MB, 1));
    is_str(drain(&s, true), "0 1 2", "fifo: a small job waits behind a bulk piece");
    is_int(s.counters.bulk_over_short, 1, "fifo: counted as bulk started over short work");
}

static void test_short_first(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 64 * KB, 100 * KB, 2));
    sched_push(&s, item(2, 0, 0, 2));
    sched_push(&s, item(3, 1 * KB, 1 * KB, 2));
    sched_push(&s, item(4, 64 * KB, 100 * KB, 2));
    sched_push(&s, item(5, 64 * KB, 64 * KB, 2));
    is_str(drain(&s, true), "2 3 5 1 4 0",
           "fair: a client's short work by remaining bytes (ties in arrival order), bulk last");
    is_int(s.counters.short_started, 5, "five short starts");
    is_int(s.counters.bulk_started, 1, "one bulk start");
    /* The last piece of a large response is short work. */
    sched_push(&s, item(0, 1 * MB, 9 * MB, 1));
    sched_push(&s, item(1, 64 * KB, 64 * KB, 2));
    is_str(drain(&s, true), "1 0", "a response's last piece goes before bulk pieces");
}

/* The caller's view: bulk jobs are submitted first, short ones behind
 * them, and the test itself counts, at each hand-out, how many bulk jobs
 * were handed out while a short job it submitted was still waiting. Fair
 * hands out every short job first (none), fifo in arrival order (all). */
static int bulk_handed_over_short(enum sched_mode mode, char *order, size_t size)
{
    struct sched s;
    sched_init(&s, mode, 1, 0);
    for (int i = 0; i < 3; i++)
        sched_push(&s, item(i, 1 * MB, 16 * MB, 1));
    for (int i = 3; i < 6; i++)
        sched_push(&s, item(i, 4 * KB, 4 * KB, (uint64_t)i));
    int shorts_waiting = 3, over = 0;
    size_t len = 0;
    order[0] = '\0';
    struct sched_item *it;
    while ((it = sched_next(&s)) != NULL) {
        int i = index_of(it);
        len += (size_t)snprintf(order + len, size - len, "%s%d", len ? " " : "", i);
        if (i < 3)
            over += shorts_waiting > 0;
        else
            shorts_waiting--;
        sched_done(&s, it);
    }
    return over;
}

static void test_bulk_then_short(void)
{
    char order[64];
    is_int(bulk_handed_over_short(SCHED_MODE_FAIR, order, sizeof order), 0,
           "fair: no bulk job handed out while a short one submitted after it waited");
    is_str(order, "3 4 5 0 1 2", "fair: the short jobs first, then bulk in arrival order");
    is_int(bulk_handed_over_short(SCHED_MODE_FIFO, order, sizeof order), 3,
           "fifo: every bulk job handed out before the short ones behind it");
    is_str(order, "0 1 2 3 4 5", "fifo: arrival order");
}

static void test_reserve(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 4, 0);
    for (int i = 0; i < 8; i++)
        sched_push(&s, item(i, 1 * MB, 16 * MB, (uint64_t)i));
    is_str(drain(&s, false), "0 1 2", "bulk takes at most threads - 1 of 4 threads");
    sched_push(&s, item(10, 0, 0, 99));
    is_str(drain(&s, false), "10", "a short job arriving then finds the fourth thread");
    sched_push(&s, item(11, 0, 0, 99));
    is_str(drain(&s, false), "", "the pool is full: nothing more starts");
    sched_done(&s, &items[10]);
    is_str(drain(&s, false), "11", "the freed thread goes to the waiting short job");
    sched_done(&s, &items[0]);
    is_str(drain(&s, false), "3", "a freed bulk thread goes to bulk");

    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    is_str(drain(&s, false), "0", "with one thread, bulk may take it");

    sched_init(&s, SCHED_MODE_FAIR, 4, 1);
    for (int i = 0; i < 3; i++)
        sched_push(&s, item(i, 1 * MB, 16 * MB, (uint64_t)i));
    sched_push(&s, item(10, 0, 0, 99));
    sched_push(&s, item(11, 0, 0, 99));
    is_str(drain(&s, false), "10 11 0", "bulk_max 1 of 4: one bulk piece, short work beside it");
}

/* Client 1 keeps ten connections' pieces queued, client 2 one at a time
 * (a new piece as soon as its last one is done): what each client is
 * charged (bytes and SCHED_JOB_CHARGE a piece) must match within a piece. */
static void test_round_robin(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 2, 0); /* one bulk thread */
    uint64_t charged[3] = {0, 0, 0};
    for (int i = 0; i < 10; i++)
        sched_push(&s, item(i, 256 * KB, 16 * MB, 1));
    sched_push(&s, item(20, 1 * MB, 16 * MB, 2));
    int starts = 0;
    for (int round = 0; round < 200; round++) {
        struct sched_item *it = sched_next(&s);
        if (it == NULL)
            break;
        starts++;
        charged[it->client] += it->cost + SCHED_JOB_CHARGE;
        sched_done(&s, it);
        sched_push(&s, it); /* each connection's next piece */
    }
    is_int(starts, 200, "a bulk job starts each time the bulk thread frees");
    uint64_t diff = charged[1] > charged[2] ? charged[1] - charged[2] : charged[2] - charged[1];
    char desc[128];
    snprintf(desc, sizeof desc, "ten connections against one: %llu vs %llu charged",
             (unsigned long long)charged[1], (unsigned long long)charged[2]);
    ok(diff <= 1 * MB + SCHED_JOB_CHARGE, desc); /* one piece of the larger */
}

/* Short work that never stops arriving still lets bulk progress. */
static void test_no_starvation(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 2, 0);
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * MB, 16 * MB, 1));
    struct sched_item *running = sched_next(&s); /* item 0 on the bulk thread */
    is_int(index_of(running), 0, "bulk starts when nothing short waits");
    sched_done(&s, running);
    int shorts = 0, bulk_at = -1;
    for (int i = 0; i < 100 && bulk_at < 0; i++) {
        sched_push(&s, item(2 + i % 2, 0, 0, 5)); /* always one short job waiting */
        sched_push(&s, item(4 + i % 2, 0, 0, 5));
        struct sched_item *it = sched_next(&s);
        if (it->bulk)
            bulk_at = shorts;
        else
            shorts++;
        sched_done(&s, it);
        sched_remove(&s, &items[2 + i % 2]);
        sched_remove(&s, &items[4 + i % 2]);
    }
    is_int(bulk_at, SCHED_SHORT_STREAK, "bulk starts after SCHED_SHORT_STREAK short jobs in a row");
    is_int(s.counters.streak_breaks, 1, "counted as a streak break");
}

static void test_remove_and_mode(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * KB, 1 * KB, 2));
    sched_push(&s, item(2, 1 * MB, 16 * MB, 3));
    sched_remove(&s, &items[1]);
    sched_remove(&s, &items[0]);
    ok(!items[0].node.queued && !items[1].node.queued, "removed items are no longer queued");
    sched_remove(&s, &items[0]);
    is_int(s.waiting_bulk + s.waiting_short, 1, "a second remove changes nothing");
    is_str(drain(&s, true), "2", "only what was not removed starts");

    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * MB, 16 * MB, 2));
    sched_push(&s, item(2, 1 * KB, 1 * KB, 3));
    sched_set_mode(&s, SCHED_MODE_FIFO);
    is_str(drain(&s, true), "0 1 2", "fair to fifo: what waited keeps its arrival order");
    sched_push(&s, item(0, 1 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 1 * KB, 1 * KB, 3));
    sched_set_mode(&s, SCHED_MODE_FAIR);
    ok(sched_short_waiting(&s, false), "short work waits");
    is_str(drain(&s, true), "1 0", "fifo to fair: short work first again");
    ok(!sched_short_waiting(&s, false), "nothing waits");
}

/* The start order of DRAIN as indexes: where item WANT started (-1: never). */
static int position(const char *order, int want)
{
    int pos = 0, n = 0, i;
    while (sscanf(order, "%d%n", &i, &n) == 1) {
        if (i == want)
            return pos;
        order += n;
        pos++;
    }
    return -1;
}

/* Client 1 floods 64 small files' reads of 8 KiB, then client 2 asks for
 * 96 KiB: both short. Round robin by bytes, client 2 goes before client 1's
 * second job (under shortest-remaining-first across clients it went last),
 * and again when it arrives while the flood is halfway. */
static void test_clients_short(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    for (int i = 0; i < 64; i++)
        sched_push(&s, item(i, 8 * KB, 8 * KB, 1));
    sched_push(&s, item(100, 96 * KB, 96 * KB, 2));
    const char *order = drain(&s, true);
    is_int(position(order, 100), 1, "client 2's 96k read starts before client 1's second 8k one");
    is_int(s.counters.short_others_max, 1,
           "no short job waited for more than one start of the other client");
    is_int(s.counters.short_started, 65, "every job started");

    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    for (int i = 0; i < 64; i++)
        sched_push(&s, item(i, 8 * KB, 8 * KB, 1));
    for (int i = 0; i < 32; i++)
        sched_done(&s, sched_next(&s));
    sched_push(&s, item(100, 96 * KB, 96 * KB, 2));
    struct sched_item *next = sched_next(&s);
    is_int(index_of(next), 100, "arriving halfway through the flood, it starts next");
    sched_done(&s, next);
    sched_push(&s, item(101, 96 * KB, 96 * KB, 2));
    order = drain(&s, true);
    /* Charged 96k + SCHED_JOB_CHARGE against 8k + SCHED_JOB_CHARGE each. */
    is_int(position(order, 101), 2,
           "its next 96k waits for its share: two of client 1's 8k jobs, no more");
}

/* Two clients keep short work queued, one in 64 KiB jobs and one in 4 KiB
 * jobs: they are charged alike (bytes and SCHED_JOB_CHARGE a job), within
 * one job, at every start. */
static void test_clients_by_cost(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    uint64_t charged[3] = {0, 0, 0}, worst = 0;
    sched_push(&s, item(0, 64 * KB, 64 * KB, 1));
    sched_push(&s, item(1, 4 * KB, 4 * KB, 2));
    for (int i = 0; i < 1000; i++) {
        struct sched_item *it = sched_next(&s);
        charged[it->client] += it->cost + SCHED_JOB_CHARGE;
        uint64_t diff = charged[1] > charged[2] ? charged[1] - charged[2] : charged[2] - charged[1];
        worst = diff > worst ? diff : worst;
        sched_done(&s, it);
        sched_push(&s, it); /* the client's next job */
    }
    ok(charged[1] > 0 && charged[2] > 0, "both clients ran");
    ok(worst <= 64 * KB + SCHED_JOB_CHARGE,
       "charges per client never differ by more than one 64k job's");
    is_int(s.counters.short_started, 1000, "all short starts");

    /* An open costs no bytes but is charged SCHED_JOB_CHARGE: a client of
     * opens cannot start without end while another waits. */
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    for (int i = 0; i < 64; i++)
        sched_push(&s, item(i, 0, 0, 1));
    sched_push(&s, item(100, 8 * KB, 8 * KB, 2));
    sched_push(&s, item(101, 8 * KB, 8 * KB, 2));
    const char *order = drain(&s, true);
    is_int(position(order, 100), 1, "client 2's first job goes second");
    is_int(position(order, 101), 3, "its second after one more open (8k + one job's charge)");
}

/* One client's larger short job waits for its smaller ones, but not for
 * ever: after SCHED_SHORT_AGE of them start, the oldest goes next. */
static void test_aging(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 1, 0);
    sched_push(&s, item(0, 200 * KB, 200 * KB, 1));
    sched_push(&s, item(1, 1 * KB, 1 * KB, 1));
    int smaller = 0, at = -1;
    for (int i = 0; i < 100 && at < 0; i++) {
        struct sched_item *it = sched_next(&s);
        if (index_of(it) == 0)
            at = smaller;
        else
            smaller++;
        sched_done(&s, it);
        sched_push(&s, item(1 + (i + 1) % 2, 1 * KB, 1 * KB, 1)); /* always a smaller one */
    }
    is_int(at, SCHED_SHORT_AGE, "the 200k job starts after SCHED_SHORT_AGE smaller ones");
    is_int(s.counters.short_aged, 1, "counted as one aging promotion");
    is_str(drain(&s, true), "1 2", "then the smaller ones again");
}

/* A client's deflates hold at most cpu_max threads: another client's read
 * starts on a free thread at once, and its own deflate when one ends. */
/* Four threads, a CPU bound of 1, and N deflates of client 1 queued (items
 * 0 ..): the first runs. */
static void deflates_held(struct sched *s, int n)
{
    sched_init(s, SCHED_MODE_FAIR, 4, 0);
    sched_set_cpu_max(s, 1);
    for (int i = 0; i < n; i++)
        sched_push(s, cpu_item(i, 64 * KB, 64 * KB, 1));
    is_str(drain(s, false), "0", "client 1's first deflate runs: the CPU bound is 1");
}

static void test_cpu_bound(void)
{
    struct sched s;
    deflates_held(&s, 8);
    sched_push(&s, item(8, 8 * KB, 8 * KB, 2));
    sched_push(&s, cpu_item(9, 64 * KB, 64 * KB, 2));
    is_str(drain(&s, false), "8", "the other client's read starts on a free thread");
    is_int(s.counters.cpu_passed, 1, "counted as a start the CPU bound let pass");
    sched_done(&s, &items[0]);
    is_str(drain(&s, false), "9",
           "the next deflate is the other client's: it has started fewer bytes");
    sched_done(&s, &items[9]);
    is_str(drain(&s, false), "1", "then the first client's again");
    is_int(s.running_cpu, 1, "one CPU-bound job runs");
    ok(!sched_short_waiting(&s, false),
       "only deflates the bound holds wait: a read need not shrink for them");
    ok(sched_short_waiting(&s, true), "  a deflating piece does (its end frees their place)");
    sched_push(&s, item(10, 8 * KB, 8 * KB, 2));
    ok(sched_short_waiting(&s, false), "a read waits too: then it does");
    sched_remove(&s, &items[10]);
    sched_set_mode(&s, SCHED_MODE_FIFO);
    is_str(drain(&s, false), "2 3", "fifo: no CPU bound, every free thread takes a deflate");
    sched_init(&s, SCHED_MODE_FAIR, 4, 0);
    is_int(s.cpu_max, 3, "by default the CPU bound is all threads but one");
}

/* A client whose deflates the CPU bound holds saves no credit meanwhile:
 * while it waits with only deflates, another client's reads start, and
 * when its own reads come they take turns with the other's, not all of
 * them first (without the lift: its six reads, then the other's). */
static void test_cpu_held_no_credit(void)
{
    struct sched s;
    deflates_held(&s, 4);
    for (int i = 0; i < 20; i++) {
        sched_push(&s, item(10 + i, 8 * KB, 8 * KB, 2));
        is_int(index_of(sched_next(&s)), 10 + i, "  client 2's read starts");
        sched_done(&s, &items[10 + i]);
    }
    for (int i = 0; i < 6; i++) {
        sched_push(&s, item(40 + i, 8 * KB, 8 * KB, 1));
        sched_push(&s, item(50 + i, 8 * KB, 8 * KB, 2));
    }
    const char *order = drain(&s, true);
    ok(position(order, 50) <= 2,
       "then, both with reads, client 2's first starts within client 1's first two (one job of "
       "lag, the tie to the longest waiting)");
    ok(position(order, 51) <= 4, "  and they take turns");
}

/* Short jobs start ahead of the threads, up to AHEAD more; bulk jobs only
 * onto a free thread, and fifo never starts ahead. */
static void test_ahead(void)
{
    struct sched s;
    sched_init(&s, SCHED_MODE_FAIR, 2, 0);
    sched_set_ahead(&s, 2);
    sched_push(&s, item(0, 16 * MB, 16 * MB, 1));
    sched_push(&s, item(1, 8 * KB, 8 * KB, 2));
    is_str(drain(&s, false), "1 0",
           "fair, two threads: the short job, then the bulk one on the other");
    sched_push(&s, item(2, 16 * MB, 16 * MB, 3));
    for (int i = 3; i < 6; i++)
        sched_push(&s, item(i, 8 * KB, 8 * KB, (uint64_t)i + 1));
    is_str(drain(&s, false), "3 4", "  both threads held: two short jobs start ahead, no bulk");
    is_int(s.running, 4, "  four started: the threads and two ahead");
    is_int((int)(s.waiting_short + s.waiting_bulk), 2, "  a short and the bulk job wait");
    sched_done(&s, &items[0]);
    is_str(drain(&s, false), "5", "  a bulk job ends: the short job starts ahead, not the bulk");
    sched_done(&s, &items[1]);
    sched_done(&s, &items[3]);
    is_str(drain(&s, false), "",
           "  two short jobs end: the two left hold the threads, the bulk waits");
    sched_done(&s, &items[4]);
    is_str(drain(&s, false), "2", "  a thread is free again: the bulk job starts");

    sched_init(&s, SCHED_MODE_FIFO, 1, 0);
    sched_set_ahead(&s, 2);
    sched_push(&s, item(0, 8 * KB, 8 * KB, 1));
    sched_push(&s, item(1, 8 * KB, 8 * KB, 2));
    is_str(drain(&s, false), "0", "fifo: one thread, one job started, none ahead");
}

int main(void)
{
    test_ahead();
    test_fifo();
    test_short_first();
    test_bulk_then_short();
    test_reserve();
    test_round_robin();
    test_no_starvation();
    test_remove_and_mode();
    test_clients_short();
    test_clients_by_cost();
    test_aging();
    test_cpu_bound();
    test_cpu_held_no_credit();
    return tap_done();
}
