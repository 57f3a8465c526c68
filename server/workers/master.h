#ifndef UNCLOG_MASTER_H
#define UNCLOG_MASTER_H

/* workers > 1: a small master process that keeps N workers running.
 *
 * The master opens nothing but the listening socket (before it is called)
 * and never starts libuv: each worker is forked with the socket, sets up its
 * own loop and threadpool and accepts from the shared socket. The master
 * forwards SIGINT, SIGTERM and SIGHUP to every worker (calling its reload
 * hook first on SIGHUP), restarts a worker
 * that dies while no stop is under way (after a back-off that grows while
 * workers keep dying young), and returns once every worker has stopped. */

/* Runs one worker in a forked child: returns its exit status. INDEX is
 * 1..N, stable across restarts of the same slot. The worker starts with
 * SIGINT, SIGTERM, SIGHUP and SIGCHLD blocked, so that a signal forwarded
 * early waits; it calls master_worker_ready() once its handlers are in. */
typedef int (*master_worker_fn)(unsigned index, void *arg);

/* The master has reaped worker INDEX (1..N), which has ended; a new one
 * may follow in its slot. Runs in the master. */
typedef void (*master_gone_fn)(unsigned index, void *arg);

/* SIGHUP reached the master: it calls this before it forwards the signal,
 * so that a worker it forks later starts from what the workers reload. */
typedef void (*master_reload_fn)(void *arg);

/* What the master calls, each with ARG: RUN in every forked worker; GONE
 * (if not NULL) for each worker it reaps; RELOAD (if not NULL) on SIGHUP. */
struct master_hooks {
    master_worker_fn run;
    master_gone_fn gone;
    master_reload_fn reload;
    void *arg;
};

/* Unblocks the signals a worker starts with blocked (pending ones are then
 * delivered to the handlers just installed). Harmless outside a worker. */
void master_worker_ready(void);

/* Forks NWORKERS workers running HOOKS->run(index, arg) and supervises
 * them until a SIGINT or SIGTERM has stopped them all. Returns 0 when every
 * worker exited 0 after the stop, 1 otherwise. */
int master_run(unsigned nworkers, const struct master_hooks *hooks);

#endif
