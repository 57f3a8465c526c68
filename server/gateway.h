#ifndef UNCLOG_GATEWAY_H
#define UNCLOG_GATEWAY_H

#include <stdint.h>
#include <uv.h>

/* The one path to libuv's threadpool. Every job is a uv_queue_work with its
 * class, so the gateway can count, per class, how long jobs waited for a
 * worker and how long they ran; a scheduling policy would live here too. */

/* What a job does, so that each class's numbers mean one thing:
 *   open  resolve, open and fstat one file (and FILE.gz)
 *   read  one piece of a file, for the pump (partition bytes at most)
 *   gzip  deflate one slice (a /gzip body, or read+deflate of a file piece)
 *   list  read a directory and build its HTML listing
 *   fill  read a small file's whole body into the file cache */
enum gateway_class {
    GATEWAY_OPEN,
    GATEWAY_READ,
    GATEWAY_GZIP,
    GATEWAY_LIST,
    GATEWAY_FILL,
    GATEWAY_NCLASSES
};

struct gateway_job;

/* Runs on a worker thread: touches only its own job (no loop, no handles,
 * no logging, no globals). */
typedef void (*gateway_work_fn)(struct gateway_job *job);

/* Runs on the loop thread when the job is done; STATUS is 0 or UV_ECANCELED. */
typedef void (*gateway_done_fn)(struct gateway_job *job, int status);

/* Embed in the object that owns the job; get back with container_of. */
struct gateway_job {
    uv_work_t req;
    enum gateway_class cls;
    uint64_t cost; /* bytes it reads or deflates, as its submitter expects */
    gateway_work_fn work;
    gateway_done_fn done;
    uint64_t submitted_ns, started_ns, finished_ns;
};

/* Counters per class, readable with gateway_stats(). Times in microseconds. */
struct gateway_class_stats {
    uint64_t submitted, completed, cancelled;
    uint64_t cost_total; /* the cost of the jobs completed */
    uint64_t queued_us_total, queued_us_max;
    uint64_t running_us_total, running_us_max;
};

/* Queues JOB of class CLS, expected to read or deflate COST bytes, on LOOP's
 * threadpool. Returns 0, or a negative UV_E* code, in which case DONE never
 * runs and the caller still owns the job. */
int gateway_submit(uv_loop_t *loop, struct gateway_job *job, enum gateway_class cls, uint64_t cost,
                   gateway_work_fn work, gateway_done_fn done);

/* Tries to cancel a queued job; its DONE then runs with UV_ECANCELED.
 * Returns 0, or UV_EBUSY when it is already running or done. */
int gateway_cancel(struct gateway_job *job);

/* The counters of class CLS. */
const struct gateway_class_stats *gateway_stats(enum gateway_class cls);

/* "open", "read", "gzip", "list", "fill". */
const char *gateway_class_name(enum gateway_class cls);

#endif
