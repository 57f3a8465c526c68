/* make bench-pool: Node's readfile-clogging experiment at the pool level,
 * through unclog's own gateway, without HTTP.
 *
 * CHAINS chains each read a warm 16 MiB file in pieces, one piece in flight
 * per chain, starting over at its end; one more chain deflates a tiny buffer,
 * one job at a time. After SECONDS it reports the reads' MB/s and the
 * deflates completed, for fifo and fair at fixed piece sizes and for fair
 * with auto pieces, beside the deflate rate with no reads at all; then the
 * same with a paced deflate chain (at most one deflate a millisecond, a
 * client that is not greedy). Each row also says where the CPU went, in % of
 * one CPU: the reads' jobs, the deflates' jobs, and the whole process (the
 * loop, waking threads and the kernel's work for them included).
 *
 * Each deflate runs on a zlib state reused from the deflate before it, as
 * the server's streams do (server/pool/zstates.h: taken on the loop, begun
 * in the job, reset and kept on the loop after it), so that the deflate
 * rate with no reads is the pool's and zlib's, not the allocator's. At the
 * end it prints the frontier: each fair row's read MB/s against the best
 * fifo row's, beside its deflates against the rate with no reads.
 *
 * usage: bench_pool FILE [SECONDS] [THREADS] [CHAINS] */
#include <fcntl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "server/base/config.h"
#include "server/pool/gateway.h"
#include "server/pool/pump.h"
#include "server/pool/zstates.h"
#include "server/base/util.h"

#define CHAINS_MAX 64
#define TINY       1024
#define AUTO_MIN   (64 * KIB) /* partition_min's default */
#define ROWS_MAX   32

struct bench;

struct chain {
    struct gateway_job job;
    struct bench *b;
    char *buf;
    size_t cap, want;
    uint64_t offset;
    int rc;
};

struct tiny {
    struct gateway_job job;
    struct bench *b;
    struct zstate *zs; /* from the bench's zstates, for one deflate */
    int rc;
    unsigned char in[TINY], out[TINY + 128];
};

/* One row's figures, for the frontier. */
struct row {
    char label[64];
    enum sched_mode mode;
    bool paced, reads;
    double mbps, deflates_s;
};

struct bench {
    uv_loop_t loop;
    struct gateway gw;
    uv_timer_t timer;
    uv_timer_t pace; /* paced rows: starts a deflate each ms if none runs */
    bool paced, tiny_busy, stopping;
    int fd;
    uint64_t size;
    size_t partition; /* a size, CONFIG_WHOLE or CONFIG_AUTO_SIZE */
    size_t auto_max;  /* auto: the piece while no short work waits */
    uint64_t bytes, deflates;
    uint64_t read_cpu_ns, tiny_cpu_ns; /* the jobs' own CPU time */
    struct chain chains[CHAINS_MAX];
    int nchains;
    struct tiny tiny;
    struct zstates zstates; /* the deflates' states, reused as the server reuses them */
    struct row rows[ROWS_MAX];
    int nrows;
};

/* The state a /gzip body of unknown length, or a listing, deflates with:
 * a gzip wrapper, zlib's largest window and the server's hash size. */
static const struct zparams tiny_params = {Z_DEFAULT_COMPRESSION, 15 + 16, 8};

static void read_work(struct gateway_job *job)
{
    struct chain *c = container_of(job, struct chain, job);
    c->rc = pump_pread_all(c->b->fd, c->buf, c->want, c->offset);
}

static void read_done(struct gateway_job *job, int status);

static void read_next(struct chain *c)
{
    struct bench *b = c->b;
    if (b->stopping)
        return;
    if (c->offset >= b->size)
        c->offset = 0;
    /* The server's own piece rule, as a plain read's. */
    uint64_t left = b->size - c->offset;
    struct pump_partition part = {.size = b->partition, .min = AUTO_MIN, .max = b->auto_max};
    c->want = pump_piece(&part, gateway_short_waiting(&b->gw, false), left, false);
    struct gateway_cost cost = {
        .bytes = c->want, .remaining = left, .client = (uint64_t)(c - b->chains)};
    gateway_submit(&b->gw, &c->job, GATEWAY_READ, cost, read_work, read_done);
}

static void read_done(struct gateway_job *job, int status)
{
    struct chain *c = container_of(job, struct chain, job);
    c->b->read_cpu_ns += job->cpu_ns;
    if (status == 0 && c->rc == 0) {
        c->b->bytes += c->want;
        c->offset += c->want;
    }
    read_next(c);
}

static void tiny_work(struct gateway_job *job)
{
    struct tiny *t = container_of(job, struct tiny, job);
    t->rc = zstate_begin(t->zs);
    if (t->rc != Z_OK)
        return;
    z_stream *z = &t->zs->z;
    z->next_in = t->in;
    z->avail_in = sizeof t->in;
    z->next_out = t->out;
    z->avail_out = sizeof t->out;
    t->rc = deflate(z, Z_FINISH) == Z_STREAM_END ? Z_OK : Z_BUF_ERROR;
}

