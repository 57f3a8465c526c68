/* unclog: the program. Above both layers, it wires the core (server/) and the
 * handler modules (handlers/) together: arguments, threadpool size, workers,
 * start and stop. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "handlers/handlers.h"
#include "server/base/config.h"
#include "server/base/log.h"
#include "server/base/siphash.h"
#include "server/workers/control.h"
#include "server/http/clients.h"
#include "server/workers/master.h"
#include "server/pool/gateway.h"
#include "server/server.h"

static const struct module *const *const modules = handler_modules;

/* What a process needs to serve: main()'s configuration and command line,
 * and with workers the master's listening socket and the control plane
 * they share (else -1 and NULL). */
struct run {
    struct config *cfg;
    int argc;
    char **argv;
    int listen_fd;
    int admin_fd;
    struct control *control;
};

/* One server on its own loop and threadpool until it stops. WORKER is 1..N
 * under a master, 0 alone. Returns the exit status. */
static int serve(unsigned worker, void *arg)
{
    static struct server srv;
    struct run *run = arg;
    uv_loop_t *loop = uv_default_loop();
    int rc = server_init(&srv, loop, run->cfg, modules, run->argc, run->argv);
    if (rc < 0) {
        if (run->listen_fd >= 0)
            close(run->listen_fd);
        if (run->admin_fd >= 0)
            close(run->admin_fd);
        uv_loop_close(loop);
        return 1;
    }
    srv.worker = worker;
    if (run->control != NULL)
        server_join_control(&srv, run->control);
    rc = server_start(&srv, run->listen_fd, run->admin_fd);
    master_worker_ready();
    uv_run(loop, UV_RUN_DEFAULT);
    server_fini(&srv);
    int closed = uv_loop_close(loop);
    if (closed != 0)
        log_error("loop close: %s (a handle or request leaked)", uv_strerror(closed));
    uv_library_shutdown();
    if (rc < 0)
        return 1;
    return closed == 0 ? 0 : 1;
}

/* The master has reaped a worker: its slot of the control plane is empty. */
static void worker_gone(unsigned index, void *arg)
{
    struct run *run = arg;
    control_worker_gone(run->control, index);
}

/* SIGHUP, in the master: reads the configuration again as each worker
 * does (server_reload), so that a worker forked after it, in a crashed
 * one's place, starts from the reloaded file and not from the one the
 * server started with; its live settings then come from the control plane.
 * Restart keys, and a switch of the access log to or from standard output,
 * keep their running value, as in the workers. A configuration with an
 * error changes nothing (each worker logs why). */
static void master_reload(void *arg)
{
    static struct config next;
    struct run *run = arg;
    char err[CONFIG_ERR_MAX], kept[256];
    enum config_action action;
    if (config_load(&next, run->cfg->tables, run->argc, run->argv, &action, err) != 0)
        return;
    config_keep_restart_keys(&next, run->cfg, kept, sizeof kept);
    if ((strcmp(next.access_log, "-") == 0) != (strcmp(run->cfg->access_log, "-") == 0))
        memcpy(next.access_log, run->cfg->access_log, sizeof next.access_log);
    *run->cfg = next;
}

/* --routes: every module's routes, one a line, in matching order: the path
 * ("*" for the fallback) and the methods of its Allow header. */
static void print_routes(void)
{
    for (size_t i = 0; modules[i] != NULL; i++) {
        for (const struct route *r = modules[i]->routes; r != NULL && r->on_request != NULL; r++)
            printf("%s %s\n", r->path != NULL ? r->path : "*", r->allow);
    }
}

/* --job-classes: the gateway's job classes, one a line. */
static void print_job_classes(void)
{
    for (int cls = 0; cls < GATEWAY_NCLASSES; cls++)
        printf("%s\n", gateway_class_name((enum gateway_class)cls));
}

