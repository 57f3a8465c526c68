/* The control plane the workers share (server/workers/control.h): one anonymous
 * MAP_SHARED region, made before the fork, with a slot per worker
 * (workers_internal.h) that the whole-server figures share too. */
#include "server/workers/control.h"
#include "server/workers/workers_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "server/base/log.h"

/* The region. Under lock: shared, history and each slot's lives. */
struct control {
    size_t size; /* of the mapping */
    uint64_t epoch_ms;
    unsigned nslots;
    pthread_mutex_t lock; /* process-shared, robust */
    struct control_view shared;
    struct history history;      /* the dashboard's: samples and changes */
    _Atomic uint64_t asked;      /* moved by each figures_refresh */
    struct workers_slot slots[]; /* nslots: worker i is slots[i - 1] */
};

static uint64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A worker that died holding the mutex leaves it to the next taker
 * (EOWNERDEAD): the settings are copied whole under it, so at worst one
 * value is half-written, and config_set_live refuses it when applied. */
static void lock(struct control *ctl)
{
    int rc = pthread_mutex_lock(&ctl->lock);
    if (rc == EOWNERDEAD) {
        log_warn("control: a worker died holding the settings lock; taking it over");
        pthread_mutex_consistent(&ctl->lock);
    } else if (rc != 0) {
        abort(); /* ENOTRECOVERABLE cannot happen: we always make it consistent */
    }
}

static void unlock(struct control *ctl)
{
    pthread_mutex_unlock(&ctl->lock);
}

static int init_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc != 0)
        return -rc;
    if ((rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED)) == 0 &&
        (rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST)) == 0)
        rc = pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    return -rc;
}

/* Writes CFG's live settings into V (the region's initial text). */
static void read_live(const struct config *cfg, struct control_view *v)
{
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        if (k->when == CONFIG_LIVE)
            config_get(cfg, k->name, v->value[i], sizeof v->value[i]);
    }
}

struct workers_slot *workers__slot(const struct control *ctl, unsigned index)
{
    if (index < 1 || index > ctl->nslots)
        abort(); /* a worker index is 1..N: a bug */
    return (struct workers_slot *)&ctl->slots[index - 1];
}

struct control *control_create(unsigned nworkers, const struct config *cfg)
{
    size_t size = sizeof(struct control) + nworkers * sizeof(struct workers_slot);
    struct control *ctl =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED) {
        log_error("control region: %s", strerror(errno));
        return NULL;
    }
    /* The mapping is zero-filled: every slot is empty, nothing changed. */
    ctl->size = size;
    ctl->epoch_ms = monotonic_ms();
    ctl->shared.generation = 1;
    read_live(cfg, &ctl->shared);
    int rc = init_lock(&ctl->lock);
    if (rc < 0) {
        log_error("control lock: %s", strerror(-rc));
        goto fail_unmap;
    }
    for (unsigned i = 0; i < nworkers; i++) {
        ctl->slots[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ctl->slots[i].efd < 0) {
            log_error("control eventfd: %s", strerror(errno));
            while (i-- > 0)
                close(ctl->slots[i].efd);
            goto fail_destroy_lock;
        }
        ctl->nslots = i + 1;
    }
    return ctl;

fail_destroy_lock:
    pthread_mutex_destroy(&ctl->lock);
fail_unmap:
    munmap(ctl, size);
    return NULL;
}

void control_free(struct control *ctl)
{
    for (unsigned i = 0; i < ctl->nslots; i++)
        close(ctl->slots[i].efd);
    pthread_mutex_destroy(&ctl->lock);
    munmap(ctl, ctl->size);
}

_Atomic uint64_t *workers__asked(struct control *ctl)
{
    return &ctl->asked;
}

uint64_t control_epoch_ms(const struct control *ctl)
{
    return ctl->epoch_ms;
}

unsigned control_workers(const struct control *ctl)
{
    return ctl->nslots;
}

int control_fd(const struct control *ctl, unsigned index)
{
    return workers__slot(ctl, index)->efd;
}

