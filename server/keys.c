/* The core's configuration keys: one table, grouped by the room that reads
 * them. Handler modules declare their own keys beside their code
 * (struct module's config). Each key says how a running server takes a new
 * value: at a restart only, at a reload, or live (POST /settings too). */
#include <stdlib.h>

#include "server/base/config.h"
#include "server/base/log.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"
#include "server/pool/sched.h"
#include "server/server.h"
#include "server/module.h"

static const struct config_choice sched_modes[] = {
    {"fifo", SCHED_MODE_FIFO},
    {"fair", SCHED_MODE_FAIR},
    {NULL, 0},
};

static const struct config_choice log_levels[] = {
    {"error", LOG_ERROR}, {"warn", LOG_WARN}, {"info", LOG_INFO}, {"debug", LOG_DEBUG}, {NULL, 0},
};

static const struct config_choice sendfile_modes[] = {{"auto", 1}, {"off", 0}, {NULL, 0}};

static const struct config_choice proxy_off[] = {{"off", 0}, {NULL, 0}};
/* admin_listen's words besides an address ("unix:" stands for unix:/PATH). */
static const struct config_choice admin_words[] = {
    {"auto", 0}, {"off", 0}, {"unix:", 0}, {NULL, 0}};

static const struct config_key core_keys[] = {
    {"listen", CONFIG_ADDR, CONFIG_FIELD(struct config, listen), 0, 0, "127.0.0.1:8080",
     "ADDR:PORT",
     "address to listen on: IPv4, [IPv6] or localhost (127.0.0.1), then :PORT; port 0 picks a "
     "free one",
     CONFIG_RESTART, NULL},
    {"admin_listen", CONFIG_ADDR, CONFIG_FIELD(struct config, admin_listen), 0, 0, "auto",
     "auto|ADDR:PORT|unix:/PATH|off",
     "the admin listener, the only one with the dashboard, /settings, and (besides clients under "
     "stats_from) /stats, /stats/history and /metrics; auto: a loopback address, the listen "
     "port + 1 (a free port when listen's is 0 or + 1 is taken); unix:/PATH: a unix socket "
     "(mode 0600); off: none",
     CONFIG_RESTART, admin_words},
    {"root", CONFIG_STRING, CONFIG_FIELD(struct config, root), 0, 0, "static", "DIR",
     "directory served", CONFIG_RESTART, NULL},
    {"threads", CONFIG_UINT, CONFIG_FIELD(struct config, threads), 1, 1024, "4", "N",
     "libuv threadpool size per worker", CONFIG_RESTART, NULL},
    {"workers", CONFIG_UINT_AUTO, CONFIG_FIELD(struct config, workers), 1, 1024, "1", "N|auto",
     "server processes sharing the port; auto: one per online CPU", CONFIG_RESTART, NULL},
    {"partition", CONFIG_PARTITION_AUTO, CONFIG_FIELD(struct config, partition), 1, GIB, "auto",
     "SIZE|whole|auto",
     "bytes per threadpool read of a file (whole: one read, up to max_buffer_memory); auto: "
     "partition_max while no short work waits, partition_min when some does (a plain read's "
     "rest of 256k or less: one piece)",
     CONFIG_LIVE, NULL},
    CONFIG_BYTES(struct config, partition_min, 1, GIB, "64k",
                 "piece size of partition = auto while short work waits (but a plain read's "
                 "rest of 256k or less goes whole)",
                 CONFIG_RELOAD),
    CONFIG_BYTES(struct config, partition_max, 1, GIB, "1m",
                 "piece size of partition = auto while no short work waits", CONFIG_RELOAD),
    {"bulk_nice", CONFIG_UINT, CONFIG_FIELD(struct config, bulk_nice), 0, 19, "0", "N",
     "nice value, 0 to 19, of a pool thread while it runs a bulk piece; 0: off. Needs root or "
     "LimitNICE=20, to set threads back for short work",
     CONFIG_RELOAD, NULL},
    {"scheduler", CONFIG_CHOICE, CONFIG_FIELD(struct config, scheduler), 0, 0, "fair", "fifo|fair",
     "order of threadpool jobs: fifo (arrival) or fair (short work first, bulk shared)",
     CONFIG_LIVE, sched_modes},
    {"emulate_disk", CONFIG_DISK, CONFIG_FIELD(struct config, emulate_disk), 0, 60000, "off",
     "LATENCY[,RATE]|off",
     "every pool read of a file takes at least LATENCY plus its bytes at RATE per second, "
     "e.g. 8ms,120m: what a slow disk does to the pool, on a warm page cache",
     CONFIG_LIVE, NULL},
    {"access_log", CONFIG_STRING, CONFIG_FIELD(struct config, access_log), 0, 0, "-", "PATH|-|off",
     "Common Log Format access log", CONFIG_RELOAD, NULL},
    {"log_level", CONFIG_CHOICE, CONFIG_FIELD(struct config, log_level), 0, 0, "info",
     "error|warn|info|debug",
     "most verbose lines on stderr (debug: every refused request and timeout)", CONFIG_RELOAD,
     log_levels},
    /* Limits and timeouts: what one client may cost. */
    {"max_connections", CONFIG_UINT, CONFIG_FIELD(struct config, max_connections), 1, 1000000,
     "4096", "N",
     "connections served at once; at the limit the client holding the most gives way: for a "
     "newcomer its idle connection closes, else a late head, a slow one (min_rate) or its "
     "longest busy one; its own new ones get 503. The admin door's are apart (64 at most)",
     CONFIG_RELOAD, NULL},
    {"client_prefix", CONFIG_PREFIX, CONFIG_FIELD(struct config, client_prefix), 0, 0, "32,64",
     "V4,V6",
     "leading bits of an address that make one client, IPv4's then IPv6's (::ffff:a.b.c.d counts "
     "as IPv4): whose connections and pool work are shared as one",
     CONFIG_RELOAD, NULL},
    {"proxy_protocol_from", CONFIG_ADDRS, CONFIG_FIELD(struct config, proxy_protocol_from), 0, 0,
     "off", "off|PREFIX[,PREFIX...]",
     "load balancers whose connections must begin with a PROXY protocol header (v1 or v2), "
     "which names the client: its address is the client's everywhere (connections, pool, "
     "log, /stats, /settings); a PROXY header from any other peer is refused",
     CONFIG_RELOAD, proxy_off},
    CONFIG_BYTES(struct config, max_url, 256, 1ULL << 20, "8k",
                 "longest request-target (414 beyond)", CONFIG_RELOAD),
    CONFIG_BYTES(struct config, max_header_size, 1024, 1ULL << 20, "16k",
                 "largest request header block (431 beyond)", CONFIG_RELOAD),
    {"max_headers", CONFIG_UINT, CONFIG_FIELD(struct config, max_headers), 1, 10000, "100", "N",
     "most header lines in a request (431 beyond)", CONFIG_RELOAD, NULL},
    CONFIG_BYTES(
        struct config, max_body, 1, GIB, "16m",
        "largest request body on any route but POST /gzip, which has gzip_max_body (413 beyond)",
        CONFIG_RELOAD),
    {"header_timeout", CONFIG_MS, CONFIG_FIELD(struct config, header_timeout), 1, 3600000, "10s",
     "TIME", "time to send a request head, from its first byte (408 beyond)", CONFIG_RELOAD, NULL},
    {"body_timeout", CONFIG_MS, CONFIG_FIELD(struct config, body_timeout), 1, 3600000, "10s",
     "TIME", "longest silence while a request body is read (408 beyond)", CONFIG_RELOAD, NULL},
    {"body_max_time", CONFIG_MS, CONFIG_FIELD(struct config, body_max_time), 1, 3600000, "600s",
     "TIME", "longest time a whole request body may take, from the end of its head (408 beyond)",
     CONFIG_RELOAD, NULL},
    {"min_rate", CONFIG_SIZE, CONFIG_FIELD(struct config, min_rate), 0, GIB, "1k", "SIZE|off",
     "bytes per second a request body or response moves (over 4 s windows, while waiting on the "
     "client) below which it is slow: at max_connections the top client's slow connections "
     "give way before its busy ones; off: none is slow",
     CONFIG_RELOAD, NULL},
    {"keepalive_timeout", CONFIG_MS, CONFIG_FIELD(struct config, keepalive_timeout), 1, 3600000,
     "5s", "TIME", "idle time allowed between requests on a connection", CONFIG_RELOAD, NULL},
    {"send_buffer", CONFIG_SIZE, CONFIG_FIELD(struct config, send_buffer), 4096, 64 * MIB, "off",
     "SIZE|off",
     "socket send buffer per connection (SO_SNDBUF); off: the kernel's autotuning, which a fixed "
     "size turns off (and with it a window larger than twice the size)",
     CONFIG_RELOAD, NULL},
    {"send_lowat", CONFIG_SIZE, CONFIG_FIELD(struct config, send_lowat), 4096, 64 * MIB, "1m",
     "SIZE|off",
     "unsent bytes a connection's socket takes beyond what it has sent (TCP_NOTSENT_LOWAT): "
     "bounds what one write hands the kernel without capping the window",
     CONFIG_RELOAD, NULL},
    CONFIG_BYTES(
        struct config, send_turn, 1, GIB, "256k",
        "bytes the loop hands the kernel per pass; beyond them writes wait, and clients take turns "
        "by bytes, however many connections each has",
        CONFIG_RELOAD),
    {"turn_share", CONFIG_UINT, CONFIG_FIELD(struct config, turn_share), 0, 1000000, "200", "US",
     "microseconds of a pass of the loop one client's requests and pool callbacks may take; "
     "beyond them its next requests wait for a later pass, so that a flood of cheap requests "
     "cannot hold the loop from another client's; 0: no bound",
     CONFIG_RELOAD, NULL},
    CONFIG_ONOFF(
        struct config, loop_reads, "on",
        "open and read files already in the page cache on the loop (openat2 RESOLVE_CACHED, "
        "preadv2 RWF_NOWAIT), send_turn bytes a pass at most; off: every read meets the pool",
        CONFIG_RELOAD),
    {"sendfile", CONFIG_CHOICE, CONFIG_FIELD(struct config, sendfile), 0, 0, "off", "auto|off",
     "auto: a file's body that goes as it is (a whole file or one range; not HEAD, gzip, "
     "multipart ranges or the file cache) moves from the page cache to the socket with "
     "sendfile, partition bytes a piece on the threadpool, holding no buffer memory; off: every "
     "body is read into buffers (the pump)",
     CONFIG_RELOAD, sendfile_modes},
    CONFIG_BYTES(
        struct config, max_buffer_memory, 1, 1ULL << 40, "256m",
        "request and response buffers held at once per worker: beyond it work waits its turn",
        CONFIG_RELOAD),
    {"send_timeout", CONFIG_MS, CONFIG_FIELD(struct config, send_timeout), 1, 3600000, "30s",
     "TIME", "longest time a client may take no bytes of its response", CONFIG_RELOAD, NULL},
};

