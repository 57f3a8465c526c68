/* What the connection targets (fuzz_conn.c, fuzz_relay.c) share: a docroot
 * with a little of everything the static handler looks at, and a server set
 * up as main() sets it up, less the listener (each input brings its own
 * socket to conn_accept). Included by one target each: its statics are the
 * target's. */
#ifndef UNCLOG_FUZZ_SERVER_H
#define UNCLOG_FUZZ_SERVER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "server/base/config.h"
#include "server/server.h"

static void write_file(const char *dir, const char *name, const char *text, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        abort();
    for (size_t i = 0; i < size; i++)
        fputc(text[i % strlen(text)], f);
    fclose(f);
}

static char root[] = "/tmp/unclog-fuzz-XXXXXX";
static const char *const root_files[] = {"index.html", "a.txt",     "big.bin",
                                         "a.txt.gz",   "sub/x.css", "sub"};

static void remove_root(void)
{
    char path[512];
    for (size_t i = 0; i < sizeof root_files / sizeof root_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, root_files[i]);
        remove(path);
    }
    rmdir(root);
}

/* A docroot with a little of everything the static handler looks at. */
static void make_root(char *dir)
{
    if (mkdtemp(dir) == NULL)
        abort();
    atexit(remove_root);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    if (mkdir(sub, 0755) < 0)
        abort();
    write_file(dir, "index.html", "<!doctype html><title>x</title>\n", 100);
    write_file(dir, "a.txt", "hello fuzzer\n", 5000);
    write_file(dir, "big.bin", "0123456789abcdef", 300 * 1024);
    write_file(dir, "a.txt.gz", "\x1f\x8b not really", 50);
    write_file(dir, "sub/x.css", "body{}\n", 70);
}

/* Sets up SRV on LOOP with the routes of MODULES (NULL-terminated) and
 * CFG: the defaults, small limits and partitions, so that short inputs
 * reach every branch, short timeouts only as a backstop (the EOF ends every
 * input), then the N_EXTRA settings of EXTRA. Aborts on any failure. */
static void fuzz_server_init(struct server *srv, uv_loop_t *loop, struct config *cfg,
                             const struct module *const *modules, const char *const (*extra)[2],
                             size_t n_extra)
{
    static const struct config_table *tables[CONFIG_TABLES_MAX + 1];
    server_config_tables(modules, tables);
    char err[CONFIG_ERR_MAX];
    setenv("UV_THREADPOOL_SIZE", "2", 1);
    signal(SIGPIPE, SIG_IGN);
    make_root(root);
    config_defaults(cfg, tables);
    static const char *const settings[][2] = {
        {"root", NULL},           {"access_log", "off"},  {"partition", "16k"},
        {"gzip_partition", "4k"}, {"max_url", "1k"},      {"max_header_size", "2k"},
        {"max_headers", "20"},    {"max_body", "64k"},    {"gzip_max_body", "32k"},
        {"header_timeout", "1s"}, {"body_timeout", "1s"}, {"keepalive_timeout", "1s"},
        {"send_timeout", "1s"},   {"listing", "on"},
    };
    size_t n = sizeof settings / sizeof settings[0];
    for (size_t i = 0; i < n + n_extra; i++) {
        const char *const *kv = i < n ? settings[i] : extra[i - n];
        if (config_set(cfg, kv[0], kv[1] ? kv[1] : root, err) != 0) {
            fprintf(stderr, "fuzz: %s\n", err);
            abort();
        }
    }
    if (uv_loop_init(loop) != 0)
        abort();
    /* The file cache is on, as by default: the first GET of a small file
     * fills it, the next one hits it. */
    if (server_init(srv, loop, cfg, modules, 0, NULL) != 0)
        abort();
    snprintf(srv->date, sizeof srv->date, "Thu, 01 Jan 2026 00:00:00 GMT");
    if (access_log_open(&srv->access, loop, "off") != 0)
        abort();
    log_set_level(LOG_ERROR);
}

#endif
