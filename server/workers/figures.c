/* Whole-server figures with workers > 1: each worker's publication in its
 * slot of the region the workers share, and the merge of every slot into
 * the answering worker's snapshot (figures.h). */
#include "server/workers/figures.h"
#include "server/workers/workers_internal.h"

#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"
#include "server/workers/control.h"

/* How often a reader tries a publication a writer keeps lapping. */
#define READ_TRIES 64
/* While refreshes wait, how often they look at the others' publications. */
#define REFRESH_CHECK_MS 1

/* A worker's own hold on the region. */
struct figures {
    struct figures_env env;
    struct workers_slot *slot;   /* its own */
    uint64_t started_ms;         /* this process's start (uv_now) */
    uv_timer_t timer;            /* publishes every FIGURES_PUBLISH_MS */
    uv_timer_t wait;             /* runs while refreshes wait for the others */
    bool timer_open;             /* figures_start initialised both */
    struct figures_wait *waits;  /* waiting (their callers own them) */
    uint64_t answered;           /* the last ask a publication of ours answered */
    struct figures_carry *carry; /* owned: the predecessors' totals */
    bool failed_logged;
};

/* Copies LEN bytes at OFFSET of slot SL's current publication (and its life
 * and pid) into the same place of OUT. Returns false if it kept changing
 * under the copy (a writer lapping it READ_TRIES times). */
static bool read_part(const struct workers_slot *sl, size_t offset, size_t len,
                      struct figures_pub *out)
{
    for (int t = 0; t < READ_TRIES; t++) {
        const struct figures_pub *p =
            &sl->figures[atomic_load_explicit(&sl->cur, memory_order_acquire)];
        uint64_t seq = atomic_load_explicit(&p->seq, memory_order_acquire);
        if (seq & 1)
            continue;
        out->life = p->life;
        out->pid = p->pid;
        memcpy((char *)out + offset, (const char *)p + offset, len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->seq, memory_order_relaxed) == seq)
            return true;
    }
    return false;
}

/* The whole of slot SL's current publication, as read_part. */
static bool read_slot(const struct workers_slot *sl, struct figures_pub *out)
{
    size_t from = offsetof(struct figures_pub, asked);
    return read_part(sl, from, sizeof *out - from, out);
}

/* Whether the worker that wrote P, read from slot INDEX, runs: the one rule
 * (control_life), so a pid given to another process since cannot fool it. */
static bool running(const struct figures *f, unsigned index, const struct figures_pub *p)
{
    return p->life != 0 && control_life(f->env.control, index) == p->life;
}

/* Slot I (0..N-1) of the region. */
static const struct workers_slot *slot_at(const struct figures *f, unsigned i)
{
    return workers__slot(f->env.control, i + 1);
}

struct clients_peer *figures_peers(const struct figures *f, unsigned *n)
{
    unsigned nslots = control_workers(f->env.control);
    struct clients_peer *peers = malloc(nslots * sizeof *peers);
    struct figures_pub *pub = malloc(sizeof *pub);
    *n = 0;
    for (unsigned i = 0; peers != NULL && pub != NULL && i < nslots; i++) {
        if (i != f->env.worker - 1 &&
            read_part(slot_at(f, i), offsetof(struct figures_pub, top), sizeof pub->top, pub) &&
            running(f, i + 1, pub))
            peers[(*n)++] = pub->top;
    }
    free(pub);
    return peers;
}

/* ---- carrying a predecessor's totals ----------------------------------- */

static void carry_value(struct figures_carry *c, uint64_t key, uint64_t value)
{
    for (uint32_t i = 0; i < c->nvalue; i++) {
        if (c->value[i].key == key) {
            c->value[i].value += value;
            return;
        }
    }
    if (c->nvalue < FIGURES_MAX)
        c->value[c->nvalue++] = (struct figures_value){key, value};
}

