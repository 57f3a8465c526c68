#ifndef UNCLOG_SERVER_INTERNAL_H
#define UNCLOG_SERVER_INTERNAL_H

/* Shared by the files at the top of the core only: server.c (lifecycle,
 * signals, stop), listener.c (the socket and accepting), router.c (modules,
 * routes, response counters), reload.c (live settings) and readout.c (the
 * figures). The server__ prefix marks what nothing else calls. server.c
 * calls the others through what is declared here; none of them calls
 * server.c, so the top of the core calls one way. */

#include <uv.h>

struct server;

/* listener.c */
/* Takes LISTEN_FD and ADMIN_FD (or opens cfg->listen and cfg->admin_listen
 * when LISTEN_FD is < 0) and sets up their handles. Returns 0, or logs and
 * returns a negative UV_E* code with nothing left open. */
int server__listener_open(struct server *srv, int listen_fd, int admin_fd);
/* Starts accepting and says where (the first startup line). */
int server__listener_start(struct server *srv);
/* Stops accepting for good: closes the handles and the sockets (and
 * unlinks the admin unix socket this process made). */
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

/* readout.c: this process's own figures, for the whole-server figures to
 * publish (server_snapshot merges the other workers' in). ARG is the
 * struct server. */
struct snapshot;
void server__snapshot_own(const void *arg, struct snapshot *s);

#endif
