/* Whole-server figures with workers > 1: each worker's publication in its
 * slot of a shared region, and the merge of every slot into the answering
 * worker's snapshot (whole.h). */
#include "server/workers/figures.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"
#include "server/workers/control.h"
#include "server/module.h"
#include "server/server.h"
#include "server/server_internal.h"

/* What one publication holds at most: a snapshot has some 300 figures, 12
 * histograms and 12 windows (2 latency sizes, 5 job classes twice). A
 * snapshot that outgrows them is not published (logged once). */
#define WHOLE_FIGURES 1024
#define WHOLE_HISTS   32
#define WHOLE_WINDOWS 32
#define READ_TRIES    64
/* While refreshes wait, how often they look at the others' publications. */
#define REFRESH_CHECK_MS 1

/* A figure that merges: its key (snap_keys), value, rule, and the index of
 * its histogram or window in the publication (-1: none). */
struct whole_figure {
    uint64_t key, value;
    int16_t hist, window;
    uint8_t rule;
};

struct whole_value {
    uint64_t key, value;
};

struct whole_hist {
    uint64_t key;
    struct hist_total total;
};

/* The totals of the workers that ran in a slot before the one running. */
struct whole_carry {
    uint32_t nvalue, nhist;
    uint64_t requests;
    struct whole_value value[WHOLE_FIGURES];
    struct whole_hist hist[WHOLE_HISTS];
};

/* One worker's figures at PUBLISHED_MS. SEQ is odd while it is written. */
struct whole_pub {
    _Atomic uint64_t seq;
    pid_t pid;      /* 0: never published */
    uint64_t asked; /* the region's ask count read before these figures were taken */
    uint64_t started_ms, published_ms, requests;
    uint32_t nfig, nhist, nwin;
    struct whole_figure fig[WHOLE_FIGURES];
    struct hist_total hist[WHOLE_HISTS];
    struct hist window[WHOLE_WINDOWS];
    struct whole_carry carry;
    struct clients_peer top; /* its top clients */
};

/* Readers copy pub[cur]; the writer fills the other one, then flips CUR. */
struct whole_slot {
    _Atomic unsigned cur;
    struct whole_pub pub[2];
};

struct whole_region {
    size_t size; /* of the mapping */
    unsigned nslots;
    _Atomic uint64_t asked; /* moved by each server_refresh */
    struct whole_slot slot[];
};

/* ---- the region -------------------------------------------------------- */

struct whole_region *whole_create(unsigned workers)
{
    size_t size = sizeof(struct whole_region) + workers * sizeof(struct whole_slot);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        log_error("whole-server figures: mmap: %s (each worker answers for itself)",
                  strerror(errno));
        return NULL;
    }
    struct whole_region *r = p; /* zeroed: no slot published */
    r->size = size;
    r->nslots = workers;
    return r;
}

void whole_destroy(struct whole_region *r)
{
    if (r != NULL)
        munmap(r, r->size);
}

/* Copies LEN bytes at OFFSET of slot I's current publication (and its pid)
 * into the same place of OUT. Returns false if it kept changing under the
 * copy (a writer lapping it READ_TRIES times). */
static bool read_part(const struct whole_region *r, unsigned i, size_t offset, size_t len,
                      struct whole_pub *out)
{
    const struct whole_slot *sl = &r->slot[i];
    for (int t = 0; t < READ_TRIES; t++) {
        const struct whole_pub *p = &sl->pub[atomic_load_explicit(&sl->cur, memory_order_acquire)];
        uint64_t seq = atomic_load_explicit(&p->seq, memory_order_acquire);
        if (seq & 1)
            continue;
        out->pid = p->pid;
        memcpy((char *)out + offset, (const char *)p + offset, len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->seq, memory_order_relaxed) == seq)
            return true;
    }
    return false;
}

/* The whole of slot I's current publication, as read_part. */
static bool read_slot(const struct whole_region *r, unsigned i, struct whole_pub *out)
{
    size_t from = offsetof(struct whole_pub, pid);
    return read_part(r, i, from, sizeof *out - from, out);
}

