/* libFuzzer target: arbitrary bytes through a connection's parser (llhttp
 * and the strict checks), its limits, the router and the handlers.
 *
 * No network, and no test-only code in conn.c: the seam is the socket. Each
 * input is written into one end of an AF_UNIX socketpair whose other end is
 * handed to conn_accept(), as an accepted TCP socket would be. The real loop,
 * timers, threadpool, pump and response writer run; pipelined requests are
 * answered until the input ends, and the EOF after it closes the connection.
 * An input is done when the connection has been freed. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "handlers/handlers.h"
#include "server/base/config.h"
#include "server/http/conn.h"
#include "server/server.h"

/* Every key: the core's and each module's (filled by main or the init). */
static const struct config_table *tables[CONFIG_TABLES_MAX + 1];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static struct config cfg;
static struct server srv;

/* The client's end of the pair: writes the input then EOF, drops what comes. */
struct client {
    uv_poll_t poll;
    int fd;
    const uint8_t *data;
    size_t size, sent;
    bool writing, done;
};

static void client_on_poll(uv_poll_t *poll, int status, int events)
{
    struct client *cl = poll->data;
    if (cl->writing && (events & UV_WRITABLE)) {
        ssize_t n = send(cl->fd, cl->data + cl->sent, cl->size - cl->sent, MSG_NOSIGNAL);
        if (n > 0)
            cl->sent += (size_t)n;
        if (cl->sent == cl->size || (n < 0 && errno != EAGAIN)) {
            shutdown(cl->fd, SHUT_WR);
            cl->writing = false;
        }
    }
    if ((events & UV_READABLE) || status < 0) {
        char buf[64 * 1024];
        ssize_t n = recv(cl->fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            cl->done = true;
    }
    if (cl->done)
        uv_poll_stop(poll);
    else
        uv_poll_start(poll, UV_READABLE | (cl->writing ? UV_WRITABLE : 0), client_on_poll);
}

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

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    server_config_tables(handler_modules, tables);
    char err[CONFIG_ERR_MAX];
    setenv("UV_THREADPOOL_SIZE", "2", 1);
    signal(SIGPIPE, SIG_IGN);
    make_root(root);
    config_defaults(&cfg, tables);
    /* Small limits and partitions, so that short inputs reach every branch;
     * short timeouts only as a backstop (the EOF ends every input). */
    static const char *const settings[][2] = {
        {"root", NULL},           {"access_log", "off"},  {"partition", "16k"},
        {"gzip_partition", "4k"}, {"max_url", "1k"},      {"max_header_size", "2k"},
        {"max_headers", "20"},    {"max_body", "64k"},    {"gzip_max_body", "32k"},
        {"header_timeout", "1s"}, {"body_timeout", "1s"}, {"keepalive_timeout", "1s"},
        {"send_timeout", "1s"},   {"listing", "on"},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const char *value = settings[i][1] ? settings[i][1] : root;
        if (config_set(&cfg, settings[i][0], value, err) != 0) {
            fprintf(stderr, "fuzz_conn: %s\n", err);
            abort();
        }
    }
    if (uv_loop_init(&loop) != 0)
        abort();
    /* The server's own setup, less the socket: connections come from a
     * socketpair. The file cache is on, as by default: the first GET of a
     * small file fills it, the next one hits it. */
    if (server_init(&srv, &loop, &cfg, handler_modules, 0, NULL) != 0)
        abort();
    snprintf(srv.date, sizeof srv.date, "Thu, 01 Jan 2026 00:00:00 GMT");
    if (access_log_open(&srv.access, &loop, "off") != 0)
        abort();
    log_set_level(LOG_ERROR);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
        abort();
    if (conn_accept(&srv.conn_env, pair[0]) < 0) {
        close(pair[1]);
        return 0;
    }
    srv.active++; /* as the listener counts it, until the connection's gone */
    struct client cl = {.fd = pair[1], .data = data, .size = size, .writing = true};
    if (size == 0) {
        shutdown(cl.fd, SHUT_WR);
        cl.writing = false;
    }
    uv_poll_init_socket(&loop, &cl.poll, cl.fd);
    cl.poll.data = &cl;
    uv_poll_start(&cl.poll, UV_READABLE | (cl.writing ? UV_WRITABLE : 0), client_on_poll);
    while (srv.active > 0)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&cl.poll, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    close(cl.fd);
    return 0;
}