static void carry_hist(struct figures_carry *c, uint64_t key, const struct hist_total *t)
{
    for (uint32_t i = 0; i < c->nhist; i++) {
        if (c->hist[i].key == key) {
            hist_total_merge(&c->hist[i].total, t);
            return;
        }
    }
    if (c->nhist < FIGURES_HISTS_MAX) {
        c->hist[c->nhist].key = key;
        c->hist[c->nhist++].total = *t;
    }
}

/* Into C: the carry of OLD (the slot's last publication) and its totals. */
static void carry_over(struct figures_carry *c, const struct figures_pub *old)
{
    *c = old->carry;
    c->requests += old->requests;
    for (uint32_t i = 0; i < old->nfig; i++) {
        const struct figures_figure *f = &old->fig[i];
        if (f->hist >= 0)
            carry_hist(c, f->key, &old->hist[f->hist]);
        else if (f->rule == SNAP_TOTAL)
            carry_value(c, f->key, f->value);
    }
}

struct figures *figures_attach(const struct figures_env *env)
{
    struct figures *f = calloc(1, sizeof *f);
    struct figures_pub *old = malloc(sizeof *old);
    if (f == NULL || old == NULL)
        goto fail_nomem;
    f->carry = calloc(1, sizeof *f->carry);
    if (f->carry == NULL)
        goto fail_nomem;
    f->env = *env;
    f->slot = workers__slot(env->control, env->worker);
    /* The predecessor is reaped: nothing writes the slot while it is read. */
    if (read_slot(f->slot, old) && old->life != 0)
        carry_over(f->carry, old);
    free(old);
    f->started_ms = uv_now(env->loop);
    return f;

fail_nomem:
    if (f != NULL)
        free(f->carry);
    free(f);
    free(old);
    return NULL;
}

/* ---- publishing -------------------------------------------------------- */

/* How figure E of a snapshot merges; SNAP_SAME and SNAP_OWN do not. A
 * recent window is of the running workers, a histogram a total. */
static enum snap_merge rule_of(const struct snap_entry *e)
{
    if (e->window != NULL)
        return SNAP_SUM;
    if (e->def->kind == SNAP_HISTOGRAM)
        return SNAP_TOTAL;
    return snap_merge_of(e->def);
}

static int window_index(struct figures_pub *p, const struct hist **seen, const struct hist *h)
{
    for (uint32_t i = 0; i < p->nwin; i++) {
        if (seen[i] == h)
            return (int)i;
    }
    if (p->nwin == FIGURES_WINDOW_MAX)
        return -1;
    seen[p->nwin] = h;
    p->window[p->nwin] = *h;
    return (int)p->nwin++;
}

/* P's figures from S (KEYS its keys). Returns false if they do not fit. */
static bool fill(struct figures_pub *p, const struct snapshot *s, const uint64_t *keys)
{
    const struct hist *seen[FIGURES_WINDOW_MAX];
    p->nfig = p->nhist = p->nwin = 0;
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type != SNAP_FIGURE)
            continue;
        enum snap_merge rule = rule_of(e);
        if (rule == SNAP_SAME || rule == SNAP_OWN)
            continue;
        if (p->nfig == FIGURES_MAX)
            return false;
        struct figures_figure *f = &p->fig[p->nfig++];
        *f = (struct figures_figure){
            .key = keys[i], .value = e->value, .hist = -1, .window = -1, .rule = (uint8_t)rule};
        if (e->window != NULL && (f->window = (int16_t)window_index(p, seen, e->window)) < 0)
            return false;
        if (e->window == NULL && e->def->kind == SNAP_HISTOGRAM) {
            if (p->nhist == FIGURES_HISTS_MAX)
                return false;
            p->hist[p->nhist] = *e->hist;
            f->hist = (int16_t)p->nhist++;
        }
    }
    return true;
}

/* Writes S, taken once the ask count was ASKED, into the slot's other
 * publication, then points readers at it. */
