#ifndef UNCLOG_GATEWAY_H
#define UNCLOG_GATEWAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "server/base/loghist.h"
#include "server/pool/sched.h"

/* The one path to libuv's threadpool. Every job states its class and its
 * cost; the gateway keeps its own queues and hands libuv at most `threads`
 * jobs at a time, and under fair as many short jobs again, in the order
 * its policy (server/pool/sched.h: fifo or fair) chose: the policy, never
 * libuv's FIFO, decides which job runs next, and a thread that finishes
 * finds the next short job waiting instead of idling until the loop's next
 * pass. It counts, per class, how long
 * jobs waited for a thread and how long they ran. */

/* What a job does, so that each class's numbers mean one thing:
 *   open  resolve, open and fstat one file (and FILE.gz), and read its
 *         body when it fits the first piece (or the file cache wants it):
 *         a small file costs one crossing
 *   read  one piece of a file, for the pump (partition bytes at most)
 *   gzip  deflate one slice (a /gzip body, or read+deflate of a file piece)
 *   list  read a directory and build its HTML listing */
enum gateway_class { GATEWAY_OPEN, GATEWAY_READ, GATEWAY_GZIP, GATEWAY_LIST, GATEWAY_NCLASSES };

struct gateway_job;

/* Runs on a worker thread: touches only its own job (no loop, no handles,
 * no logging, no globals). */
typedef void (*gateway_work_fn)(struct gateway_job *job);

/* Runs on the loop thread when the job is done; STATUS is 0 or UV_ECANCELED. */
typedef void (*gateway_done_fn)(struct gateway_job *job, int status);

/* What a job costs: the bytes it reads or deflates, the bytes its response
 * has yet to produce (this job included: what makes it short or bulk), and
 * who asked (a client: work is shared per client, in every class). */
struct gateway_cost {
    uint64_t bytes, remaining, client;
};

/* Embed in the object that owns the job; get back with container_of. */
struct gateway_job {
    uv_work_t req;
    struct sched_item item; /* its place in the gateway's queues */
    struct gateway_job *next_cancelled;
    bool in_libuv; /* handed to uv_queue_work, its after-work not yet run */
    int nice;      /* the worker thread's nice value while it runs the job */
    struct gateway *gateway;
    enum gateway_class cls;
    gateway_work_fn work;
    gateway_done_fn done;
    uint64_t submitted_ns, started_ns, finished_ns;
    uint64_t ahead_mark; /* the gateway's short_ahead when it was handed to libuv */
    uint64_t cpu_ns;     /* CPU time the worker thread spent on it */
    uint32_t gave_way;   /* times it gave the CPU up (gateway_give_way) */
};

/* Worker thread, from a job's work, between the steps of a long job (a
 * deflate, a large read): gives the CPU up (sched_yield) once the job has
 * run GATEWAY_GIVE_WAY_US of CPU time since it started or last gave way
 * (call it only where work remains: giving way as a job ends is no use,
 * its thread goes on to the next job or sleeps anyway). On a busy CPU
 * the kernel lets a running thread finish its time slice (the kernel's
 * default, scaled by the CPUs; what the woken loop waited under a /gzip
 * flood is in docs/results.md) before a thread it woke runs: the loop
 * thread woken by a client's request, or a worker woken for another
 * client's short job, would wait that long behind each deflate. Giving way costs a system call
 * that returns at once when nothing else waits for the CPU. */
#define GATEWAY_GIVE_WAY_US 50
void gateway_give_way(void);

/* Counters per class. Times in microseconds. */
struct gateway_class_stats {
    uint64_t submitted, completed, cancelled;
    uint64_t withdrawn;  /* taken back before they started (gateway_withdraw) */
    uint64_t cost_total; /* the cost of the jobs completed */
    uint64_t gave_way;   /* times the jobs completed gave the CPU up */
    uint64_t queued_us_max, running_us_max;
    struct hist queued, running;                   /* the recent window */
    struct hist_total queued_total, running_total; /* since the start */
};