/* Whether PID runs (or is dead and not yet reaped by the master). */
static bool running(pid_t pid)
{
    return pid != 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

struct clients_peer *whole_peers(const struct server *srv, unsigned *n)
{
    const struct whole *w = srv->whole;
    struct clients_peer *peers = malloc(w->region->nslots * sizeof *peers);
    struct whole_pub *pub = malloc(sizeof *pub);
    *n = 0;
    for (unsigned i = 0; peers != NULL && pub != NULL && i < w->region->nslots; i++) {
        if (i != w->worker - 1 &&
            read_part(w->region, i, offsetof(struct whole_pub, top), sizeof pub->top, pub) &&
            running(pub->pid))
            peers[(*n)++] = pub->top;
    }
    free(pub);
    return peers;
}

/* ---- carrying a predecessor's totals ----------------------------------- */

static void carry_value(struct whole_carry *c, uint64_t key, uint64_t value)
{
    for (uint32_t i = 0; i < c->nvalue; i++) {
        if (c->value[i].key == key) {
            c->value[i].value += value;
            return;
        }
    }
    if (c->nvalue < WHOLE_FIGURES)
        c->value[c->nvalue++] = (struct whole_value){key, value};
}

static void carry_hist(struct whole_carry *c, uint64_t key, const struct hist_total *t)
{
    for (uint32_t i = 0; i < c->nhist; i++) {
        if (c->hist[i].key == key) {
            hist_total_merge(&c->hist[i].total, t);
            return;
        }
    }
    if (c->nhist < WHOLE_HISTS) {
        c->hist[c->nhist].key = key;
        c->hist[c->nhist++].total = *t;
    }
}

/* Into C: the carry of OLD (the slot's last publication) and its totals. */
static void carry_over(struct whole_carry *c, const struct whole_pub *old)
{
    *c = old->carry;
    c->requests += old->requests;
    for (uint32_t i = 0; i < old->nfig; i++) {
        const struct whole_figure *f = &old->fig[i];
        if (f->hist >= 0)
            carry_hist(c, f->key, &old->hist[f->hist]);
        else if (f->rule == SNAP_TOTAL)
            carry_value(c, f->key, f->value);
    }
}

int whole_attach(struct server *srv, struct whole_region *r, unsigned worker)
{
    if (worker < 1 || worker > r->nslots)
        return UV_EINVAL;
    struct whole *w = calloc(1, sizeof *w);
    struct whole_pub *old = malloc(sizeof *old);
    if (w == NULL || old == NULL)
        goto fail_nomem;
    w->carry = calloc(1, sizeof *w->carry);
    if (w->carry == NULL)
        goto fail_nomem;
    /* The predecessor is reaped: nothing writes the slot while it is read. */
    if (read_slot(r, worker - 1, old) && old->pid != 0)
        carry_over(w->carry, old);
    free(old);
    w->region = r;
    w->worker = worker;
    w->started_ms = uv_now(srv->loop);
    srv->whole = w;
    return 0;

fail_nomem:
    if (w != NULL)
        free(w->carry);
    free(w);
    free(old);
    return UV_ENOMEM;
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

static int window_index(struct whole_pub *p, const struct hist **seen, const struct hist *h)
{
    for (uint32_t i = 0; i < p->nwin; i++) {
        if (seen[i] == h)
            return (int)i;
    }
    if (p->nwin == WHOLE_WINDOWS)
        return -1;
    seen[p->nwin] = h;
    p->window[p->nwin] = *h;
    return (int)p->nwin++;
}

/* P's figures from S (KEYS its keys). Returns false if they do not fit. */
static bool fill(struct whole_pub *p, const struct snapshot *s, const uint64_t *keys)
{
    const struct hist *seen[WHOLE_WINDOWS];
    p->nfig = p->nhist = p->nwin = 0;
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type != SNAP_FIGURE)
            continue;
        enum snap_merge rule = rule_of(e);
        if (rule == SNAP_SAME || rule == SNAP_OWN)
            continue;
        if (p->nfig == WHOLE_FIGURES)
            return false;
        struct whole_figure *f = &p->fig[p->nfig++];
        *f = (struct whole_figure){
            .key = keys[i], .value = e->value, .hist = -1, .window = -1, .rule = (uint8_t)rule};
        if (e->window != NULL && (f->window = (int16_t)window_index(p, seen, e->window)) < 0)
            return false;
        if (e->window == NULL && e->def->kind == SNAP_HISTOGRAM) {
            if (p->nhist == WHOLE_HISTS)
                return false;
            p->hist[p->nhist] = *e->hist;
            f->hist = (int16_t)p->nhist++;
        }
    }
    return true;
}

