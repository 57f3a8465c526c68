#ifndef UNCLOG_SNAPSHOT_H
#define UNCLOG_SNAPSHOT_H

/* A snapshot of the server's figures: gathered once, then rendered by each
 * output (/stats as JSON, /metrics as Prometheus text). Each component
 * appends what it knows (gateway_stats, budget_stats, the server's own,
 * each module's stats hook); a renderer walks the list and knows no
 * component. So a figure added once shows in both outputs.
 *
 * The list is a tree of objects as /stats nests them ("jobs", then "open"
 * in it) with figures as leaves. An object may also label what it holds:
 * "open" under "jobs" is the label class="open" on the /metrics series of
 * every figure in it. A figure's definition (static, shared by every
 * value) says what each output calls it; one without a /stats name or
 * without a /metrics family is left out there, on purpose.
 *
 * A snapshot borrows the names, labels and histograms it is given: fill
 * and render it in one callback of the loop, before any of them changes.
 * Pure: no libuv, no clock. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/loghist.h"

enum snap_kind {
    SNAP_GAUGE,     /* a value now */
    SNAP_COUNTER,   /* a count since the start: its family ends in _total */
    SNAP_FLAG,      /* a gauge of 0 or 1: false or true in /stats */
    SNAP_HISTOGRAM, /* a struct hist_total of microseconds: /stats shows its sum */
    SNAP_INFO,      /* a text: /stats shows it, /metrics a sample of 1 labelled with it */
};

/* What a value is counted in. /stats shows it as it is; /metrics in base
 * units (seconds, ratios), exactly (no float in between). */
enum snap_unit {
    SNAP_PLAIN,    /* a count, or bytes */
    SNAP_US,       /* microseconds */
    SNAP_MS,       /* milliseconds */
    SNAP_PERMILLE, /* thousandths of one */
};

/* How one figure of every worker makes the whole server's (server/workers/figures.c,
 * workers > 1). The answering worker's figure is the base; the others'
 * are added to it by this rule. */
enum snap_merge {
    SNAP_BY_KIND, /* a counter or histogram: TOTAL; a gauge: SUM; a flag: MAX; info: SAME */
    SNAP_TOTAL,   /* a count since the start, summed over every worker that ever ran */
    SNAP_SUM,     /* a quantity now, summed over the workers running now */
    SNAP_MAX,     /* the largest of the workers running now */
    SNAP_SAME,    /* the same in every worker (a setting): the answering worker's */
    SNAP_OWN,     /* the answering worker's own (who answered): not merged */
};

/* A figure of a recent window (struct hist): which summary of it. Such a
 * figure is merged from the workers' windows, bucket by bucket. */
enum snap_stat { SNAP_STAT_COUNT, SNAP_STAT_P50, SNAP_STAT_P99, SNAP_STAT_MAX };

/* What a figure is, in static storage. */
struct snap_def {
    const char *key;    /* its member in /stats (unless added with a name); NULL: none */
    const char *metric; /* its family in /metrics; NULL: not in /metrics */
    enum snap_kind kind;
    enum snap_unit unit;
    const char *labels;     /* fixed labels of its series (kind="short"), or NULL */
    const char *name_label; /* the label a figure added with a NAME carries it in */
    const char *text_label; /* SNAP_INFO: the label that carries the text */
    const char *help;       /* /metrics' HELP: what it counts, in a sentence */
    enum snap_merge merge;  /* how the workers' figures make one */
    /* It names a process or a client (a pid, an address): shown only to
     * viewers allowed every detail (handlers/observe/stats.h). */
    bool private;
};

#define SNAP_TOP      SIZE_MAX /* the parent of what is not in an object */
#define SNAP_DEPTH    8        /* objects in objects, at most */
#define SNAP_TEXT_MAX 48

enum snap_type { SNAP_OPEN, SNAP_CLOSE, SNAP_FIGURE };

