#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "server/pool/gateway.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/base/snapshot.h"
#include "server/base/util.h"

static const char *const class_names[GATEWAY_NCLASSES] = {"open", "read", "gzip", "list"};

/* The nice value of this worker thread, as last set here. */
static _Thread_local int thread_nice;
/* The job this worker thread runs: its CPU time when it started or last
 * gave way, and how often it gave way. */
static _Thread_local uint64_t thread_since_ns;
static _Thread_local uint32_t thread_gave_way;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gateway_give_way(void)
{
    /* CPU time, not wall time: a job the kernel kept waiting has not held
     * the CPU meanwhile, and giving it up again would only slow it. */
    uint64_t now = thread_cpu_ns();
    if (now - thread_since_ns < GATEWAY_GIVE_WAY_US * 1000u)
        return;
    sched_yield();
    thread_gave_way++;
    thread_since_ns = thread_cpu_ns();
}

static void gateway_on_work(uv_work_t *req)
{
    struct gateway_job *job = container_of(req, struct gateway_job, req);
    if (job->nice != thread_nice) {
        /* Per thread: on Linux a thread id is a process id to setpriority. */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), job->nice);
        thread_nice = job->nice;
    }
    if (!job->item.bulk)
        atomic_fetch_add_explicit(&job->gateway->short_taken, 1, memory_order_relaxed);
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    job->started_ns = uv_hrtime();
    thread_since_ns = (uint64_t)cpu0.tv_sec * 1000000000u + (uint64_t)cpu0.tv_nsec;
    thread_gave_way = 0;
    job->work(job);
    job->finished_ns = uv_hrtime();
    job->gave_way = thread_gave_way;
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
    s->gave_way += job->gave_way;
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
    if (status == UV_ECANCELED && !job->item.bulk) /* no thread took it */
        atomic_fetch_add_explicit(&gw->short_taken, 1, memory_order_relaxed);
    sched_done(&gw->sched, &job->item);
    count(gw, job, status);
    if (status == 0)
        adapt_bulk_max(gw, job);
    /* The job may be freed by its callback. */
    uint64_t client = job->item.client, ran = job->finished_ns - job->started_ns;
    uint64_t t0 = gw->ran != NULL && status == 0 ? uv_hrtime() : 0;
    gw->short_waited = gw->short_ahead != job->ahead_mark;
    job->done(job, status);
    gw->short_waited = false;
    if (t0 != 0)
        gw->ran(gw->ran_arg, client, ran, uv_hrtime() - t0);
    dispatch(gw);
}

/* Hands libuv what the policy lets start, in its order: libuv's FIFO never
 * has a choice to make. */
