#ifndef UNCLOG_SERVER_H
#define UNCLOG_SERVER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "handlers/cache.h"
#include "server/config.h"
#include "server/log.h"

#define UNCLOG_VERSION "0.1.0"

struct conn;

/* The listener and everything shared by its connections. Lives in main();
 * owns its handles, the access log and (through the list) every connection. */
struct server {
    uv_loop_t *loop;
    const struct config *cfg;
    int listen_fd;             /* the listening socket; closed with accept_poll */
    uv_poll_t accept_poll;     /* listen_fd is readable: connections wait */
    uv_timer_t accept_pause;   /* restarts accept_poll after EMFILE and friends */
    bool accept_paused;        /* accepting stopped for lack of fds or memory */
    unsigned refused_logged;   /* 503s since the last tick: one log line per second */
    unsigned freed_since_tick; /* connections freed: the tick trims the heap after */
    uv_signal_t sigint, sigterm;
    uv_timer_t tick; /* 1 s: refreshes the Date header, flushes the access log */
    struct access_log access;
    struct cache cache;  /* small files' bodies, freshened by inotify */
    char root[PATH_MAX]; /* realpath of cfg->root: the boundary no request crosses */
    size_t root_len;
    char date[32];      /* "Sun, 06 Nov 1994 08:49:37 GMT", for date_time */
    time_t date_time;   /* the second date[] shows */
    struct conn *conns; /* live connections (intrusive list) */
    uint64_t accepted, active, requests, refused;
    uint64_t started_ms, stop_deadline_ms;
    bool stopping;
    unsigned open_handles; /* server handles not yet closed */
};

/* Binds, listens and installs the signal handlers on LOOP. Logs and returns
 * a negative UV_E* code on failure, after closing what it opened (run the
 * loop once more to let the close callbacks finish). */
int server_start(struct server *srv, uv_loop_t *loop, const struct config *cfg);

/* Graceful stop: no more accepting; idle connections close now, busy ones
 * after their response or at the deadline. The loop ends when all is closed. */
void server_stop(struct server *srv);

/* The Date header's value for the current second (formatted once per second). */
const char *server_date(struct server *srv);

/* Called by a connection when it has been freed. */
void server_conn_gone(struct server *srv);

#endif
