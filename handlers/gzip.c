#include "handlers/gzip.h"

#include "handlers/deflate.h"
#include "server/base/config.h"
#include "server/pool/source.h"

static const struct config_table gzip_config_table;

/* The running values of the module's keys. */
static const struct gzip_config *gzip_config_of(struct conn *c)
{
    return config_block(server_config(conn_server(c)), &gzip_config_table);
}

/* gzip_partition now: the size of a body's next slice. */
static size_t gzip_partition_now(struct conn *c)
{
    return gzip_config_of(c)->gzip_partition;
}

/* The head is in: the response starts, and the body is deflated as it
 * arrives, a slice per job (`whole`: the body is one slice). Its status is
 * committed late: until the first slot is full or the body is in, a body
 * that goes bad (413, a bad chunk, 408) gets its own status instead. */
static int gzip_on_request(struct conn *c, const struct request *req)
{
    const struct gzip_config *cfg = gzip_config_of(c);
    /* A slice is no larger than a body of known length. `whole` of a
     * chunked body: room for one byte past the limit, which then gets its
     * 413 before any of the body is deflated. */
    uint64_t len = req->has_length ? req->content_length : UINT64_MAX;
    struct pump_partition slices = {.size = cfg->gzip_partition};
    size_t slice = req->has_length                       ? pump_piece(&slices, false, len, true)
                   : cfg->gzip_partition == CONFIG_WHOLE ? cfg->gzip_max_body + 1
                                                         : cfg->gzip_partition;
    struct deflate_source *d =
        deflate_body_source(c, req, slice, cfg->gzip_max_body, gzip_partition_now);
    if (d == NULL)
        return 503;
    /* The pump owns the source; the window is shut until it has memory, so
     * on_body never runs for a source that is gone. */
    conn_set_handler_state(c, d, NULL);
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/gzip\r\n");
    conn_send_source(c, deflate_pump_source(d), -1);
    return 0;
}

static int gzip_on_body(struct conn *c, const char *at, size_t len)
{
    deflate_body_add(conn_handler_state(c), at, len);
    return 0;
}

static void gzip_on_body_end(struct conn *c)
{
    deflate_body_end(conn_handler_state(c));
}

static const struct route gzip_routes[] = {
    {.path = "/gzip",
     .methods = ROUTE_METHOD(HTTP_POST),
     .allow = "POST",
     .max_body_key = "gzip_max_body",
     .on_body = gzip_on_body,
     .on_request = gzip_on_request,
     .on_body_end = gzip_on_body_end},
    {0},
};

static const struct config_key gzip_keys[] = {
    {"gzip_partition", CONFIG_PARTITION, CONFIG_FIELD(struct gzip_config, gzip_partition), 1, GIB,
     "64k", "SIZE|whole", "input bytes deflated per threadpool job", CONFIG_LIVE, NULL},
    CONFIG_BYTES(struct gzip_config, gzip_max_body, 1, GIB, "16m",
                 "largest POST /gzip body, in place of max_body (413 beyond)", CONFIG_RELOAD),
};

static const struct config_table gzip_config_table =
    CONFIG_TABLE("gzip", gzip_keys, struct gzip_config);

static const struct snap_def gzip_partition_def = {
    .key = "gzip_partition",
    .metric = "unclog_gzip_partition_bytes",
    .help = "Input bytes deflated per threadpool job by /gzip (gzip_partition); 0 when it is "
            "whole.",
    .merge = SNAP_SAME};
/* The module's figures: its live setting. */
static void gzip_stats(const struct server *srv, const void *state, struct snapshot *out)
{
    const struct gzip_config *cfg = config_block(server_config(srv), &gzip_config_table);
    snap_add_size(out, &gzip_partition_def, cfg->gzip_partition);
}

const struct module gzip_module = {
    .name = "gzip", .routes = gzip_routes, .config = &gzip_config_table, .stats = gzip_stats};