static void tiny_submit(struct bench *b);

static void tiny_done(struct gateway_job *job, int status)
{
    struct tiny *t = container_of(job, struct tiny, job);
    struct bench *b = t->b;
    b->tiny_busy = false;
    zstates_give(&b->zstates, t->zs);
    t->zs = NULL;
    if (status == 0 && t->rc == Z_OK) {
        b->deflates++;
        b->tiny_cpu_ns += job->cpu_ns;
    }
    if (!b->stopping && !b->paced)
        tiny_submit(b);
}

static void tiny_submit(struct bench *b)
{
    struct tiny *t = &b->tiny;
    t->zs = zstates_take(&b->zstates, &tiny_params);
    if (t->zs == NULL)
        return;
    b->tiny_busy = true;
    struct gateway_cost cost = {.bytes = TINY, .remaining = TINY, .client = UINT64_MAX};
    gateway_submit(&b->gw, &t->job, GATEWAY_GZIP, cost, tiny_work, tiny_done);
}

static void on_pace(uv_timer_t *timer)
{
    struct bench *b = container_of(timer, struct bench, pace);
    if (!b->tiny_busy)
        tiny_submit(b);
}

static void on_timer(uv_timer_t *timer)
{
    struct bench *b = container_of(timer, struct bench, timer);
    b->stopping = true;
    uv_timer_stop(&b->pace);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* One run: CHAINS readers at PARTITION under MODE, plus the deflate chain
 * (b->paced: the paced one). */
static void run(struct bench *b, enum sched_mode mode, size_t partition, int chains,
                unsigned threads, double seconds)
{
    uv_loop_init(&b->loop);
    gateway_init(&b->gw, &b->loop, mode, threads);
    uv_timer_init(&b->loop, &b->timer);
    uv_timer_init(&b->loop, &b->pace);
    b->stopping = false;
    b->bytes = b->deflates = b->read_cpu_ns = b->tiny_cpu_ns = 0;
    b->partition = partition;
    b->nchains = chains;
    size_t cap = partition == CONFIG_AUTO_SIZE ? b->auto_max
                 : partition == CONFIG_WHOLE   ? (size_t)b->size
                                               : partition;
    for (int i = 0; i < chains; i++) {
        struct chain *c = &b->chains[i];
        c->b = b;
        c->offset = (b->size / (uint64_t)chains) * (uint64_t)i & ~(uint64_t)4095;
        if (c->cap < cap) {
            free(c->buf);
            c->buf = malloc(cap);
            c->cap = cap;
        }
        read_next(c);
    }
    b->tiny.b = b;
    memset(b->tiny.in, 'a', sizeof b->tiny.in);
    double cpu0 = cpu_seconds();
    uint64_t t0 = uv_hrtime();
    tiny_submit(b);
    if (b->paced)
        uv_timer_start(&b->pace, on_pace, 1, 1);
    uv_timer_start(&b->timer, on_timer, (uint64_t)(seconds * 1000), 0);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    double cpu = cpu_seconds() - cpu0;
    char label[64], piece[32], max[16];
    config_format_size(partition, piece, sizeof piece);
    config_format_size(b->auto_max, max, sizeof max);
    if (partition == CONFIG_AUTO_SIZE)
        snprintf(piece, sizeof piece, "auto 64k-%s", max);
    snprintf(label, sizeof label, "%s %s%s", mode == SCHED_MODE_FAIR ? "fair" : "fifo",
             chains ? piece : "(no reads)", b->paced ? ", paced" : "");
    printf("| %-26s | %10.0f | %10.0f | %8llu | %5.0f %% | %5.0f %% | %5.0f %% |\n", label,
           (double)b->bytes / secs / 1e6, (double)b->deflates / secs,
           (unsigned long long)b->deflates, (double)b->read_cpu_ns / secs / 1e7,
           (double)b->tiny_cpu_ns / secs / 1e7, cpu / secs * 100);
    fflush(stdout);
    if (b->nrows < ROWS_MAX) {
        struct row *r = &b->rows[b->nrows++];
        *r = (struct row){.mode = mode,
                          .paced = b->paced,
                          .reads = chains > 0,
                          .mbps = (double)b->bytes / secs / 1e6,
                          .deflates_s = (double)b->deflates / secs};
        snprintf(r->label, sizeof r->label, "%s", label);
    }
    gateway_close(&b->gw);
    uv_close((uv_handle_t *)&b->timer, NULL);
    uv_close((uv_handle_t *)&b->pace, NULL);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
}

/* The frontier, from this run's rows: how much of the best fifo read rate
 * (of any row) each fair row keeps, and how much of the deflate rate with
 * no reads it leaves the deflate chain (greedy rows against the greedy
 * chain alone, paced against paced). */
static void frontier(const struct bench *b)
{
    double best = 0, alone[2] = {0, 0};
    for (int i = 0; i < b->nrows; i++) {
        const struct row *r = &b->rows[i];
        if (!r->reads && alone[r->paced] == 0)
            alone[r->paced] = r->deflates_s;
        if (r->reads && r->mode == SCHED_MODE_FIFO && r->mbps > best)
            best = r->mbps;
    }
    printf("\nThe frontier: each fair row's read MB/s as a share of the best fifo row's, and its\n"
           "deflates/s as a share of the deflate chain's rate with no reads (greedy against\n"
           "greedy, paced against paced). Every deflate reuses a zlib state, reset between\n"
           "deflates as the server's streams are, so the rate with no reads is the pool's round\n"
           "trip and zlib's work, not the allocator mapping and unmapping a fresh state: the\n"
           "second share is what sharing the pool with the reads costs the deflates. A row\n"
           "near 100 %% in both reads at fifo's best rate and deflates as if alone.\n\n");
    printf("| %-26s | %12s | %14s |\n|---|---|---|\n", "scheduler, piece", "of best read",
           "of deflates alone");
    for (int i = 0; i < b->nrows; i++) {
        const struct row *r = &b->rows[i];
        if (r->mode != SCHED_MODE_FAIR || !r->reads)
            continue;
        double read = best > 0 ? r->mbps / best * 100 : 0;
        double defl = alone[r->paced] > 0 ? r->deflates_s / alone[r->paced] * 100 : 0;
        printf("| %-26s | %10.0f %% | %12.0f %% |\n", r->label, read, defl);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [SECONDS] [THREADS] [CHAINS]\n", argv[0]);
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    unsigned threads = argc > 3 ? (unsigned)atoi(argv[3]) : 4;
    int chains = argc > 4 ? atoi(argv[4]) : 10;
    if (chains < 0 || chains > CHAINS_MAX || threads == 0 || seconds <= 0) {
        fprintf(stderr, "bench_pool: bad arguments\n");
        return 2;
    }
    char env[16];
    snprintf(env, sizeof env, "%u", threads);
    setenv("UV_THREADPOOL_SIZE", env, 1);
    static struct bench b;
    b.fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    off_t size = b.fd < 0 ? -1 : lseek(b.fd, 0, SEEK_END);
    if (size <= 0) {
        perror(argv[1]);
        return 1;
    }
    b.size = (uint64_t)size;
    zstates_init(&b.zstates, NULL, threads);
    printf("%d chains reading %s (%llu bytes) + 1 chain of %d-byte deflates on a reused zlib "
           "state, %u threads, %.1f s each\n\n",
           chains, argv[1], (unsigned long long)b.size, TINY, threads, seconds);
    printf("| %-26s | %10s | %10s | %8s | %7s | %7s | %7s |\n|---|---|---|---|---|---|---|\n",
           "scheduler, piece", "read MB/s", "deflates/s", "deflates", "reads' CPU", "deflates' CPU",
           "process CPU");
    run(&b, SCHED_MODE_FIFO, 0, 0, threads, seconds);
    static const size_t fifo_sizes[] = {8 * KIB, 64 * KIB, 512 * KIB, MIB, 4 * MIB, CONFIG_WHOLE};
    for (size_t i = 0; i < ARRAY_SIZE(fifo_sizes); i++)
        run(&b, SCHED_MODE_FIFO, fifo_sizes[i], chains, threads, seconds);
    static const size_t fair_sizes[] = {64 * KIB, MIB, 4 * MIB, CONFIG_WHOLE};
    for (size_t i = 0; i < ARRAY_SIZE(fair_sizes); i++)
        run(&b, SCHED_MODE_FAIR, fair_sizes[i], chains, threads, seconds);
    static const size_t auto_max[] = {MIB, 4 * MIB};
    for (size_t i = 0; i < ARRAY_SIZE(auto_max); i++) {
        b.auto_max = auto_max[i];
        run(&b, SCHED_MODE_FAIR, CONFIG_AUTO_SIZE, chains, threads, seconds);
    }
    b.paced = true;
    run(&b, SCHED_MODE_FIFO, 0, 0, threads, seconds);
    run(&b, SCHED_MODE_FIFO, CONFIG_WHOLE, chains, threads, seconds);
    for (size_t i = 0; i < ARRAY_SIZE(auto_max); i++) {
        b.auto_max = auto_max[i];
        run(&b, SCHED_MODE_FAIR, CONFIG_AUTO_SIZE, chains, threads, seconds);
    }
    frontier(&b);
    zstates_fini(&b.zstates);
    for (int i = 0; i < CHAINS_MAX; i++)
        free(b.chains[i].buf);
    close(b.fd);
    return 0;
}