static void dispatch(struct gateway *gw)
{
    struct sched_item *item;
    while ((item = sched_next(&gw->sched)) != NULL) {
        struct gateway_job *job = container_of(item, struct gateway_job, item);
        job->in_libuv = true;
        job->nice = item->bulk ? gw->bulk_nice : 0;
        gw->short_handed += !item->bulk;
        gw->short_ahead += gw->sched.running > gw->sched.threads;
        job->ahead_mark = gw->short_ahead;
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
    sched_set_cpu_max(&gw->sched, gw->cpus);
    sched_set_ahead(&gw->sched, threads > 0 ? threads : 1);
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
    job->item.client = cost.client;
    job->item.cpu = cls == GATEWAY_GZIP;
    job->in_libuv = false;
    job->submitted_ns = uv_hrtime();
    job->started_ns = job->finished_ns = job->submitted_ns;
    gw->stats[cls].submitted++;
    sched_push(&gw->sched, &job->item);
    dispatch(gw);
    return 0;
}

void gateway_set_cost(struct gateway_job *job, uint64_t bytes)
{
    /* The policy charged the estimate when it took the job; the loop reads
     * the cost again only after the work is done. */
    job->item.cost = bytes;
}

int gateway_cancel(struct gateway_job *job)
{
    struct gateway *gw = job->gateway;
    if (job->in_libuv)
        return uv_cancel((uv_req_t *)&job->req);
    if (!job->item.node.queued)
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

bool gateway_withdrawable(const struct gateway_job *job)
{
    return !job->in_libuv && job->item.node.queued;
}

int gateway_withdraw(struct gateway_job *job)
{
    if (!gateway_withdrawable(job))
        return UV_EBUSY;
    sched_remove(&job->gateway->sched, &job->item);
    job->gateway->stats[job->cls].withdrawn++;
    return 0;
}

bool gateway_short_waiting(const struct gateway *gw, bool cpu)
{
    /* Short work waits in the gateway's queues, or in libuv's for a thread. */
    uint64_t taken = atomic_load_explicit(&gw->short_taken, memory_order_relaxed);
    return sched_short_waiting(&gw->sched, cpu) || gw->short_handed > taken || gw->short_waited;
}

const char *gateway_class_name(enum gateway_class cls)
{
    return class_names[cls];
}

/* The scheduler's figures. Its mode is /stats' alone: /metrics has it as
 * unclog_setting_info{key="scheduler"}, with the other live settings. */
static const struct snap_def sched_mode_def = {.key = "mode", .kind = SNAP_INFO};
static const struct snap_def sched_short_max = {
    .key = "short_max_bytes",
    .metric = "unclog_scheduler_short_max_bytes",
    .help = "The most bytes a response may have left for its threadpool jobs to be short.",
    .merge = SNAP_SAME};
static const struct snap_def sched_bulk_max = {
    .key = "bulk_max",
    .metric = "unclog_scheduler_bulk_jobs_max",
    .help = "The most threads bulk jobs may hold now under the fair scheduler: fewer than the "
            "threads, and no more than the CPUs while bulk work is CPU-bound.",
    .merge = SNAP_SAME};
static const struct snap_def sched_bulk_cpu = {
    .key = "bulk_cpu_permille",
    .metric = "unclog_scheduler_bulk_cpu_ratio",
    .unit = SNAP_PERMILLE,
    .help = "CPU time per wall time of recent bulk jobs, smoothed: below 0.5 they wait on the "
            "disk, and bulk may hold every thread but the reserve.",
    .merge = SNAP_SAME};
static const struct snap_def sched_cpu_max = {
    .key = "cpu_max",
    .metric = "unclog_scheduler_cpu_jobs_max",
    .help = "The most threads CPU-bound short jobs (deflates) may hold under the fair scheduler: "
            "the CPUs the server may run on, fewer than the threads.",
    .merge = SNAP_SAME};
static const struct snap_def sched_running = {
    .key = "running",
    .metric = "unclog_scheduler_jobs_running",
    .help = "Threadpool jobs handed to the pool now: running, or short jobs queued ahead of the "
            "threads."};
static const struct snap_def sched_running_bulk = {.key = "running_bulk",
                                                   .metric = "unclog_scheduler_bulk_jobs_running",
                                                   .help = "Bulk threadpool jobs running now."};
static const struct snap_def sched_running_cpu = {
    .key = "running_cpu",
    .metric = "unclog_scheduler_cpu_jobs_running",
    .help = "CPU-bound short threadpool jobs (deflates) running now."};
static const struct snap_def sched_cpu_passed = {
    .key = "cpu_passed",
    .metric = "unclog_scheduler_cpu_passed_total",
    .kind = SNAP_COUNTER,
    .help = "Short jobs started while the CPU bound held a deflate back: other clients' reads "
            "that did not wait for deflates."};
static const char waiting_help[] = "Threadpool jobs waiting for a thread now: short (their "
                                   "response has at most unclog_scheduler_short_max_bytes left) "
                                   "or bulk.";
static const struct snap_def sched_waiting_short = {.key = "waiting_short",
                                                    .metric = "unclog_scheduler_jobs_waiting",
                                                    .labels = "kind=\"short\"",
                                                    .help = waiting_help};
static const struct snap_def sched_waiting_bulk = {.key = "waiting_bulk",
                                                   .metric = "unclog_scheduler_jobs_waiting",
                                                   .labels = "kind=\"bulk\"",
                                                   .help = waiting_help};
static const char started_help[] = "Threadpool jobs started, short or bulk.";
static const struct snap_def sched_short_started = {.key = "short_started",
                                                    .metric = "unclog_scheduler_jobs_started_total",
                                                    .kind = SNAP_COUNTER,
                                                    .labels = "kind=\"short\"",
                                                    .help = started_help};
static const struct snap_def sched_bulk_started = {.key = "bulk_started",
                                                   .metric = "unclog_scheduler_jobs_started_total",
                                                   .kind = SNAP_COUNTER,
                                                   .labels = "kind=\"bulk\"",
                                                   .help = started_help};
static const struct snap_def sched_bulk_over_short = {
    .key = "bulk_over_short",
    .metric = "unclog_scheduler_bulk_over_short_total",
    .kind = SNAP_COUNTER,
    .help = "Bulk jobs started while short work waited, not by the no-starvation bound (0 under "
            "the fair scheduler)."};
static const struct snap_def sched_streak_breaks = {
    .key = "streak_breaks",
    .metric = "unclog_scheduler_streak_breaks_total",
    .kind = SNAP_COUNTER,
    .help = "Bulk jobs started by the no-starvation bound, after a streak of short ones."};

static void sched_stats(const struct gateway *gw, struct snapshot *s)
{
    const struct sched *sc = &gw->sched;
    snap_open(s, "scheduler", NULL);
    snap_add_text(s, &sched_mode_def, NULL, sc->mode == SCHED_MODE_FAIR ? "fair" : "fifo");
    snap_add(s, &sched_short_max, SCHED_SHORT_BYTES);
    snap_add(s, &sched_bulk_max, sc->bulk_max);
    snap_add(s, &sched_bulk_cpu, gw->bulk_cpu_permille);
    snap_add(s, &sched_running, sc->running);
    snap_add(s, &sched_running_bulk, sc->running_bulk);
    snap_add(s, &sched_cpu_max, sc->cpu_max);
    snap_add(s, &sched_running_cpu, sc->running_cpu);
    snap_add(s, &sched_cpu_passed, sc->counters.cpu_passed);
    snap_add(s, &sched_waiting_short, sc->waiting_short);
    snap_add(s, &sched_waiting_bulk, sc->waiting_bulk);
    snap_add(s, &sched_short_started, sc->counters.short_started);
    snap_add(s, &sched_bulk_started, sc->counters.bulk_started);
    snap_add(s, &sched_bulk_over_short, sc->counters.bulk_over_short);
    snap_add(s, &sched_streak_breaks, sc->counters.streak_breaks);
    snap_close(s);
}

/* Each class's figures, in an object labelled class="open" (and so on). */
static const struct snap_def job_submitted = {.key = "submitted",
                                              .metric = "unclog_jobs_submitted_total",
                                              .kind = SNAP_COUNTER,
                                              .help = "Threadpool jobs submitted, by class."};
static const struct snap_def job_completed = {.key = "completed",
                                              .metric = "unclog_jobs_completed_total",
                                              .kind = SNAP_COUNTER,
                                              .help = "Threadpool jobs completed, by class."};
static const struct snap_def job_cancelled = {
    .key = "cancelled",
    .metric = "unclog_jobs_cancelled_total",
    .kind = SNAP_COUNTER,
    .help = "Threadpool jobs cancelled before they started, by class."};
static const struct snap_def job_withdrawn = {
    .key = "withdrawn",
    .metric = "unclog_jobs_withdrawn_total",
    .kind = SNAP_COUNTER,
    .help = "Threadpool jobs taken back by their owner while they waited in the gateway's queues "
            "(a stalled response's fill, as it gives its memory way): they never ran, by class."};
static const struct snap_def job_in_flight = {
    .key = "in_flight",
    .metric = "unclog_jobs_in_flight",
    .help = "Threadpool jobs submitted and not yet completed, cancelled or withdrawn, by class."};
static const struct snap_def job_cost = {
    .key = "cost_bytes",
    .metric = "unclog_job_cost_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "Cost in bytes of completed threadpool jobs, by class, as the scheduler weighs them: "
            "the bytes a job reads or deflates."};
static const struct snap_def job_gave_way = {
    .key = "gave_way",
    .metric = "unclog_jobs_gave_way_total",
    .kind = SNAP_COUNTER,
    .help = "Times completed threadpool jobs gave the CPU up between steps, after 50 us of "
            "running, so that the loop and other jobs did not wait out a time slice, by class."};
static const struct snap_def job_queued = {
    .key = "queued_us_total",
    .metric = "unclog_job_queue_wait_seconds",
    .kind = SNAP_HISTOGRAM,
    .unit = SNAP_US,
    .help = "Time completed threadpool jobs waited for a thread, by class."};
static const struct snap_def job_queued_max = {
    .key = "queued_us_max",
    .metric = "unclog_job_queue_wait_max_seconds",
    .unit = SNAP_US,
    .help = "The longest a completed threadpool job waited for a thread, by class.",
    .merge = SNAP_MAX};
static const struct snap_def job_running = {
    .key = "running_us_total",
    .metric = "unclog_job_run_seconds",
    .kind = SNAP_HISTOGRAM,
    .unit = SNAP_US,
    .help = "Time completed threadpool jobs ran on their thread, by class."};
static const struct snap_def job_running_max = {
    .key = "running_us_max",
    .metric = "unclog_job_run_max_seconds",
    .unit = SNAP_US,
    .help = "The longest a completed threadpool job ran on its thread, by class.",
    .merge = SNAP_MAX};
/* The recent window (about 1 s), what a dashboard shows: /stats' alone.
 * Prometheus takes rates and quantiles over windows of its own from the
 * cumulative counters and histograms. */
static const struct snap_def job_recent[] = {
    {.key = "jobs"},           {.key = "queued_us_p50"},  {.key = "queued_us_p99"},
    {.key = "queued_us_max"},  {.key = "running_us_p50"}, {.key = "running_us_p99"},
    {.key = "running_us_max"},
};

static void class_stats(const struct gateway_class_stats *st, uint64_t now, struct snapshot *s)
{
    snap_add(s, &job_submitted, st->submitted);
    snap_add(s, &job_completed, st->completed);
    snap_add(s, &job_cancelled, st->cancelled);
    snap_add(s, &job_withdrawn, st->withdrawn);
    snap_add(s, &job_in_flight, st->submitted - st->completed - st->cancelled - st->withdrawn);
    snap_add(s, &job_cost, st->cost_total);
    snap_add(s, &job_gave_way, st->gave_way);
    snap_add_hist(s, &job_queued, &st->queued_total);
    snap_add(s, &job_queued_max, st->queued_us_max);
    snap_add_hist(s, &job_running, &st->running_total);
    snap_add(s, &job_running_max, st->running_us_max);
    static const enum snap_stat recent[] = {SNAP_STAT_COUNT, SNAP_STAT_P50, SNAP_STAT_P99,
                                            SNAP_STAT_MAX,   SNAP_STAT_P50, SNAP_STAT_P99,
                                            SNAP_STAT_MAX};
    struct hist_summary q, r;
    hist_summary(&st->queued, now, &q);
    hist_summary(&st->running, now, &r);
    snap_open(s, "recent", NULL);
    /* The first four are the queue wait's (with the jobs' count). */
    for (size_t i = 0; i < ARRAY_SIZE(recent); i++)
        snap_add_window(s, &job_recent[i], i < 4 ? &st->queued : &st->running, i < 4 ? &q : &r,
                        recent[i]);
    snap_close(s);
}

void gateway_stats(const struct gateway *gw, struct snapshot *s)
{
    sched_stats(gw, s);
    snap_open(s, "jobs", NULL);
    for (int i = 0; i < GATEWAY_NCLASSES; i++) {
        snap_open(s, class_names[i], "class");
        class_stats(&gw->stats[i], uv_now(gw->loop), s);
        snap_close(s);
    }
    snap_close(s);
}