struct snap_entry {
    enum snap_type type;
    size_t parent;                 /* the object it is in (an index), or SNAP_TOP */
    const char *name;              /* /stats' member; NULL: not in /stats (no CLOSE has one) */
    const char *label;             /* SNAP_OPEN: the label NAME is the value of, or NULL */
    const struct snap_def *def;    /* SNAP_FIGURE */
    uint64_t value;                /* gauge, counter, flag */
    const struct hist_total *hist; /* SNAP_HISTOGRAM */
    const struct hist *window;     /* a figure of a recent window, or NULL */
    enum snap_stat stat;           /* WINDOW's summary that VALUE is */
    /* SNAP_INFO: its text. A gauge: what /stats shows instead of VALUE
     * when not empty (a size setting that is "whole"). */
    char text[SNAP_TEXT_MAX];
};

/* Owns ENTRY. FAILED sticks once an append could not allocate, a text did
 * not fit, or the objects did not nest: render nothing then. */
struct snapshot {
    struct snap_entry *entry;
    size_t len, cap;
    size_t open; /* the innermost object still open, or SNAP_TOP */
    unsigned depth;
    bool failed;
    void *merged; /* owned: what a merge points entries at (server/workers/figures.c), or NULL */
};

/* An empty snapshot: nothing allocated yet. */
void snap_init(struct snapshot *s);

/* Frees the entries (what they borrow is their owners'). */
void snap_free(struct snapshot *s);

/* Opens the object NAME: what is added until snap_close is in it. With a
 * LABEL (class), NAME (open) is that label's value on every /metrics series
 * in it; without, the object only groups members of /stats. */
void snap_open(struct snapshot *s, const char *name, const char *label);

void snap_close(struct snapshot *s);

/* Adds a gauge, counter or flag of DEF. */
void snap_add(struct snapshot *s, const struct snap_def *def, uint64_t value);

/* The same, named NAME: its member in /stats, and the value of the label
 * def->name_label in /metrics (the status class "2xx"). */
void snap_add_named(struct snapshot *s, const struct snap_def *def, const char *name,
                    uint64_t value);

/* A size setting: its bytes, or 0 for CONFIG_WHOLE and CONFIG_AUTO_SIZE,
 * so that a figure has one type (the word is in the live settings). */
void snap_add_size(struct snapshot *s, const struct snap_def *def, size_t size);

/* Adds the settings TABLE shows as figures (its figures), each with the
 * value CFG holds for the key it names, read through the key's row: a size
 * as snap_add_size, a number or switch as snap_add, any other key as the
 * text the config file would write. */
struct config;
struct config_table;
void snap_add_settings(struct snapshot *s, const struct config *cfg,
                       const struct config_table *table);

/* Adds TEXT (copied) of the info DEF, named NAME if def->name_label is set
 * (else NAME is NULL). */
void snap_add_text(struct snapshot *s, const struct snap_def *def, const char *name,
                   const char *text);

/* Adds the histogram T (borrowed) of DEF. */
void snap_add_hist(struct snapshot *s, const struct snap_def *def, const struct hist_total *t);

/* Adds STAT of the recent window H (borrowed), whose summary now is SUM, as
 * DEF. */
void snap_add_window(struct snapshot *s, const struct snap_def *def, const struct hist *h,
                     const struct hist_summary *sum, enum snap_stat stat);

/* STAT of the summary SUM. */
uint64_t snap_stat(const struct hist_summary *sum, enum snap_stat stat);

/* DEF's merge rule, SNAP_BY_KIND resolved. */
enum snap_merge snap_merge_of(const struct snap_def *def);

/* Fills KEYS (S->len of them) with each entry's key: a hash of its path
 * (its objects' names and labels, its own name and definition), the same
 * for the same figure in every worker of one binary. */
void snap_keys(const struct snapshot *s, uint64_t *keys);

/* Whether S can be rendered: nothing failed and every object is closed. */
bool snap_complete(const struct snapshot *s);

#endif