uint64_t control_join(struct control *ctl, unsigned index, struct control_view *out)
{
    struct workers_slot *s = workers__slot(ctl, index);
    lock(ctl);
    *out = ctl->shared;
    /* What the slot's last worker applied is not this one's. */
    atomic_store(&s->applied, 0);
    uint64_t life = ++s->lives;
    atomic_store(&s->life, life);
    unlock(ctl);
    return life;
}

void control_worker_gone(struct control *ctl, unsigned index)
{
    atomic_store(&workers__slot(ctl, index)->life, 0);
}

uint64_t control_life(const struct control *ctl, unsigned index)
{
    return atomic_load(&workers__slot(ctl, index)->life);
}

void control_read(struct control *ctl, struct control_view *out)
{
    lock(ctl);
    *out = ctl->shared;
    unlock(ctl);
}

/* Whether key K (at index I) is one to publish from NEXT: live, changed
 * from BASE when there is one, and different from the shared value. Its
 * text goes to VALUE. */
static bool to_publish(const struct control *ctl, const struct config_key *k, size_t i,
                       const struct config *next, const struct config *base,
                       char value[CONTROL_VALUE_MAX])
{
    if (k->when != CONFIG_LIVE)
        return false;
    config_get(next, k->name, value, CONTROL_VALUE_MAX);
    if (base != NULL) {
        char was[CONTROL_VALUE_MAX];
        config_get(base, k->name, was, sizeof was);
        if (strcmp(was, value) == 0)
            return false;
    }
    return strcmp(ctl->shared.value[i], value) != 0;
}

bool control_publish(struct control *ctl, const struct config *next, const struct config *base,
                     uint64_t now_ms, struct control_view *out)
{
    bool moved = false;
    const struct config_key *k;
    lock(ctl);
    struct control_view *v = &ctl->shared;
    for (size_t i = 0; (k = config_key_at(next, i)) != NULL; i++) {
        char value[CONTROL_VALUE_MAX];
        if (!to_publish(ctl, k, i, next, base, value))
            continue;
        memcpy(v->value[i], value, sizeof value);
        v->changed[i] = true;
        v->changed_ms[i] = now_ms;
        history_add_marker(&ctl->history, now_ms, k->name, value);
        moved = true;
    }
    if (moved)
        v->generation++;
    *out = *v;
    unlock(ctl);
    return moved;
}

void control_history_sample(struct control *ctl, const struct history_sample *s)
{
    lock(ctl);
    size_t n = history_samples(&ctl->history);
    const struct history_sample *last = n > 0 ? history_sample_at(&ctl->history, n - 1) : NULL;
    if (last == NULL || s->t_ms >= last->t_ms + HISTORY_PERIOD_MS / 2)
        history_add_sample(&ctl->history, s);
    unlock(ctl);
}

void control_history_read(struct control *ctl, struct history *out)
{
    lock(ctl);
    *out = ctl->history;
    unlock(ctl);
}

void control_wake_others(struct control *ctl, unsigned index)
{
    uint64_t one = 1;
    for (unsigned i = 1; i <= ctl->nslots; i++) {
        /* A slot with no worker is woken too: its next worker joins with
         * the news anyway, and finds the eventfd readable once. */
        if (i != index && write(workers__slot(ctl, i)->efd, &one, sizeof one) < 0 &&
            errno != EAGAIN)
            log_warn("control: waking worker %u: %s", i, strerror(errno));
    }
}

void control_drain(struct control *ctl, unsigned index)
{
    uint64_t count;
    if (read(workers__slot(ctl, index)->efd, &count, sizeof count) < 0 && errno != EAGAIN)
        log_warn("control: worker %u's eventfd: %s", index, strerror(errno));
}

void control_applied(struct control *ctl, unsigned index, uint64_t generation)
{
    atomic_store(&workers__slot(ctl, index)->applied, generation);
}

int control_worker_state(const struct control *ctl, unsigned index, uint64_t generation)
{
    struct workers_slot *s = workers__slot(ctl, index);
    if (control_life(ctl, index) == 0)
        return -1;
    return atomic_load(&s->applied) >= generation ? 1 : 0;
}
