/* The whole-server figures' merge (server/workers/figures.c), with three
 * workers' slots in one process: each figure by its rule (totals summed
 * over every worker that ever ran, quantities of now summed or maxed over
 * the running ones, a setting the answering worker's own), the per-worker
 * figures, a worker gone, and one started again in its slot, whose
 * predecessor's totals are carried so that no total goes backwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/config.h"
#include "server/base/snapshot.h"
#include "server/http/clients.h"
#include "server/server.h"
#include "server/workers/control.h"
#include "server/workers/figures.h"
#include "tests/tap.h"

#define WORKERS 3

static const struct snap_def total_def = {.key = "total", .kind = SNAP_COUNTER};
static const struct snap_def now_def = {.key = "now", .kind = SNAP_GAUGE};
static const struct snap_def peak_def = {.key = "peak", .merge = SNAP_MAX};
static const struct snap_def setting_def = {.key = "setting", .merge = SNAP_SAME};
static const struct snap_def own_def = {.key = "own", .merge = SNAP_OWN};

/* One worker's own figures. */
struct worker {
    unsigned index;
    uint64_t total, now, peak, setting, requests;
    struct clients clients;
    struct figures_env env;
    struct figures *figures;
};

static uv_loop_t loop;
static struct control *ctl;
static struct worker workers[WORKERS];

static void own(const void *arg, struct snapshot *s)
{
    const struct worker *w = arg;
    snap_open(s, "group", NULL);
    snap_add(s, &total_def, w->total);
    snap_add(s, &now_def, w->now);
    snap_add(s, &peak_def, w->peak);
    snap_add(s, &setting_def, w->setting);
    snap_add(s, &own_def, w->index);
    snap_close(s);
}

/* Worker INDEX (1..) joins the region with its figures and publishes. */
static void start(unsigned index, uint64_t total, uint64_t now, uint64_t peak, uint64_t setting,
                  uint64_t requests)
{
    struct worker *w = &workers[index - 1];
    *w = (struct worker){.index = index,
                         .total = total,
                         .now = now,
                         .peak = peak,
                         .setting = setting,
                         .requests = requests};
    struct control_view view;
    w->env = (struct figures_env){.loop = &loop,
                                  .control = ctl,
                                  .worker = index,
                                  .life = control_join(ctl, index, &view),
                                  .requests = &w->requests,
                                  .clients = &w->clients,
                                  .own = own,
                                  .arg = w};
    w->figures = figures_attach(&w->env);
    if (w->figures == NULL || figures_start(w->figures) != 0)
        abort();
}

static void stop(unsigned index)
{
    struct worker *w = &workers[index - 1];
    figures_close(w->figures);
    uv_run(&loop, UV_RUN_NOWAIT);
    figures_free(w->figures);
    w->figures = NULL;
}

/* The value of the figure DEF (first found, within object IN if not NULL). */
static long long value(const struct snapshot *s, const struct snap_def *def, const char *in)
{
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type != SNAP_FIGURE || e->def != def)
            continue;
        if (in != NULL && (e->parent == SNAP_TOP || strcmp(s->entry[e->parent].name, in) != 0))
            continue;
        return (long long)e->value;
    }
    return -1;
}

static long long by_worker(const struct snapshot *s, const char *key, const char *worker)
{
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type == SNAP_FIGURE && e->def != NULL && e->def->key != NULL &&
            strcmp(e->def->key, key) == 0 && e->parent != SNAP_TOP &&
            strcmp(s->entry[e->parent].name, worker) == 0)
            return (long long)e->value;
    }
    return -1;
}

/* Worker ANSWER's snapshot, merged with the others'. */
static void merged(unsigned answer, struct snapshot *s)
{
    snap_init(s);
    own(&workers[answer - 1], s);
    figures_merge(workers[answer - 1].figures, s);
}

static void test_merge(void)
{
    start(1, 10, 1, 100, 8, 1000);
    start(2, 20, 2, 300, 9, 2000);
    start(3, 30, 3, 200, 9, 3000);
    struct snapshot s;
    merged(1, &s);
    ok(!s.failed, "worker 1 merges the three");
    is_int(value(&s, &total_def, NULL), 60, "a counter: the sum of every worker's");
    is_int(value(&s, &now_def, NULL), 6, "a gauge: the sum of the running ones'");
    is_int(value(&s, &peak_def, NULL), 300, "SNAP_MAX: the largest");
    is_int(value(&s, &setting_def, NULL), 8, "SNAP_SAME: the answering worker's");
    is_int(value(&s, &own_def, NULL), 1, "SNAP_OWN: the answering worker's");
    is_int(value(&s, NULL, NULL), -1, "(the lookup finds only what exists)");
    long long workers_now = -1;
    for (size_t i = 0; i < s.len; i++)
        if (s.entry[i].type == SNAP_FIGURE && strcmp(s.entry[i].def->key, "workers") == 0)
            workers_now = (long long)s.entry[i].value;
    is_int(workers_now, 3, "three workers run");
    is_int(by_worker(&s, "requests", "2"), 2000, "by_worker: each slot's requests");
    is_int(by_worker(&s, "up", "3"), 1, "  and whether it runs");
    snap_free(&s);

    merged(2, &s);
    ok(value(&s, &total_def, NULL) == 60 && value(&s, &now_def, NULL) == 6 &&
           value(&s, &setting_def, NULL) == 9,
       "worker 2 answers the same totals, and its own setting");
    snap_free(&s);

    /* Worker 1's figures move on: the others see them at its next publish
     * (its merge publishes first, so a later answer shows at least as much). */
    workers[0].total = 15;
    merged(1, &s);
    snap_free(&s);
    merged(3, &s);
    is_int(value(&s, &total_def, NULL), 65,
           "what worker 1 published with its merge, worker 3 sees");
    snap_free(&s);

    /* Worker 2 dies. */
    control_worker_gone(ctl, 2);
    merged(1, &s);
    is_int(value(&s, &total_def, NULL), 65, "a worker gone: its total still counts");
    is_int(value(&s, &now_def, NULL), 4, "  its quantity of now no longer");
    is_int(value(&s, &peak_def, NULL), 200, "  nor its maximum");
    is_int(by_worker(&s, "up", "2"), 0, "  by_worker says it is down");
    is_int(by_worker(&s, "requests", "2"), 2000, "  its requests still count");
    snap_free(&s);
    stop(2);

    /* Started again in its slot, from zero: the predecessor's totals carry. */
    start(2, 1, 5, 50, 9, 7);
    merged(1, &s);
    is_int(value(&s, &total_def, NULL), 15 + 20 + 30 + 1,
           "a worker started again: its predecessor's total carried, none goes back");
    is_int(value(&s, &now_def, NULL), 1 + 5 + 3, "  its own quantity of now counts");
    is_int(by_worker(&s, "requests", "2"), 2000 + 7, "  its slot's requests add up");
    is_int(by_worker(&s, "up", "2"), 1, "  up again");
    snap_free(&s);
    merged(2, &s);
    is_int(value(&s, &total_def, NULL), 66, "  the same when it answers itself");
    snap_free(&s);
}

int main(void)
{
    static const struct config_table *const tables[] = {&server_config_table, NULL};
    static struct config cfg;
    config_defaults(&cfg, tables);
    if (uv_loop_init(&loop) != 0)
        abort();
    ctl = control_create(WORKERS, &cfg);
    if (ctl == NULL)
        abort();
    test_merge();
    for (unsigned i = 1; i <= WORKERS; i++)
        stop(i);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(uv_loop_close(&loop), 0, "every handle closed");
    control_free(ctl);
    return tap_done();
}