static bool publish(struct figures *f, const struct snapshot *s, const uint64_t *keys,
                    uint64_t asked)
{
    struct workers_slot *sl = f->slot;
    unsigned next = 1 - atomic_load_explicit(&sl->cur, memory_order_relaxed);
    struct figures_pub *p = &sl->figures[next];
    uint64_t seq = atomic_load_explicit(&p->seq, memory_order_relaxed) | 1;
    atomic_store_explicit(&p->seq, seq, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    bool fits = fill(p, s, keys);
    p->life = f->env.life;
    p->pid = getpid();
    p->asked = asked;
    p->started_ms = f->started_ms;
    p->published_ms = uv_now(f->env.loop);
    p->requests = *f->env.requests;
    p->carry = *f->carry;
    clients_peer(f->env.clients, p->published_ms, &p->top);
    atomic_store_explicit(&p->seq, seq + 1, memory_order_release);
    if (fits)
        atomic_store_explicit(&sl->cur, next, memory_order_release);
    return fits;
}

/* publish, or a warning the first time it cannot. */
static void publish_logged(struct figures *f, const struct snapshot *s, const uint64_t *keys,
                           uint64_t asked)
{
    if ((keys == NULL || !publish(f, s, keys, asked)) && !f->failed_logged) {
        log_warn("whole-server figures: this worker's could not be published (too many or no "
                 "memory)");
        f->failed_logged = true;
    }
}

static void publish_own(struct figures *f)
{
    /* Read before the figures are taken: they count all done by then. */
    uint64_t asked = atomic_load_explicit(workers__asked(f->env.control), memory_order_acquire);
    struct snapshot s;
    snap_init(&s);
    f->env.own(f->env.arg, &s);
    uint64_t *keys = snap_complete(&s) ? malloc(s.len * sizeof *keys + 1) : NULL;
    if (keys != NULL)
        snap_keys(&s, keys);
    publish_logged(f, &s, keys, asked);
    f->answered = asked;
    free(keys);
    snap_free(&s);
}

void figures_answer(struct figures *f)
{
    if (atomic_load_explicit(workers__asked(f->env.control), memory_order_acquire) != f->answered)
        publish_own(f);
}

/* Whether every other running worker has published since ask ASKED. */
static bool answered_everywhere(const struct figures *f, struct figures_pub *pub, uint64_t asked)
{
    for (unsigned i = 0; i < control_workers(f->env.control); i++) {
        if (i == f->env.worker - 1)
            continue;
        /* One that cannot be read now (a writer lapping the reader) is looked at again. */
        if (!read_part(slot_at(f, i), offsetof(struct figures_pub, asked), sizeof pub->asked, pub))
            return false;
        if (running(f, i + 1, pub) && pub->asked < asked)
            return false;
    }
    return true;
}

static void on_wait(uv_timer_t *timer)
{
    struct figures *f = timer->data;
    uint64_t now = uv_now(f->env.loop);
    struct figures_pub *pub = malloc(sizeof *pub);
    struct figures_wait **link = &f->waits;
    while (*link != NULL) {
        struct figures_wait *w = *link;
        /* Out of memory, nobody can be looked at: the wait runs out. */
        if (now < w->deadline_ms && (pub == NULL || !answered_everywhere(f, pub, w->asked))) {
            link = &w->next;
            continue;
        }
        *link = w->next; /* out of the list before DONE, which may free it */
        w->done(w);
    }
    free(pub);
    if (f->waits == NULL)
        uv_timer_stop(timer);
}

bool figures_refresh(struct figures *f, struct figures_wait *wait, figures_wait_fn done,
                     uint64_t deadline_ms)
{
    if (!f->timer_open)
        return false;
    uint64_t asked =
        atomic_fetch_add_explicit(workers__asked(f->env.control), 1, memory_order_acq_rel) + 1;
    control_wake_others(f->env.control, f->env.worker);
    *wait = (struct figures_wait){
        .next = f->waits, .asked = asked, .deadline_ms = deadline_ms, .done = done};
    if (f->waits == NULL &&
        uv_timer_start(&f->wait, on_wait, REFRESH_CHECK_MS, REFRESH_CHECK_MS) < 0)
        return false; /* only while closing: nobody is left to wait for */
    f->waits = wait;
    return true;
}

static void on_timer(uv_timer_t *timer)
{
    publish_own(timer->data);
}

int figures_start(struct figures *f)
{
    uv_timer_init(f->env.loop, &f->timer);
    uv_timer_init(f->env.loop, &f->wait);
    f->timer_open = true;
    f->timer.data = f->wait.data = f;
    publish_own(f);
    return uv_timer_start(&f->timer, on_timer, FIGURES_PUBLISH_MS, FIGURES_PUBLISH_MS);
}

void figures_close(struct figures *f)
{
    if (f == NULL || !f->timer_open)
        return;
    handle_close((uv_handle_t *)&f->timer);
    handle_close((uv_handle_t *)&f->wait);
}

void figures_free(struct figures *f)
{
    if (f == NULL)
        return;
    free(f->carry);
    free(f);
}

/* ---- merging ----------------------------------------------------------- */

/* The figures of a snapshot by key: open addressing over a power of two. */
struct index {
    uint64_t *key;
    size_t *entry;
    size_t mask;
};

static bool index_build(struct index *ix, const struct snapshot *s, const uint64_t *keys)
{
    size_t n = 64;
    while (n < 2 * s->len)
        n *= 2;
    ix->key = calloc(n, sizeof *ix->key);
    ix->entry = malloc(n * sizeof *ix->entry);
    ix->mask = n - 1;
    if (ix->key == NULL || ix->entry == NULL)
        return false;
    for (size_t i = 0; i < s->len; i++) {
        if (s->entry[i].type != SNAP_FIGURE)
            continue;
        uint64_t key = keys[i] | 1; /* 0 marks an empty place */
        size_t h = (size_t)key & ix->mask;
        while (ix->key[h] != 0)
            h = (h + 1) & ix->mask;
        ix->key[h] = key;
        ix->entry[h] = i;
    }
    return true;
}

/* The entry of KEY, or SIZE_MAX. */
static size_t index_find(const struct index *ix, uint64_t key)
{
    key |= 1;
    for (size_t h = (size_t)key & ix->mask; ix->key[h] != 0; h = (h + 1) & ix->mask) {
        if (ix->key[h] == key)
            return ix->entry[h];
    }
    return SIZE_MAX;
}

/* What a merge works on: the index, S's histograms and windows copied into
 * storage S owns (so they can be added to), and a slot's publication. */
struct merge {
    struct snapshot *s;
    struct index ix;
    struct figures_pub *pub;
    struct hist **window; /* the distinct windows, S's own copies */
    size_t nwindow;
    bool *merged; /* per window: merged from the slot being read */
    uint64_t now;
};

/* The index of window H among M's copies, copied now if it is new. ORIG
 * holds the originals of the copies made so far. */
static size_t own_window(struct merge *m, const struct hist **orig, struct hist *copies,
                         const struct hist *h)
{
    size_t k = 0;
    while (k < m->nwindow && orig[k] != h)
        k++;
    if (k == m->nwindow) {
        orig[k] = h;
        copies[k] = *h;
        m->window[m->nwindow++] = &copies[k];
    }
    return k;
}

/* Points every histogram and window of S at a copy S owns (s->merged),
 * with room after them for NAMES names of SNAP_TEXT_MAX, which it returns
 * (NULL: no memory). */
static char *own_copies(struct merge *m, unsigned names)
{
    struct snapshot *s = m->s;
    size_t nh = 0, nw = 0;
    for (size_t i = 0; i < s->len; i++) {
        nh += s->entry[i].type == SNAP_FIGURE && s->entry[i].hist != NULL;
        nw += s->entry[i].window != NULL;
    }
    size_t size = nh * sizeof(struct hist_total) + nw * sizeof(struct hist) +
                  nw * (sizeof(struct hist *) + sizeof(bool)) + (size_t)names * SNAP_TEXT_MAX;
    char *block = malloc(size);
    const struct hist **orig = malloc(nw * sizeof *orig + 1);
    if (block == NULL || orig == NULL) {
        free(block);
        free(orig);
        return NULL;
    }
    s->merged = block;
    struct hist_total *totals = (struct hist_total *)block;
    struct hist *windows = (struct hist *)(totals + nh);
    m->window = (struct hist **)(windows + nw);
    m->merged = (bool *)(m->window + nw);
    m->nwindow = 0;
    for (size_t i = 0; i < s->len; i++) {
        struct snap_entry *e = &s->entry[i];
        if (e->type == SNAP_FIGURE && e->hist != NULL) {
            *totals = *e->hist;
            e->hist = totals++;
        }
        if (e->window != NULL)
            e->window = m->window[own_window(m, orig, windows, e->window)];
    }
    free(orig);
    return (char *)(m->merged + nw);
}

/* Adds the figures of publication P (a running worker's if LIVE). */
static void merge_figures(struct merge *m, const struct figures_pub *p, bool live)
{
    memset(m->merged, 0, m->nwindow * sizeof *m->merged);
    for (uint32_t i = 0; i < p->nfig; i++) {
        const struct figures_figure *f = &p->fig[i];
        size_t at = index_find(&m->ix, f->key);
        if (at == SIZE_MAX)
            continue; /* not in the answering worker's (a route of another build) */
        struct snap_entry *e = &m->s->entry[at];
        if (e->window != NULL && f->window >= 0 && live) {
            size_t k = 0;
            while (m->window[k] != e->window)
                k++;
            if (!m->merged[k])
                hist_merge(m->window[k], &p->window[f->window], m->now);
            m->merged[k] = true;
        } else if (e->hist != NULL && f->hist >= 0) {
            hist_total_merge((struct hist_total *)e->hist, &p->hist[f->hist]);
        } else if (f->rule == SNAP_TOTAL || (f->rule == SNAP_SUM && live)) {
            e->value += f->value;
        } else if (f->rule == SNAP_MAX && live && f->value > e->value) {
            e->value = f->value;
        }
    }
}

static void merge_carry(struct merge *m, const struct figures_carry *c)
{
    for (uint32_t i = 0; i < c->nvalue; i++) {
        size_t at = index_find(&m->ix, c->value[i].key);
        if (at != SIZE_MAX && m->s->entry[at].hist == NULL && m->s->entry[at].window == NULL)
            m->s->entry[at].value += c->value[i].value;
    }
    for (uint32_t i = 0; i < c->nhist; i++) {
        size_t at = index_find(&m->ix, c->hist[i].key);
        if (at != SIZE_MAX && m->s->entry[at].hist != NULL)
            hist_total_merge((struct hist_total *)m->s->entry[at].hist, &c->hist[i].total);
    }
}

static const struct snap_def workers_def = {
    .key = "workers",
    .metric = "unclog_workers",
    .help = "Worker processes running now; the other figures are theirs together.",
    .merge = SNAP_OWN};
static const struct snap_def worker_up_def = {
    .key = "up",
    .metric = "unclog_worker_up",
    .kind = SNAP_FLAG,
    .help = "Whether the worker of this slot runs now (else the master forks it again).",
    .merge = SNAP_OWN};
/* /stats' alone, as the top-level pid. */
static const struct snap_def worker_pid_def = {.key = "pid", .merge = SNAP_OWN, .private = true};
static const struct snap_def worker_uptime_def = {
    .key = "uptime_ms",
    .metric = "unclog_worker_uptime_seconds",
    .unit = SNAP_MS,
    .help = "Time since the worker of this slot started (0 while it is not running).",
    .merge = SNAP_OWN};
static const struct snap_def worker_requests_def = {
    .key = "requests",
    .metric = "unclog_worker_requests_total",
    .kind = SNAP_COUNTER,
    .help = "Requests answered by the workers of this slot, those before a restart included.",
    .merge = SNAP_OWN};

/* A slot as read for the per-worker figures. */
struct slot_seen {
    bool live;
    pid_t pid;
    uint64_t started_ms, requests;
};

static void per_worker(struct merge *m, const struct slot_seen *seen, unsigned n, char *names)
{
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++)
        live += seen[i].live;
    snap_add(m->s, &workers_def, live);
    snap_open(m->s, "by_worker", NULL);
    for (unsigned i = 0; i < n; i++) {
        char *name = names + (size_t)i * SNAP_TEXT_MAX;
        snprintf(name, SNAP_TEXT_MAX, "%u", i + 1);
        snap_open(m->s, name, "worker");
        snap_add(m->s, &worker_up_def, seen[i].live);
        snap_add(m->s, &worker_pid_def, seen[i].live ? (uint64_t)seen[i].pid : 0);
        snap_add(m->s, &worker_uptime_def, seen[i].live ? m->now - seen[i].started_ms : 0);
        snap_add(m->s, &worker_requests_def, seen[i].requests);
        snap_close(m->s);
    }
    snap_close(m->s);
}

