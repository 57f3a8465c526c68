#ifndef UNCLOG_SERVER_INTERNAL_H
#define UNCLOG_SERVER_INTERNAL_H

/* Shared by the files at the top of the core only: server.c (lifecycle,
 * signals, stop), listener.c (the socket and accepting), router.c (modules,
 * routes, response counters) and reload.c (live settings). The server__
 * prefix marks what nothing else calls. */

#include <uv.h>

struct server;

/* server.c: uv_close with the server's handle count, once. */
void server__close_handle(struct server *srv, uv_handle_t *handle);

/* listener.c */
/* Takes LISTEN_FD (or opens cfg->listen when it is < 0) and sets up its
 * handles. Returns 0, or logs and returns a negative UV_E* code with nothing
 * left open. */
int server__listener_open(struct server *srv, int listen_fd);
/* Starts accepting and says where (the first startup line). */
int server__listener_start(struct server *srv);
/* Stops accepting for good: closes the handles and the socket. */
void server__close_listener(struct server *srv);

/* router.c: a row of response counters for every route. */
void server__router_init(struct server *srv);

/* reload.c: pushes what responses in flight read at each piece. */
void server__apply_to_pumps(struct server *srv);
/* reload.c, with workers: starts watching this worker's eventfd (and sets
 * up the timer of changes that wait). Returns 0, or a negative UV_E* code
 * with what it opened closing. */
int server__control_start(struct server *srv);
/* Closes what server__control_start opened (nothing without workers). */
void server__control_close(struct server *srv);

/* observe.c: this process's own figures (server_snapshot merges the
 * other workers' in, whole.h). */
struct snapshot;
void server__snapshot_own(const struct server *srv, struct snapshot *s);

/* whole.c, with workers > 1 (srv->whole set). Publishes now and then every
 * WHOLE_PUBLISH_MS; returns 0 or a negative UV_E* code. */
int server__whole_start(struct server *srv);
/* At the stop: closes its timers (counted in open_handles) if it started. */
void server__whole_close(struct server *srv);
/* The control eventfd woke this worker: publishes now if another worker
 * asked for figures since the last publication that answered (server_refresh). */
void server__whole_answer(struct server *srv);
/* server_fini, after the loop ran dry: frees srv->whole. */
void server__whole_free(struct server *srv);

#endif
