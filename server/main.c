/* unclog: arguments, threadpool size, signals, start and stop. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "server/config.h"
#include "server/log.h"
#include "server/server.h"

#define DEFAULT_CONFIG "conf/unclog.conf"

static int load_config(struct config *cfg, int argc, char **argv, enum config_action *action)
{
    char err[CONFIG_ERR_MAX];
    config_defaults(cfg);
    const char *file = config_cli_file(argc, argv);
    if (file == NULL && access(DEFAULT_CONFIG, R_OK) == 0)
        file = DEFAULT_CONFIG;
    if (file != NULL && config_load_file(cfg, file, err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (config_apply_cli(cfg, argc, argv, action, err) != 0) {
        fprintf(stderr, "unclog: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct config cfg;
    static struct server srv;
    enum config_action action;

    if (load_config(&cfg, argc, argv, &action) != 0)
        return 2;
    if (action == CONFIG_HELP) {
        config_usage(stdout, argv[0]);
        return 0;
    }
    if (action == CONFIG_VERSION) {
        printf("unclog %s (libuv %s, zlib %s)\n", UNCLOG_VERSION, uv_version_string(),
               zlibVersion());
        return 0;
    }
    /* libuv sizes its pool from the environment on first use, which is later. */
    char threads[16];
    snprintf(threads, sizeof threads, "%u", cfg.threads);
    setenv("UV_THREADPOOL_SIZE", threads, 1);
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t *loop = uv_default_loop();
    int rc = server_start(&srv, loop, &cfg);
    uv_run(loop, UV_RUN_DEFAULT);
    access_log_close(&srv.access);
    cache_free(&srv.cache);
    int closed = uv_loop_close(loop);
    if (closed != 0)
        log_error("loop close: %s (a handle or request leaked)", uv_strerror(closed));
    uv_library_shutdown();
    if (rc < 0)
        return 1;
    return closed == 0 ? 0 : 1;
}