/* Reads every slot but the answering worker's (whose figures S has fresh)
 * into M; each one's carried totals, the answering one's included. */
static bool merge_slots(struct merge *m, const struct figures *f, struct slot_seen *seen)
{
    for (unsigned i = 0; i < control_workers(f->env.control); i++) {
        if (i == f->env.worker - 1) {
            seen[i] = (struct slot_seen){true, getpid(), f->started_ms,
                                         *f->env.requests + f->carry->requests};
            merge_carry(m, f->carry);
            continue;
        }
        if (!read_slot(slot_at(f, i), m->pub))
            return false;
        const struct figures_pub *p = m->pub;
        bool live = running(f, i + 1, p);
        seen[i] = (struct slot_seen){live, p->pid, p->started_ms, p->requests + p->carry.requests};
        merge_figures(m, p, live);
        merge_carry(m, &p->carry);
    }
    return true;
}

/* Each window figure's value again, from its merged window. */
static void summarize_windows(struct merge *m)
{
    struct hist_summary sum[FIGURES_WINDOW_MAX];
    size_t n = m->nwindow < FIGURES_WINDOW_MAX ? m->nwindow : FIGURES_WINDOW_MAX;
    for (size_t k = 0; k < n; k++)
        hist_summary(m->window[k], m->now, &sum[k]);
    for (size_t i = 0; i < m->s->len; i++) {
        struct snap_entry *e = &m->s->entry[i];
        size_t k = 0;
        while (e->window != NULL && k < n && m->window[k] != e->window)
            k++;
        if (e->window != NULL && k < n)
            e->value = snap_stat(&sum[k], e->stat);
    }
}

void figures_merge(struct figures *f, struct snapshot *s)
{
    unsigned n = control_workers(f->env.control);
    struct merge m = {.s = s, .now = uv_now(f->env.loop)};
    uint64_t *keys = malloc(s->len * sizeof *keys + 1);
    struct slot_seen *seen = malloc(n * sizeof *seen);
    m.pub = malloc(sizeof *m.pub);
    bool done = false;
    char *names;
    if (keys != NULL && seen != NULL && m.pub != NULL && snap_complete(s)) {
        snap_keys(s, keys);
        /* Published first: a later answer of any worker then shows at
         * least what this one does, so no total goes back between two. */
        publish_logged(f, s, keys, f->answered);
        if (index_build(&m.ix, s, keys) && (names = own_copies(&m, n)) != NULL &&
            merge_slots(&m, f, seen)) {
            summarize_windows(&m);
            per_worker(&m, seen, n, names);
            done = true;
        }
    }
    free(m.ix.key);
    free(m.ix.entry);
    free(m.pub);
    free(seen);
    free(keys);
    if (!done)
        s->failed = true;
}
