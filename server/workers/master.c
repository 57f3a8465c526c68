#include "server/workers/master.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/base/log.h"

/* A worker that dies is forked again after a pause that starts here and
 * doubles with each death, up to the maximum; a worker that lived
 * HEALTHY_MS was fine, and its slot starts over from the minimum. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_MS     10000

struct worker {
    pid_t pid; /* 0: not running */
    uint64_t started_ms;
    uint64_t restart_ms; /* when pid is 0: when to fork it again */
    unsigned backoff_ms;
};

struct master {
    struct worker *workers; /* owned */
    unsigned nworkers, live;
    bool stopping, failed;
    struct master_hooks hooks;
    pid_t pid;
    sigset_t signals, old_mask;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void spawn(struct master *m, unsigned i)
{
    struct worker *w = &m->workers[i];
    pid_t pid = fork();
    if (pid < 0) {
        log_error("fork worker %u: %s", i + 1, strerror(errno));
        w->backoff_ms = BACKOFF_MAX_MS;
        w->restart_ms = now_ms() + w->backoff_ms;
        return;
    }
    if (pid == 0) {
        /* Signals reach the workers through the master only (a terminal's
         * Ctrl-C would otherwise arrive twice, and a second signal means
         * "close every connection now"); and no worker outlives it. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != m->pid)
            _exit(1);
        char name[32];
        snprintf(name, sizeof name, "worker %u", i + 1);
        log_set_name(name);
        exit(m->hooks.run(i + 1, m->hooks.arg));
    }
    w->pid = pid;
    w->started_ms = now_ms();
    m->live++;
}

static void forward(struct master *m, int signum)
{
    for (unsigned i = 0; i < m->nworkers; i++) {
        if (m->workers[i].pid > 0)
            kill(m->workers[i].pid, signum);
    }
}

static void describe(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "ended (status %#x)", (unsigned)status);
}

/* Collects every worker that has ended; outside a stop, schedules it again. */
static void reap(struct master *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct worker *w = NULL;
        for (unsigned i = 0; i < m->nworkers && w == NULL; i++)
            w = m->workers[i].pid == pid ? &m->workers[i] : NULL;
        if (w == NULL)
            continue;
        w->pid = 0;
        m->live--;
        if (m->hooks.gone != NULL)
            m->hooks.gone((unsigned)(w - m->workers) + 1, m->hooks.arg);
        char how[64];
        describe(status, how, sizeof how);
        if (m->stopping) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                m->failed = true;
                log_warn("worker %u (pid %ld) %s", (unsigned)(w - m->workers) + 1, (long)pid, how);
            }
            continue;
        }
        uint64_t now = now_ms();
        if (now - w->started_ms >= HEALTHY_MS)
            w->backoff_ms = 0;
        w->backoff_ms = w->backoff_ms == 0 ? BACKOFF_MIN_MS : w->backoff_ms * 2;
        if (w->backoff_ms > BACKOFF_MAX_MS)
            w->backoff_ms = BACKOFF_MAX_MS;
        w->restart_ms = now + w->backoff_ms;
        log_warn("worker %u (pid %ld) %s; starting it again in %u ms",
                 (unsigned)(w - m->workers) + 1, (long)pid, how, w->backoff_ms);
    }
}

/* Forks the workers whose restart is due; returns how long until the next
 * one is, in ms (or an hour when none waits). */
static uint64_t restart_due(struct master *m)
{
    uint64_t wait = 3600 * 1000, now = now_ms();
    for (unsigned i = 0; i < m->nworkers && !m->stopping; i++) {
        struct worker *w = &m->workers[i];
        if (w->pid != 0)
            continue;
        if (w->restart_ms <= now)
            spawn(m, i);
        else if (w->restart_ms - now < wait)
            wait = w->restart_ms - now;
    }
    return wait;
}

void master_worker_ready(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int master_run(unsigned nworkers, const struct master_hooks *hooks)
{
    struct master m = {.nworkers = nworkers, .hooks = *hooks, .pid = getpid()};
    m.workers = calloc(nworkers, sizeof *m.workers);
    if (m.workers == NULL) {
        log_error("workers: out of memory");
        return 1;
    }
    /* Blocked before the first fork, so that no signal is lost and every
     * one is taken in order by sigtimedwait below. */
    sigemptyset(&m.signals);
    sigaddset(&m.signals, SIGCHLD);
    sigaddset(&m.signals, SIGINT);
    sigaddset(&m.signals, SIGTERM);
    sigaddset(&m.signals, SIGHUP);
    sigprocmask(SIG_BLOCK, &m.signals, &m.old_mask);
    log_info("master (pid %ld): starting %u workers", (long)m.pid, nworkers);

    while (!m.stopping || m.live > 0) {
        uint64_t wait = restart_due(&m);
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
                              .tv_nsec = (long)(wait % 1000) * 1000000};
        int signum = sigtimedwait(&m.signals, NULL, &ts);
        if (signum == SIGCHLD) {
            reap(&m);
        } else if (signum == SIGINT || signum == SIGTERM) {
            log_info("signal %d: stopping %u workers", signum, m.live);
            m.stopping = true;
            forward(&m, signum);
        } else if (signum == SIGHUP) {
            log_info("signal %d: the workers reload the configuration", signum);
            if (m.hooks.reload != NULL)
                m.hooks.reload(m.hooks.arg);
            forward(&m, signum);
        }
    }
    sigprocmask(SIG_SETMASK, &m.old_mask, NULL);
    free(m.workers);
    log_info("master: every worker has stopped");
    return m.failed ? 1 : 0;
}
