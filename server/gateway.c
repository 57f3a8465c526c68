#include "server/gateway.h"

#include "server/util.h"
#include <stddef.h>

/* Stats counters: written only on the loop thread. */
static struct gateway_class_stats stats[GATEWAY_NCLASSES];

static const char *const class_names[GATEWAY_NCLASSES] = {"open", "read", "gzip", "list", "fill"};

static void gateway_on_work(uv_work_t *req)
{
    struct gateway_job *job = container_of(req, struct gateway_job, req);
    job->started_ns = uv_hrtime();
    job->work(job);
    job->finished_ns = uv_hrtime();
}

static void gateway_on_after_work(uv_work_t *req, int status)
{
    struct gateway_job *job = container_of(req, struct gateway_job, req);
    struct gateway_class_stats *s = &stats[job->cls];
    if (status == UV_ECANCELED) {
        s->cancelled++;
    } else {
        uint64_t queued = (job->started_ns - job->submitted_ns) / 1000;
        uint64_t running = (job->finished_ns - job->started_ns) / 1000;
        s->completed++;
        s->cost_total += job->cost;
        s->queued_us_total += queued;
        s->running_us_total += running;
        if (queued > s->queued_us_max)
            s->queued_us_max = queued;
        if (running > s->running_us_max)
            s->running_us_max = running;
    }
    job->done(job, status);
}

int gateway_submit(uv_loop_t *loop, struct gateway_job *job, enum gateway_class cls, uint64_t cost,
                   gateway_work_fn work, gateway_done_fn done)
{
    job->cls = cls;
    job->cost = cost;
    job->work = work;
    job->done = done;
    job->submitted_ns = uv_hrtime();
    job->started_ns = job->finished_ns = job->submitted_ns;
    int rc = uv_queue_work(loop, &job->req, gateway_on_work, gateway_on_after_work);
    if (rc == 0)
        stats[cls].submitted++;
    return rc;
}

int gateway_cancel(struct gateway_job *job)
{
    return uv_cancel((uv_req_t *)&job->req);
}

const struct gateway_class_stats *gateway_stats(enum gateway_class cls)
{
    return &stats[cls];
}

const char *gateway_class_name(enum gateway_class cls)
{
    return class_names[cls];
}