/* The core's keys that /stats and /metrics show as figures of their own
 * (every live key is also in "settings", as the config file spells it),
 * in the order /stats lists them; the values come from the rows above. */
static const struct snap_def threads_def = {.key = "threads",
                                            .metric = "unclog_threads",
                                            .help = "Threadpool threads (the threads setting).",
                                            .merge = SNAP_SUM};
static const struct snap_def partition_def = {
    .key = "partition",
    .metric = "unclog_partition_bytes",
    .help = "Bytes per threadpool read of a file (partition); 0 when it is whole (one read per "
            "file) or auto (pieces of unclog_partition_min_bytes while short work waits, else "
            "unclog_partition_max_bytes).",
    .merge = SNAP_SAME};
static const struct snap_def partition_min_def = {
    .key = "partition_min",
    .metric = "unclog_partition_min_bytes",
    .help = "partition = auto: the piece size while short work waits (partition_min).",
    .merge = SNAP_SAME};
static const struct snap_def partition_max_def = {
    .key = "partition_max",
    .metric = "unclog_partition_max_bytes",
    .help = "partition = auto: the piece size while no short work waits (partition_max).",
    .merge = SNAP_SAME};
/* /stats' alone: /metrics has it as unclog_setting_info{key="emulate_disk"}. */
static const struct snap_def emulate_disk_def = {.key = "emulate_disk", .kind = SNAP_INFO};
static const struct snap_def *const core_figures[] = {
    &threads_def, &partition_def, &partition_min_def, &partition_max_def, &emulate_disk_def, NULL,
};

const struct config_table server_config_table = {
    .name = "core",
    .keys = core_keys,
    .nkeys = sizeof core_keys / sizeof core_keys[0],
    .block_size = 0, /* its fields are struct config's own */
    .figures = core_figures,
};

void server_config_tables(const struct module *const *modules,
                          const struct config_table *tables[CONFIG_TABLES_MAX + 1])
{
    size_t n = 0;
    tables[n++] = &server_config_table;
    for (size_t i = 0; modules[i] != NULL; i++) {
        if (modules[i]->config == NULL)
            continue;
        if (n == CONFIG_TABLES_MAX)
            abort(); /* more tables than struct config has room for: a bug */
        tables[n++] = modules[i]->config;
    }
    tables[n] = NULL;
}
