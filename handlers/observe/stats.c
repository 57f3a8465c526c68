#include "handlers/observe/stats.h"

#include "handlers/observe/history.h"
#include "handlers/observe/metrics.h"

#include <inttypes.h>
#include <stdlib.h>

#include "server/base/snapshot.h"
#include "server/base/util.h"
#include "server/module.h"

/* S as a JSON string: quotes, backslashes and control bytes escaped. */
static void put_string(struct buf *o, const char *s)
{
    buf_printf(o, "\"");
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            buf_printf(o, "\\%c", ch);
        else if (ch < 0x20)
            buf_printf(o, "\\u%04x", ch);
        else
            buf_printf(o, "%c", ch);
    }
    buf_printf(o, "\"");
}

static void put_value(struct buf *o, const struct snap_entry *e)
{
    switch (e->def->kind) {
    case SNAP_FLAG:
        buf_printf(o, "%s", e->value ? "true" : "false");
        break;
    case SNAP_INFO:
        put_string(o, e->text);
        break;
    case SNAP_HISTOGRAM:
        buf_printf(o, "%" PRIu64, e->hist->sum);
        break;
    default:
        buf_printf(o, "%" PRIu64, e->value);
    }
}

/* The snapshot as one JSON object: objects nest as they were opened; a
 * figure without a name is /metrics' alone. */
static void render_json(struct buf *o, const struct snapshot *s, bool full)
{
    bool first = true;
    buf_printf(o, "{");
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type == SNAP_CLOSE) {
            buf_printf(o, "}");
            first = false;
            continue;
        }
        if (e->name == NULL || (e->type == SNAP_FIGURE && e->def->private && !full))
            continue;
        buf_printf(o, "%s", first ? "" : ",");
        put_string(o, e->name);
        buf_printf(o, ":");
        if (e->type == SNAP_OPEN)
            buf_printf(o, "{");
        else
            put_value(o, e);
        first = e->type == SNAP_OPEN;
    }
    buf_printf(o, "}\n");
}

/* Answers C with O's text (a growing buf, freed here) as a 200 of TYPE (a
 * Content-Type) not to be cached. Returns 0, or 500 when O failed. */
static int send_buf(struct conn *c, struct buf *o, const char *type)
{
    if (o->failed) {
        free(o->data);
        return 500;
    }
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: %s\r\nCache-Control: no-store\r\n", type);
    conn_send_body(c, o->data, o->len);
    free(o->data);
    return 0;
}

static const struct config_table stats_config_table;

enum stats_view stats_view(struct conn *c)
{
    if (conn_admin(c))
        return STATS_FULL;
    const struct stats_config *sc =
        config_block(server_config(conn_server(c)), &stats_config_table);
    for (unsigned i = 0; i < sc->from.n; i++) {
        if (addr_prefix_contains(&sc->from.prefix[i], conn_peer_addr(c)))
            return (enum stats_view)sc->detail;
    }
    return STATS_REFUSED;
}

int stats_refuse(struct conn *c)
{
    conn_head_start(c, 403);
    conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n");
    conn_send_text(c, "403 Forbidden: the server's figures answer on its admin listener "
                      "(admin_listen), and here only clients under stats_from (e.g. "
                      "stats_from = 192.0.2.0/24)\n");
    return 0;
}

/* An answer that waits for the other workers' figures; holds its
 * connection until then. */
struct stats_wait {
    struct server_refresh refresh;
    struct conn *conn;
    stats_render_fn render;
    const char *type;
    enum stats_view view;
};

static int answer_now(struct conn *c, stats_render_fn render, const char *type,
                      enum stats_view view)
{
    struct snapshot s;
    snap_init(&s);
    server_snapshot(conn_server(c), &s);
    struct buf o;
    buf_init_growing(&o);
    bool complete = snap_complete(&s);
    if (complete)
        render(&o, &s, view == STATS_FULL);
    snap_free(&s);
    o.failed |= !complete;
    return send_buf(c, &o, type);
}

static void stats_on_refreshed(struct server_refresh *refresh)
{
    struct stats_wait *w = container_of(refresh, struct stats_wait, refresh);
    struct conn *c = w->conn;
    if (!conn_closing(c) && answer_now(c, w->render, w->type, w->view) != 0)
        conn_send_error(c, 500, NULL);
    conn_release(c);
    free(w);
}

int stats_answer(struct conn *c, stats_render_fn render, const char *type)
{
    enum stats_view view = stats_view(c);
    if (view == STATS_REFUSED)
        return stats_refuse(c);
    /* With workers, the others publish first: the totals are exact, not
     * some FIGURES_PUBLISH_MS behind. Without memory for the wait, as they are. */
    struct stats_wait *w = malloc(sizeof *w);
    if (w != NULL) {
        *w = (struct stats_wait){.conn = c, .render = render, .type = type, .view = view};
        if (server_refresh(conn_server(c), &w->refresh, stats_on_refreshed)) {
            conn_hold(c);
            return 0;
        }
        free(w);
    }
    return answer_now(c, render, type, view);
}

static int stats_on_request(struct conn *c, const struct request *req)
{
    return stats_answer(c, render_json, "application/json");
}

static int metrics_on_request(struct conn *c, const struct request *req)
{
    return stats_answer(c, metrics_render, "text/plain; version=0.0.4; charset=utf-8");
}

static int history_on_request(struct conn *c, const struct request *req)
{
    if (stats_view(c) == STATS_REFUSED)
        return stats_refuse(c);
    struct buf o;
    buf_init_growing(&o);
    if (!history_render(&o, conn_server(c), req->target)) {
        free(o.data);
        return 400;
    }
    return send_buf(c, &o, "application/json");
}

/* One snapshot, two renderers: JSON and Prometheus text; and the history
 * the dashboard draws (history.h). */
static const struct route stats_routes[] = {
    {.path = "/stats",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = stats_on_request,
     .instrument = true,
     .door = ROUTE_BOTH},
    {.path = "/metrics",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = metrics_on_request,
     .instrument = true,
     .door = ROUTE_BOTH},
    {.path = "/stats/history",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = history_on_request,
     .instrument = true,
     .door = ROUTE_BOTH},
    {0},
};

static const struct config_choice details[] = {
    {"private", STATS_PRIVATE},
    {"full", STATS_FULL},
    {NULL, 0},
};

static const struct config_choice stats_off[] = {{"off", 0}, {NULL, 0}};

static const struct config_key stats_keys[] = {
    {"stats_from", CONFIG_ADDRS, CONFIG_FIELD(struct stats_config, from), 0, 0, "off",
     "off|PREFIX[,PREFIX...]",
     "clients that may read /stats, /stats/history and /metrics on the public listener (the "
     "admin listener shows them to all its clients), as addresses or ADDRESS/LENGTH prefixes, "
     "up to 8 (a Prometheus host: 192.0.2.7); others get 403; off: none, loopback ones "
     "neither",
     CONFIG_RELOAD, stats_off},
    {"stats_detail", CONFIG_CHOICE, CONFIG_FIELD(struct stats_config, detail), 0, 0, "private",
     "private|full",
     "what clients under stats_from see: private: no client's address and no pid; full: "
     "everything, as on the admin listener",
     CONFIG_RELOAD, details},
};

static const struct config_table stats_config_table =
    CONFIG_TABLE("stats", stats_keys, struct stats_config);

const struct module stats_module = {
    .name = "stats", .routes = stats_routes, .config = &stats_config_table};
