#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "server/pool/gateway.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/base/util.h"

static const char *const class_names[GATEWAY_NCLASSES] = {"open", "read", "gzip", "list", "fill"};

/* The nice value of this worker thread, as last set here. */
static _Thread_local int thread_nice;

static void gateway_on_work(uv_work_t *req)
{
    struct gateway_job *job = container_of(req, struct gateway_job, req);
    if (job->nice != thread_nice) {
        /* Per thread: on Linux a thread id is a process id to setpriority. */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), job->nice);
        thread_nice = job->nice;
    }
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    job->started_ns = uv_hrtime();
    job->work(job);
    job->finished_ns = uv_hrtime();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    job->cpu_ns = (uint64_t)(cpu1.tv_sec - cpu0.tv_sec) * 1000000000u +
                  (uint64_t)(cpu1.tv_nsec - cpu0.tv_nsec);
}

static void count(struct gateway *gw, struct gateway_job *job, int status)
{
    struct gateway_class_stats *s = &gw->stats[job->cls];
    if (status == UV_ECANCELED) {
        s->cancelled++;
        return;
    }
    uint64_t queued = (job->started_ns - job->submitted_ns) / 1000;
    uint64_t running = (job->finished_ns - job->started_ns) / 1000;
    uint64_t now = uv_now(gw->loop);
    s->completed++;
    s->cost_total += job->item.cost;
    s->queued_us_total += queued;
    s->running_us_total += running;
    if (queued > s->queued_us_max)
        s->queued_us_max = queued;
    if (running > s->running_us_max)
        s->running_us_max = running;
    hist_add(&s->queued, now, queued);
    hist_add(&s->running, now, running);
    hist_total_add(&s->queued_total, queued);
    hist_total_add(&s->running_total, running);
}

static void dispatch(struct gateway *gw);

/* Bulk jobs that used the CPU less than half their time waited on the
 * device: then bulk may hold every thread but the reserve; otherwise no
 * more threads than CPUs. Smoothed over the last few jobs (1/8 weight). */
static void adapt_bulk_max(struct gateway *gw, const struct gateway_job *job)
{
    uint64_t wall = job->finished_ns - job->started_ns;
    if (!job->item.bulk || wall == 0)
        return;
    uint64_t permille = job->cpu_ns >= wall ? 1000 : job->cpu_ns * 1000 / wall;
    gw->bulk_cpu_permille = (gw->bulk_cpu_permille * 7 + permille) / 8;
    sched_set_bulk_max(&gw->sched, gw->bulk_cpu_permille < 500 ? 0 : gw->cpus);
}

static void gateway_on_after_work(uv_work_t *req, int status)
{
    struct gateway_job *job = container_of(req, struct gateway_job, req);
    struct gateway *gw = job->gateway;
    job->in_libuv = false;
    sched_done(&gw->sched, &job->item);
    count(gw, job, status);
    if (status == 0)
        adapt_bulk_max(gw, job);
    job->done(job, status);
    dispatch(gw);
}

/* Hands libuv what the policy lets start: at most `threads` jobs are ever
 * inside libuv, so its FIFO never has a choice to make. */
static void dispatch(struct gateway *gw)
{
    struct sched_item *item;
    while ((item = sched_next(&gw->sched)) != NULL) {
        struct gateway_job *job = container_of(item, struct gateway_job, item);
        job->in_libuv = true;
        job->nice = item->bulk ? gw->bulk_nice : 0;
        /* uv_queue_work fails only for a NULL work callback. */
        if (uv_queue_work(gw->loop, &job->req, gateway_on_work, gateway_on_after_work) < 0)
            abort();
    }
}

static void gateway_on_cancel_timer(uv_timer_t *timer)
{
    struct gateway *gw = container_of(timer, struct gateway, cancel_timer);
    uv_unref((uv_handle_t *)timer); /* a cancel below arms and refs it again */
    /* Done callbacks may cancel more: take the list as it is now. */
    struct gateway_job *job = gw->cancelled;
    gw->cancelled = NULL;
    while (job != NULL) {
        struct gateway_job *next = job->next_cancelled;
        count(gw, job, UV_ECANCELED);
        job->done(job, UV_ECANCELED);
        job = next;
    }
}

void gateway_init(struct gateway *gw, uv_loop_t *loop, enum sched_mode mode, unsigned threads)
{
    *gw = (struct gateway){.loop = loop};
    cpu_set_t cpus;
    gw->cpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? (unsigned)CPU_COUNT(&cpus) : 0;
    gw->bulk_cpu_permille = 1000; /* until measured: CPU-bound */
    sched_init(&gw->sched, mode, threads, gw->cpus);
    uv_timer_init(loop, &gw->cancel_timer); /* cannot fail */
    uv_unref((uv_handle_t *)&gw->cancel_timer);
}

void gateway_close(struct gateway *gw)
{
    if (gw->closing)
        return;
    gw->closing = true;
    uv_close((uv_handle_t *)&gw->cancel_timer, NULL);
}

int gateway_set_bulk_nice(struct gateway *gw, int nice)
{
    struct rlimit lim;
    /* Setting a thread back to nice 0 needs RLIMIT_NICE >= 20 (or root). */
    bool can_undo = geteuid() == 0 || (getrlimit(RLIMIT_NICE, &lim) == 0 && lim.rlim_cur >= 20);
    if (nice != 0 && !can_undo)
        return UV_EPERM;
    gw->bulk_nice = nice;
    return 0;
}

void gateway_set_mode(struct gateway *gw, enum sched_mode mode)
{
    sched_set_mode(&gw->sched, mode);
    dispatch(gw);
}

int gateway_submit(struct gateway *gw, struct gateway_job *job, enum gateway_class cls,
                   struct gateway_cost cost, gateway_work_fn work, gateway_done_fn done)
{
    if (gw->closing)
        return UV_ECANCELED;
    job->gateway = gw;
    job->cls = cls;
    job->work = work;
    job->done = done;
    job->item.cost = cost.bytes;
    job->item.remaining = cost.remaining;
    job->item.flow_id = cost.flow;
    job->in_libuv = false;
    job->submitted_ns = uv_hrtime();
    job->started_ns = job->finished_ns = job->submitted_ns;
    gw->stats[cls].submitted++;
    sched_push(&gw->sched, &job->item);
    dispatch(gw);
    return 0;
}

int gateway_cancel(struct gateway_job *job)
{
    struct gateway *gw = job->gateway;
    if (job->in_libuv)
        return uv_cancel((uv_req_t *)&job->req);
    if (!job->item.queued)
        return UV_EBUSY; /* done, or its cancel already under way */
    sched_remove(&gw->sched, &job->item);
    job->next_cancelled = gw->cancelled;
    gw->cancelled = job;
    /* Later, from the loop, as libuv's own cancel does: the caller may be
     * in the middle of tearing down what the done callback touches. */
    uv_timer_start(&gw->cancel_timer, gateway_on_cancel_timer, 0, 0);
    uv_ref((uv_handle_t *)&gw->cancel_timer);
    return 0;
}

bool gateway_short_waiting(const struct gateway *gw)
{
    return sched_short_waiting(&gw->sched);
}

const char *gateway_class_name(enum gateway_class cls)
{
    return class_names[cls];
}
