#ifndef UNCLOG_WORKERS_INTERNAL_H
#define UNCLOG_WORKERS_INTERNAL_H

/* The one region the workers share, as its two readers see it: control.c
 * (makes it, the live settings, the slots' lives) and figures.c (each
 * slot's figures). Nothing outside server/workers/ includes this file; the
 * workers__ prefix marks what nothing else calls.
 *
 * One slot type: a worker's life (who runs in it), the generation of the
 * settings it applied, its eventfd, and its published figures. One rule
 * says whether a worker runs: its slot's life is not 0 (control_life). A
 * worker takes a new life, never used before in its slot, when it joins;
 * the master sets it to 0 when it reaps the worker. A publication names
 * the life of the worker that wrote it, so a reader tells a running
 * worker's figures from a dead one's without asking the kernel about a
 * pid that may have been given to another process since. */

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/base/loghist.h"
#include "server/http/clients.h"

/* What one publication holds at most: a snapshot has some 300 figures, 12
 * histograms and 12 windows (2 latency sizes, 5 job classes twice). A
 * snapshot that outgrows them is not published (logged once). */
#define FIGURES_MAX        1024
#define FIGURES_HISTS_MAX  32
#define FIGURES_WINDOW_MAX 32

/* A figure that merges: its key (snap_keys), value, rule, and the index of
 * its histogram or window in the publication (-1: none). */
struct figures_figure {
    uint64_t key, value;
    int16_t hist, window;
    uint8_t rule;
};

struct figures_value {
    uint64_t key, value;
};

struct figures_hist {
    uint64_t key;
    struct hist_total total;
};

/* The totals of the workers that ran in a slot before the one running. */
struct figures_carry {
    uint32_t nvalue, nhist;
    uint64_t requests;
    struct figures_value value[FIGURES_MAX];
    struct figures_hist hist[FIGURES_HISTS_MAX];
};

/* One worker's figures at PUBLISHED_MS. SEQ is odd while it is written. */
struct figures_pub {
    _Atomic uint64_t seq;
    uint64_t life;  /* of the worker that wrote it; 0: never published */
    pid_t pid;      /* that worker's, for the per-worker figures */
    uint64_t asked; /* the region's ask count read before these figures were taken */
    uint64_t started_ms, published_ms, requests;
    uint32_t nfig, nhist, nwin;
    struct figures_figure fig[FIGURES_MAX];
    struct hist_total hist[FIGURES_HISTS_MAX];
    struct hist window[FIGURES_WINDOW_MAX];
    struct figures_carry carry;
    struct clients_peer top; /* its top clients */
};

/* One worker slot. Its worker writes applied and its figures; the life is
 * written by the joining worker and by the master at the reap. */
struct workers_slot {
    _Atomic uint64_t life;    /* the running worker's; 0: none runs */
    uint64_t lives;           /* lives given in this slot, under the lock */
    _Atomic uint64_t applied; /* the generation its worker has applied */
    int efd;                  /* eventfd, made before the fork; never changes */
    /* Readers copy figures[cur]; the writer fills the other, then flips CUR. */
    _Atomic unsigned cur;
    struct figures_pub figures[2];
};

/* control.c: worker INDEX's slot (1..N; anything else is a bug and aborts). */
struct control;
struct workers_slot *workers__slot(const struct control *ctl, unsigned index);

/* control.c: the region's ask count, moved by each figures_refresh. */
_Atomic uint64_t *workers__asked(struct control *ctl);

#endif
