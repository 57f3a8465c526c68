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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "handlers/handlers.h"
#include "server/http/conn.h"
#include "server/server.h"
#include "tests/fuzz/fuzz_server.h"

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

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_server_init(&srv, &loop, &cfg, handler_modules, NULL, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
        abort();
    if (conn_accept(&srv.conn_env, pair[0], false) < 0) {
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