/* The value of the hex digit C, or -1. */
static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20; /* A-F as a-f */
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Sets the key of the clients' hash for the whole run, before any worker
 * forks (so every worker, and one forked again later, has it): random, or
 * UNCLOG_CLIENT_KEY's 32 hex digits when that is set, for a test that
 * needs to know which addresses share a bucket. Returns 0 or a negative
 * errno. */
static int set_client_key(void)
{
    uint8_t key[SIPHASH_KEY_LEN];
    const char *fixed = getenv("UNCLOG_CLIENT_KEY");
    size_t got = 0;
    if (fixed != NULL && strlen(fixed) != 2 * sizeof key)
        return -EINVAL;
    for (; fixed != NULL && got < sizeof key; got++) {
        int hi = hex_digit(fixed[2 * got]), lo = hex_digit(fixed[2 * got + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        key[got] = (uint8_t)(hi << 4 | lo);
    }
    while (got < sizeof key) {
        /* Blocks only until the kernel's pool is first seeded, early in boot. */
        ssize_t n = getrandom(key + got, sizeof key - got, 0);
        if (n < 0 && errno != EINTR)
            return -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    clients_set_key(key);
    return 0;
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int main(int argc, char **argv)
{
    static struct config cfg;
    static const struct config_table *tables[CONFIG_TABLES_MAX + 1];
    enum config_action action;
    char err[CONFIG_ERR_MAX];

    server_config_tables(modules, tables);
    if (config_load(&cfg, tables, argc, argv, &action, err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (action == CONFIG_HELP) {
        config_usage(&cfg, stdout, argv[0]);
        return 0;
    }
    if (action == CONFIG_VERSION) {
        printf("unclog %s (libuv %s, zlib %s)\n", UNCLOG_VERSION, uv_version_string(),
               zlibVersion());
        return 0;
    }
    if (action == CONFIG_KEYS) {
        config_print_keys(&cfg, stdout);
        return 0;
    }
    if (action == CONFIG_ROUTES || action == CONFIG_JOB_CLASSES) {
        if (action == CONFIG_ROUTES)
            print_routes();
        else
            print_job_classes();
        return 0;
    }
    log_set_level(cfg.log_level);
    /* libuv sizes its pool from the environment on first use, which is later. */
    char threads[16];
    snprintf(threads, sizeof threads, "%u", cfg.threads);
    setenv("UV_THREADPOOL_SIZE", threads, 1);
    signal(SIGPIPE, SIG_IGN);
    int rc = set_client_key();
    if (rc == -EINVAL) {
        log_error("UNCLOG_CLIENT_KEY is not 32 hex digits");
        return 2;
    }
    if (rc < 0) {
        log_error("client key: getrandom: %s", strerror(-rc));
        return 1;
    }

    struct run run = {.cfg = &cfg, .argc = argc, .argv = argv, .listen_fd = -1, .admin_fd = -1};
    unsigned workers = cfg.workers == CONFIG_AUTO ? online_cpus() : cfg.workers;
    if (workers == 1)
        return serve(0, &run);
    /* One socket per door, opened before the fork and shared: the kernel
     * queues every connection once, and a worker that dies loses only what
     * it accepted. Whichever worker takes an admin connection answers for
     * all: merged figures, and one /settings for every worker. */
    char admin_unix[108];
    if (server_open_listener(&cfg, &run.listen_fd) < 0)
        return 1;
    if (server_open_admin(&cfg, &run.admin_fd, admin_unix) < 0) {
        close(run.listen_fd);
        return 1;
    }
    run.control = control_create(workers, &cfg);
    if (run.control == NULL) {
        close(run.listen_fd);
        server_close_admin(run.admin_fd, admin_unix);
        return 1;
    }
    const struct master_hooks hooks = {
        .run = serve, .gone = worker_gone, .reload = master_reload, .arg = &run};
    int status = master_run(workers, &hooks);
    control_free(run.control);
    close(run.listen_fd);
    server_close_admin(run.admin_fd, admin_unix);
    return status;
}