/* Owned by the server; lives as long as its loop runs. */
struct gateway {
    uv_loop_t *loop;
    struct sched sched;
    uv_timer_t cancel_timer; /* runs cancelled jobs' done callbacks, later */
    struct gateway_job *cancelled;
    bool closing;
    /* How many threads bulk work may hold adapts to what it waits on: CPU
     * (warm reads, deflate: no more than the CPUs, or it only takes the CPU
     * from the loop and short work) or the disk (cold reads: every thread
     * but the reserve, to keep the device busy). */
    unsigned cpus;              /* the CPUs this process may run on */
    uint64_t bulk_cpu_permille; /* recent bulk jobs' CPU time per wall time, smoothed */
    int bulk_nice;              /* see gateway_set_bulk_nice */
    struct gateway_class_stats stats[GATEWAY_NCLASSES];
    /* Short jobs handed to libuv, and those a thread took (or cancelled
     * there): the difference waits in libuv's queue for a thread. */
    uint64_t short_handed;
    _Atomic uint64_t short_taken;
    /* Short jobs handed to libuv while every thread was taken (ahead); and,
     * during a job's done callback, whether one was while it ran. */
    uint64_t short_ahead;
    bool short_waited;
    /* Told on the loop thread of each job that ran, after its done
     * callback: who asked (its cost's client), how long it ran on its thread
     * (NS) and how long the callback took the loop (LOOP_NS). Set by the
     * owner after gateway_init; NULL: nobody. */
    void (*ran)(void *arg, uint64_t client, uint64_t ns, uint64_t loop_ns);
    void *ran_arg;
};

/* Sets up GW on LOOP for a pool of THREADS threads under MODE. Bulk work
 * may hold at most threads - 1 of them, and no more than the CPUs this
 * process may run on: more bulk threads than CPUs only take the CPU from
 * the loop thread and from short work. Its timer does not keep the loop
 * alive; gateway_close closes it. */
void gateway_init(struct gateway *gw, uv_loop_t *loop, enum sched_mode mode, unsigned threads);

/* Closes the gateway's handle (run the loop once more to finish). Call it
 * once no job is queued or running: every job holds its connection, so
 * after the last connection is gone. Later submits fail. */
void gateway_close(struct gateway *gw);

/* Bulk pieces run at nice NICE on their thread (0: no change), so that on a
 * busy CPU the loop and short jobs get it first. A thread is set back to 0
 * for short work, which only root or a high enough RLIMIT_NICE may do:
 * without, this refuses (returns UV_EPERM) and nothing changes. */
int gateway_set_bulk_nice(struct gateway *gw, int nice);

/* Switches the policy for what waits now and for what comes. */
void gateway_set_mode(struct gateway *gw, enum sched_mode mode);

/* Queues JOB of class CLS with COST. It starts when the policy says so; DONE
 * runs on the loop when it is done. Returns 0, or UV_ECANCELED when the
 * gateway is closing (DONE never runs, the caller still owns the job). */
int gateway_submit(struct gateway *gw, struct gateway_job *job, enum gateway_class cls,
                   struct gateway_cost cost, gateway_work_fn work, gateway_done_fn done);

/* Worker thread, from JOB's work: what it really cost, BYTES, when only
 * running it tells (an open that reads the body of a small file, or not):
 * its class's cost_bytes counts that, not what it was submitted with. */
void gateway_set_cost(struct gateway_job *job, uint64_t bytes);

/* Cancels JOB if it has not started: then its DONE runs later, from the
 * loop, with UV_ECANCELED (never from inside this call). Returns 0, or
 * UV_EBUSY when it is running or done. */
int gateway_cancel(struct gateway_job *job);

/* Whether JOB waits in the gateway's own queues: submitted, not yet
 * handed to libuv, so no worker has it or can take it. Loop thread. */
bool gateway_withdrawable(const struct gateway_job *job);

/* Takes JOB back if it waits in the gateway's queues (gateway_withdrawable):
 * it never runs, its DONE never runs, and the caller owns the job again (it
 * may submit it anew). Counted as withdrawn, neither completed nor
 * cancelled. Returns 0, or UV_EBUSY when it is in libuv's hands (running,
 * about to run, or done): then nothing changes. Loop thread; no worker
 * can race it, since only the loop hands jobs to libuv. */
int gateway_withdraw(struct gateway_job *job);

/* Whether short work is waiting that a piece's thread could go to when it
 * ends, the piece CPU-bound (CPU) or a read: sched_short_waiting, or a
 * short job started ahead that no thread has taken yet, or (asked from a
 * job's done callback) one started ahead while that job ran: a thread took
 * it as the job ended, but it waited for one. */
bool gateway_short_waiting(const struct gateway *gw, bool cpu);

struct snapshot;

/* Appends the scheduler's figures ("scheduler": its mode, threads running,
 * jobs waiting, short and bulk starts) and each class's job counters and
 * times ("jobs") to S. */
void gateway_stats(const struct gateway *gw, struct snapshot *s);

/* "open", "read", "gzip", "list". */
const char *gateway_class_name(enum gateway_class cls);

#endif
