#include "handlers/observe/settings.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/util.h"

#define FORM_MAX 4096 /* a form of every live key fits many times over */

struct form {
    size_t len;
    char data[FORM_MAX + 1];
};

static const struct config_table settings_config_table;

bool settings_admin(const struct server *srv)
{
    const struct settings_config *sc = config_block(server_config(srv), &settings_config_table);
    return sc->admin;
}

static bool allowed(struct conn *c)
{
    return settings_admin(conn_server(c)) && conn_peer_loopback(c);
}

static int settings_on_headers(struct conn *c, const struct request *req)
{
    if (req->method != HTTP_POST)
        return 0;
    if (!allowed(c))
        return 403;
    if (req->has_length && req->content_length > FORM_MAX)
        return 413;
    struct form *f = malloc(sizeof *f);
    if (f == NULL)
        return 503;
    f->len = 0;
    conn_set_state(c, f, free);
    return 0;
}

static int settings_on_body(struct conn *c, const char *at, size_t len)
{
    struct form *f = conn_state(c);
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

/* Applies FORM's pairs to a copy of the running configuration; the copy
 * replaces it only if every pair is valid. Returns 0, or 400 with ERR. */
static int apply_form(struct server *srv, char *form, char err[CONFIG_ERR_MAX])
{
    struct config next = *server_config(srv);
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
        if (config_set_live(&next, key, value, err) != 0)
            return 400;
    }
    server_apply(srv, &next);
    return 0;
}

void settings_changes_json(const struct server *srv, struct buf *o)
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

static int send_settings(struct conn *c)
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
    buf_printf(&o, "}\n");
    if (o.failed) {
        free(o.data);
        return 500;
    }
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    conn_send_body(c, o.data, o.len);
    free(o.data);
    return 0;
}

static int settings_on_request(struct conn *c, const struct request *req)
{
    if (!allowed(c)) {
        conn_head_start(c, 403);
        conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
        conn_send_text(c, "403 Forbidden: live settings need admin = on, and a loopback client\n");
        return 0;
    }
    if (req->method == HTTP_POST) {
        struct form *f = conn_state(c);
        char err[CONFIG_ERR_MAX] = "a NUL byte in the form";
        f->data[f->len] = '\0';
        if (strlen(f->data) != f->len || apply_form(conn_server(c), f->data, err) != 0) {
            conn_head_start(c, 400);
            conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
            char text[CONFIG_ERR_MAX + 2];
            snprintf(text, sizeof text, "%s\n", err);
            conn_send_text(c, text);
            return 0;
        }
    }
    return send_settings(c);
}

static const struct route settings_routes[] = {
    {.path = "/settings",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD) | ROUTE_METHOD(HTTP_POST),
     .allow = "GET, HEAD, POST",
     .on_headers = settings_on_headers,
     .on_body = settings_on_body,
     .on_request = settings_on_request,
     .instrument = true},
    {0},
};

static const struct config_key settings_keys[] = {
    {"admin", CONFIG_BOOL, CONFIG_FIELD(struct settings_config, admin), 0, 0, "off", "on|off",
     "GET and POST /settings change live settings, from loopback clients only", CONFIG_RELOAD,
     NULL},
};

static const struct config_table settings_config_table =
    CONFIG_TABLE("settings", settings_keys, struct settings_config);

static const struct snap_def admin_def = {
    .key = "admin",
    .metric = "unclog_admin_enabled",
    .kind = SNAP_FLAG,
    .help = "Whether POST /settings may change live settings (admin, for loopback clients)."};
/* The module's figures: whether the switch is on. */
static void settings_stats(const struct server *srv, const void *state, struct snapshot *out)
{
    snap_add(out, &admin_def, settings_admin(srv));
}

const struct module settings_module = {.name = "settings",
                                       .routes = settings_routes,
                                       .config = &settings_config_table,
                                       .stats = settings_stats};