/* Writes S, taken once the ask count was ASKED, into the slot's other
 * publication, then points readers at it. */
static bool publish(struct whole *w, const struct server *srv, const struct snapshot *s,
                    const uint64_t *keys, uint64_t asked)
{
    struct whole_slot *sl = &w->region->slot[w->worker - 1];
    unsigned next = 1 - atomic_load_explicit(&sl->cur, memory_order_relaxed);
    struct whole_pub *p = &sl->pub[next];
    uint64_t seq = atomic_load_explicit(&p->seq, memory_order_relaxed) | 1;
    atomic_store_explicit(&p->seq, seq, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    bool fits = fill(p, s, keys);
    p->pid = getpid();
    p->asked = asked;
    p->started_ms = w->started_ms;
    p->published_ms = uv_now(srv->loop);
    p->requests = srv->requests;
    p->carry = *w->carry;
    clients_peer(&srv->clients, p->published_ms, &p->top);
    atomic_store_explicit(&p->seq, seq + 1, memory_order_release);
    if (fits)
        atomic_store_explicit(&sl->cur, next, memory_order_release);
    return fits;
}

/* publish, or a warning the first time it cannot. */
static void publish_logged(struct whole *w, const struct server *srv, const struct snapshot *s,
                           const uint64_t *keys, uint64_t asked)
{
    if ((keys == NULL || !publish(w, srv, s, keys, asked)) && !w->failed_logged) {
        log_warn("whole-server figures: this worker's could not be published (too many or no "
                 "memory)");
        w->failed_logged = true;
    }
}

static void whole_publish(struct server *srv)
{
    struct whole *w = srv->whole;
    /* Read before the figures are taken: they count all done by then. */
    uint64_t asked = atomic_load_explicit(&w->region->asked, memory_order_acquire);
    struct snapshot s;
    snap_init(&s);
    server__snapshot_own(srv, &s);
    uint64_t *keys = snap_complete(&s) ? malloc(s.len * sizeof *keys + 1) : NULL;
    if (keys != NULL)
        snap_keys(&s, keys);
    publish_logged(w, srv, &s, keys, asked);
    w->answered = asked;
    free(keys);
    snap_free(&s);
}

void server__whole_answer(struct server *srv)
{
    struct whole *w = srv->whole;
    if (atomic_load_explicit(&w->region->asked, memory_order_acquire) != w->answered)
        whole_publish(srv);
}

/* Whether every other running worker has published since ask ASKED. */
static bool answered_everywhere(const struct whole *w, struct whole_pub *pub, uint64_t asked)
{
    for (unsigned i = 0; i < w->region->nslots; i++) {
        if (i == w->worker - 1)
            continue;
        /* One that cannot be read now (a writer lapping the reader) is looked at again. */
        if (!read_part(w->region, i, offsetof(struct whole_pub, asked), sizeof pub->asked, pub))
            return false;
        if (running(pub->pid) && pub->asked < asked)
            return false;
    }
    return true;
}

static void whole_on_wait(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    struct whole *w = srv->whole;
    uint64_t now = uv_now(srv->loop);
    struct whole_pub *pub = malloc(sizeof *pub);
    struct server_refresh **link = &w->refreshes;
    while (*link != NULL) {
        struct server_refresh *r = *link;
        /* Out of memory, nobody can be looked at: the wait runs out. */
        if (now < r->deadline_ms && (pub == NULL || !answered_everywhere(w, pub, r->asked))) {
            link = &r->next;
            continue;
        }
        *link = r->next; /* out of the list before DONE, which may free it */
        r->done(r);
    }
    free(pub);
    if (w->refreshes == NULL)
        uv_timer_stop(timer);
}

bool server_refresh(struct server *srv, struct server_refresh *refresh, server_refresh_fn done)
{
    struct whole *w = srv->whole;
    if (w == NULL || srv->control == NULL || !w->timer_open)
        return false;
    uint64_t asked = atomic_fetch_add_explicit(&w->region->asked, 1, memory_order_acq_rel) + 1;
    control_wake_others(srv->control, srv->worker);
    *refresh = (struct server_refresh){.next = w->refreshes,
                                       .asked = asked,
                                       .deadline_ms = uv_now(srv->loop) + SERVER_REFRESH_WAIT_MS,
                                       .done = done};
    if (w->refreshes == NULL &&
        uv_timer_start(&w->wait, whole_on_wait, REFRESH_CHECK_MS, REFRESH_CHECK_MS) < 0)
        return false; /* only while closing: nobody is left to wait for */
    w->refreshes = refresh;
    return true;
}

static void whole_on_timer(uv_timer_t *timer)
{
    whole_publish(timer->data);
}

int server__whole_start(struct server *srv)
{
    struct whole *w = srv->whole;
    uv_timer_init(srv->loop, &w->timer);
    uv_timer_init(srv->loop, &w->wait);
    srv->open_handles += 2;
    w->timer_open = true;
    w->timer.data = w->wait.data = srv;
    whole_publish(srv);
    return uv_timer_start(&w->timer, whole_on_timer, WHOLE_PUBLISH_MS, WHOLE_PUBLISH_MS);
}

void server__whole_close(struct server *srv)
{
    if (srv->whole != NULL && srv->whole->timer_open) {
        server__close_handle(srv, (uv_handle_t *)&srv->whole->timer);
        server__close_handle(srv, (uv_handle_t *)&srv->whole->wait);
    }
}

void server__whole_free(struct server *srv)
{
    if (srv->whole == NULL)
        return;
    free(srv->whole->carry);
    free(srv->whole);
    srv->whole = NULL;
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
    struct whole_pub *pub;
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
static void merge_figures(struct merge *m, const struct whole_pub *p, bool live)
{
    memset(m->merged, 0, m->nwindow * sizeof *m->merged);
    for (uint32_t i = 0; i < p->nfig; i++) {
        const struct whole_figure *f = &p->fig[i];
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

static void merge_carry(struct merge *m, const struct whole_carry *c)
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
static bool merge_slots(struct merge *m, const struct server *srv, struct slot_seen *seen)
{
    const struct whole *w = srv->whole;
    for (unsigned i = 0; i < w->region->nslots; i++) {
        if (i == w->worker - 1) {
            seen[i] = (struct slot_seen){true, getpid(), w->started_ms,
                                         srv->requests + w->carry->requests};
            merge_carry(m, w->carry);
            continue;
        }
        if (!read_slot(w->region, i, m->pub))
            return false;
        const struct whole_pub *p = m->pub;
        bool live = running(p->pid);
        seen[i] = (struct slot_seen){live, p->pid, p->started_ms, p->requests + p->carry.requests};
        merge_figures(m, p, live);
        merge_carry(m, &p->carry);
    }
    return true;
}

/* Each window figure's value again, from its merged window. */
static void summarize_windows(struct merge *m)
{
    struct hist_summary sum[WHOLE_WINDOWS];
    size_t n = m->nwindow < WHOLE_WINDOWS ? m->nwindow : WHOLE_WINDOWS;
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

void whole_merge(const struct server *srv, struct snapshot *s)
{
    unsigned n = srv->whole->region->nslots;
    struct merge m = {.s = s, .now = uv_now(srv->loop)};
    uint64_t *keys = malloc(s->len * sizeof *keys + 1);
    struct slot_seen *seen = malloc(n * sizeof *seen);
    m.pub = malloc(sizeof *m.pub);
    bool done = false;
    char *names;
    if (keys != NULL && seen != NULL && m.pub != NULL && snap_complete(s)) {
        snap_keys(s, keys);
        /* Published first: a later answer of any worker then shows at
         * least what this one does, so no total goes back between two. */
        publish_logged(srv->whole, srv, s, keys, srv->whole->answered);
        if (index_build(&m.ix, s, keys) && (names = own_copies(&m, n)) != NULL &&
            merge_slots(&m, srv, seen)) {
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
