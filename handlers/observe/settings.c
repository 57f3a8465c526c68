#include "handlers/observe/settings.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/util.h"

#define FORM_MAX 4096 /* a form of every live key fits many times over */

/* A POST's state: its form, and then its change while the other workers
 * apply it (the connection is held meanwhile). */
struct form {
    struct conn *conn;
    struct server_change change;
    size_t len;
    char data[FORM_MAX + 1];
};

static const struct config_table settings_config_table;

bool settings_admin(const struct server *srv)
{
    const struct settings_config *sc = config_block(server_config(srv), &settings_config_table);
    return sc->admin;
}

/* Why C may not use the switch at all, or NULL: the page shows it as said. */
static const char *denial(struct conn *c)
{
    if (!settings_admin(conn_server(c)))
        return "live switching is off: start the server with --admin on (admin = on in its "
               "configuration file)";
    if (!conn_admin(c))
        return "live settings answer only on the admin listener (admin_listen)";
    return NULL;
}

/* ---- same origin: the switch answers only its own page ------------------- */

/* S without its leading and trailing spaces and tabs; its length in *LEN. */
static const char *trimmed(const char *s, size_t *len)
{
    s = skip_space(s);
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *len = n;
    return s;
}

/* The value of S[0..LEN) as a plain decimal (1 to 5 digits, no leading
 * zero), or -1. */
