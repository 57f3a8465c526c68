/* The gateway over a real loop and pool: at most `threads` jobs inside
 * libuv and as many short ones ahead, the policy's order, and a cancel that
 * completes later, from the loop, never inside gateway_cancel. */
#include <stdlib.h>
#include <uv.h>

#include "server/pool/gateway.h"
#include "server/base/util.h"
#include "tests/tap.h"

struct job {
    struct gateway_job g;
    int id;
    int status; /* 1: not done yet */
};

static uv_sem_t started, release; /* a blocking job says it runs, then waits */
static int order[16], done_count;

static void block_work(struct gateway_job *g)
{
    uv_sem_post(&started);
    uv_sem_wait(&release);
}

static void quick_work(struct gateway_job *g)
{
}

/* Waits without using the CPU, as a read from a cold disk does. */
static void sleep_work(struct gateway_job *g)
{
    uv_sleep(3);
}

static void on_done(struct gateway_job *g, int status)
{
    struct job *j = container_of(g, struct job, g);
    j->status = status;
    order[done_count++] = j->id;
}

static void submit(struct gateway *gw, struct job *j, int id, uint64_t remaining,
                   gateway_work_fn work)
{
    j->id = id;
    j->status = 1;
    struct gateway_cost cost = {.bytes = remaining, .remaining = remaining, .client = 1};
    is_int(gateway_submit(gw, &j->g, GATEWAY_READ, cost, work, on_done), 0, "submitted");
}

int main(void)
{
    /* One pool thread: the gateway hands libuv one job at a time. */
    setenv("UV_THREADPOOL_SIZE", "1", 1);
    uv_sem_init(&started, 0);
    uv_sem_init(&release, 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct gateway gw;
    gateway_init(&gw, &loop, SCHED_MODE_FAIR, 1);

    struct job a, bulk, small, gone;
    submit(&gw, &a, 1, 16 << 20, block_work); /* takes the only thread, blocks */
    uv_sem_wait(&started);
    submit(&gw, &bulk, 2, 16 << 20, quick_work);
    submit(&gw, &small, 3, 1024, quick_work);
    submit(&gw, &gone, 4, 2048, quick_work);
    is_int(gw.sched.running, 2, "inside libuv: the job on the thread, and one short job ahead");
    is_int(gw.sched.waiting_bulk, 1, "the bulk job waits in the gateway: none starts ahead");
    is_int(gw.sched.waiting_short, 1, "and the short job beyond the one ahead");
    ok(gateway_short_waiting(&gw, false), "short work waits (in libuv's queue, for the thread)");

    is_int(gateway_cancel(&gone.g), 0, "a queued job can be cancelled");
    is_int(gone.status, 1, "its done callback has not run inside gateway_cancel");
    is_int(gateway_cancel(&gone.g), UV_EBUSY, "a second cancel of it: busy");
    is_int(gateway_cancel(&a.g), UV_EBUSY, "a running job cannot be cancelled");

    uv_sem_post(&release);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(gone.status, UV_ECANCELED, "the cancelled job's done ran later with UV_ECANCELED");
    is_int(done_count, 4, "every done callback ran once");
    is_int(order[0], 4, "the cancel completed first, from the loop's timer phase");
    is_int(order[1], 1, "then the job that held the thread");
    is_int(order[2], 3, "then short work first");
    is_int(order[3], 2, "then bulk");
    is_int(small.status, 0, "the short job succeeded");
    is_int(gw.stats[GATEWAY_READ].cancelled, 1, "one cancel counted");
    is_int(gw.stats[GATEWAY_READ].completed, 3, "three completions counted");

    gateway_close(&gw);
    uv_run(&loop, UV_RUN_DEFAULT);

    /* Bulk work that waits on the device may hold every thread but the
     * reserve; until measured, bulk holds no more threads than CPUs. */
    gateway_init(&gw, &loop, SCHED_MODE_FAIR, 4);
    gw.cpus = 1;
    sched_set_bulk_max(&gw.sched, gw.cpus);
    is_int(gw.sched.bulk_max, 1, "bulk starts limited to the CPUs (one here)");
    static struct job waits[12];
    for (int i = 0; i < 12; i++)
        submit(&gw, &waits[i], 10 + i, 16 << 20, sleep_work);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(gw.sched.bulk_max, 3, "after bulk jobs that waited without CPU: threads - 1");
    gateway_close(&gw);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(uv_loop_close(&loop), 0, "the loop closes clean");
    uv_sem_destroy(&release);
    uv_sem_destroy(&started);
    return tap_done();
}