static long decimal(const char *s, size_t len)
{
    if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Whether S[0..LEN) is 127.x.y.z, four plain decimals up to 255. */
static bool loopback_v4(const char *s, size_t len)
{
    const char *end = s + len;
    for (int part = 0; part < 4; part++) {
        const char *stop = part < 3 ? memchr(s, '.', (size_t)(end - s)) : end;
        if (stop == NULL)
            return false;
        long v = decimal(s, (size_t)(stop - s));
        if (v < 0 || v > 255 || (part == 0 && v != 127))
            return false;
        s = stop + 1;
    }
    return true;
}

/* Whether HOST[0..LEN) names this machine as a loopback client reaches
 * it: localhost (any case), 127.x.y.z or [::1], then maybe :PORT. */
static bool loopback_host(const char *host, size_t len)
{
    /* The name ends at the ']' of an IPv6 literal, else at the first ':'. */
    bool literal = len > 0 && host[0] == '[';
    const char *end = memchr(host, literal ? ']' : ':', len);
    size_t name = end == NULL ? len : (size_t)(end - host) + literal;
    if (name < len) {
        long port = host[name] == ':' ? decimal(host + name + 1, len - name - 1) : -1;
        if (port < 1 || port > 65535)
            return false;
    }
    return (name == 9 && strncasecmp(host, "localhost", 9) == 0) ||
           (name == 5 && memcmp(host, "[::1]", 5) == 0) || loopback_v4(host, name);
}

/* Whether S[0..LEN) is the word WORD exactly. */
static bool word_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* Whether a Content-Type VALUE is the form the dashboard posts, with any
 * parameters (; charset=UTF-8). */
static bool form_type(const char *value)
{
    static const char form[] = "application/x-www-form-urlencoded";
    if (value == NULL)
        return false;
    value = skip_space(value);
    if (strncasecmp(value, form, sizeof form - 1) != 0)
        return false;
    value = skip_space(value + sizeof form - 1);
    return *value == '\0' || *value == ';';
}

const char *settings_refusal(const struct request *req)
{
    size_t host_len = 0, len;
    const char *host = req->headers[HEADER_HOST], *v;
    /* A reverse proxy or a tunnel on this machine is a loopback client
     * for whoever it serves, with a loopback Host of its own choosing. */
    if (req->proxied_by != NULL)
        return "a proxied request (Forwarded, X-Forwarded-For, X-Real-IP or Via) is refused: "
               "through a proxy on this machine any client looks like a loopback one";
    if (req->authority != NULL && !loopback_host(req->authority, req->authority_len))
        return "an absolute-form target must name localhost, 127.x.y.z or [::1] (RFC 9112 "
               "3.2.2: its authority, not Host, names the host)";
    if (host != NULL)
        host = trimmed(host, &host_len);
    if (host == NULL || !loopback_host(host, host_len))
        return "Host must be localhost, 127.x.y.z or [::1], with or without a port "
               "(another name may be DNS rebinding)";
    if ((v = req->headers[HEADER_ORIGIN]) != NULL) {
        v = trimmed(v, &len);
        if (word_is(v, len, "null"))
            return "Origin: null is refused (a sandboxed or opaque page)";
        if (len != 7 + host_len || strncasecmp(v, "http://", 7) != 0 ||
            strncasecmp(v + 7, host, host_len) != 0)
            return "Origin must be http:// and the Host (a page of another origin)";
    }
    if ((v = req->headers[HEADER_SEC_FETCH_SITE]) != NULL) {
        v = trimmed(v, &len);
        if (!word_is(v, len, "same-origin") && !word_is(v, len, "none"))
            return "Sec-Fetch-Site must be same-origin or none (a page of another origin)";
    }
    if (req->method == HTTP_POST && !form_type(req->headers[HEADER_CONTENT_TYPE]))
        return "a POST must be Content-Type: application/x-www-form-urlencoded";
    return NULL;
}

/* ---- the route ----------------------------------------------------------- */

static int settings_on_headers(struct conn *c, const struct request *req)
{
    if (req->method != HTTP_POST)
        return 0;
    /* A body a form could hold is dropped, for on_request to say why;
     * a larger one is not read from a client that may not post at all. */
    if (denial(c) != NULL)
        return req->chunked || (req->has_length && req->content_length > FORM_MAX) ? 403 : 0;
    if (settings_refusal(req) != NULL)
        return 0; /* no form: the body is dropped, on_request says why */
    if (req->has_length && req->content_length > FORM_MAX)
        return 413;
    struct form *f = malloc(sizeof *f);
    if (f == NULL)
        return 503;
    f->len = 0;
    conn_set_handler_state(c, f, free);
    return 0;
}

static int settings_on_body(struct conn *c, const char *at, size_t len)
{
    struct form *f = conn_handler_state(c);
    if (f == NULL)
        return 0;
    if (len > FORM_MAX - f->len)
        return 413;
    memcpy(f->data + f->len, at, len);
    f->len += len;
    return 0;
}

static int hex(char ch)
{
    return isdigit((unsigned char)ch)    ? ch - '0'
           : isxdigit((unsigned char)ch) ? tolower((unsigned char)ch) - 'a' + 10
                                         : -1;
}

/* Decodes a form field in place ('+' is a space, %XX a byte). Returns
 * false on a bad escape or a NUL byte. */
static bool form_decode(char *s)
{
    char *out = s;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '+') {
            *out++ = ' ';
        } else if (*p == '%') {
            int hi = hex(p[1]), lo = hi < 0 ? -1 : hex(p[2]);
            if (lo < 0 || (hi == 0 && lo == 0))
                return false;
            *out++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
    return true;
}

/* Applies FORM's pairs to *NEXT, a copy of the running configuration,
 * which is to replace it only if every pair is valid. Returns 0, or 400
 * with ERR. */
static int read_form(char *form, struct config *next, char err[CONFIG_ERR_MAX])
{
    char *save = NULL;
    for (char *pair = strtok_r(form, "&", &save); pair != NULL; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        if (eq == NULL) {
            snprintf(err, CONFIG_ERR_MAX, "'%.64s': expected key=value", pair);
            return 400;
        }
        *eq = '\0';
        char *key = pair, *value = eq + 1;
        if (!form_decode(key) || !form_decode(value)) {
            snprintf(err, CONFIG_ERR_MAX, "'%.64s': bad %%-escape", key);
            return 400;
        }
        if (config_set_live(next, key, value, err) != 0)
            return 400;
    }
    return 0;
}

/* Appends {"KEY":UPTIME_MS,...}: when each live setting last changed. */
static void settings_changes_json(const struct server *srv, struct buf *o)
{
    const char *sep = "";
    const struct config_key *k;
    buf_printf(o, "{");
    for (size_t i = 0; (k = config_key_at(server_config(srv), i)) != NULL; i++) {
        uint64_t ms;
        if (server_setting_changed(srv, i, &ms)) {
            buf_printf(o, "%s\"%s\":%" PRIu64, sep, k->name, ms);
            sep = ",";
        }
    }
    buf_printf(o, "}");
}

/* With workers: the worker answering, the generation of the settings it
 * runs, and which running workers have applied it and which not yet. */
static void workers_json(const struct server *srv, struct buf *o)
{
    uint64_t gen = server_settings_generation(srv);
    buf_printf(o, ",\"worker\":%u,\"generation\":%" PRIu64, server_worker(srv), gen);
    for (int want = 1; want >= 0; want--) {
        const char *sep = "";
        buf_printf(o, ",\"%s\":[", want ? "applied" : "pending");
        for (unsigned i = 1; i <= server_workers(srv); i++) {
            if (server_worker_applied(srv, i, gen) == want) {
                buf_printf(o, "%s%u", sep, i);
                sep = ",";
            }
        }
        buf_printf(o, "]");
    }
}

/* Answers STATUS with the live settings as JSON. Returns 0, or 500 when
 * the body could not be built (nothing sent). */
static int send_settings(struct conn *c, int status)
{
    const struct server *srv = conn_server(c);
    struct buf o;
    buf_init_growing(&o);
    buf_printf(&o, "{\"admin\":%s", settings_admin(srv) ? "true" : "false");
    const struct config_key *k;
    const struct config *cfg = server_config(srv);
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        char value[64];
        if (k->when != CONFIG_LIVE)
            continue;
        config_get(cfg, k->name, value, sizeof value);
        buf_printf(&o, ",\"%s\":\"%s\"", k->name, value);
    }
    buf_printf(&o, ",\"changed_ms\":");
    settings_changes_json(srv, &o);
    if (server_workers(srv) > 0)
        workers_json(srv, &o);
    buf_printf(&o, "}\n");
    if (o.failed) {
        free(o.data);
        return 500;
    }
    conn_head_start(c, status);
    conn_head_add(c, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    conn_send_body(c, o.data, o.len);
    free(o.data);
    return 0;
}

/* Every running worker has applied the POST's change (EVERYWHERE), or the
 * wait is over: 200, or 202 with the workers still pending. */
static void settings_on_applied(struct server_change *change, bool everywhere)
{
    struct form *f = container_of(change, struct form, change);
    struct conn *c = f->conn;
    if (!conn_closing(c) && send_settings(c, everywhere ? 200 : 202) != 0)
        conn_send_error(c, 500, NULL);
    conn_release(c);
}

/* POST: the form's change, everywhere. Returns 0 when it answers (now or
 * once every worker has applied it). */
static int settings_post(struct conn *c, struct form *f)
{
    struct server *srv = conn_server(c);
    char err[CONFIG_ERR_MAX] = "a NUL byte in the form";
    struct config next = *server_config(srv);
    f->data[f->len] = '\0';
    if (strlen(f->data) != f->len || read_form(f->data, &next, err) != 0) {
        conn_head_start(c, 400);
        conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
        char text[CONFIG_ERR_MAX + 2];
        snprintf(text, sizeof text, "%s\n", err);
        conn_send_text(c, text);
        return 0;
    }
    f->conn = c;
    if (server_change(srv, &next, &f->change, settings_on_applied)) {
        conn_hold(c);
        return 0;
    }
    return send_settings(c, 200);
}

/* Answers 403 saying WHY (after PREFIX): the dashboard shows the body as
 * it is, so the page never guesses the reason. */
static int refuse(struct conn *c, const char *prefix, const char *why)
{
    char text[320];
    snprintf(text, sizeof text, "403 Forbidden: %s%s\n", prefix, why);
    conn_head_start(c, 403);
    conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
    conn_send_text(c, text);
    return 0;
}

static int settings_on_request(struct conn *c, const struct request *req)
{
    const char *why = denial(c);
    if (why != NULL)
        return refuse(c, "", why);
    if ((why = settings_refusal(req)) != NULL)
        return refuse(c, "/settings answers only its own page: ", why);
    if (req->method == HTTP_POST)
        return settings_post(c, conn_handler_state(c));
    return send_settings(c, 200);
}

static const struct route settings_routes[] = {
    {.path = "/settings",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD) | ROUTE_METHOD(HTTP_POST),
     .allow = "GET, HEAD, POST",
     .on_headers = settings_on_headers,
     .on_body = settings_on_body,
     .on_request = settings_on_request,
     .instrument = true,
     .door = ROUTE_ADMIN},
    {0},
};

static const struct config_key settings_keys[] = {
    {"admin", CONFIG_BOOL, CONFIG_FIELD(struct settings_config, admin), 0, 0, "off", "on|off",
     "GET and POST /settings change live settings (on the admin listener, same origin only)",
     CONFIG_RELOAD, NULL},
};

/* The module's figures: whether the switch is on (its value from the row). */
static const struct snap_def admin_def = {
    .key = "admin",
    .metric = "unclog_admin_enabled",
    .kind = SNAP_FLAG,
    .help = "Whether POST /settings may change live settings (admin, on the admin listener)."};
static const struct snap_def *const settings_figures[] = {&admin_def, NULL};

static const struct config_table settings_config_table =
    CONFIG_TABLE_FIGURES("settings", settings_keys, struct settings_config, settings_figures);

const struct module settings_module = {
    .name = "settings", .routes = settings_routes, .config = &settings_config_table};
