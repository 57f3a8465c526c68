/* The limit and timeout keys of the configuration: defaults, units, ranges. */
#include <stdio.h>

#include "server/base/config.h"
#include "handlers/handlers.h"
#include "server/server.h"
#include "tests/tap.h"

/* Every key: the core's and each module's (filled by main or the init). */
static const struct config_table *tables[CONFIG_TABLES_MAX + 1];

static void test_defaults(void)
{
    struct config cfg;
    config_defaults(&cfg, tables);
    is_int(cfg.max_connections, 4096, "max_connections defaults to 4096");
    is_int(cfg.max_url, 8192, "max_url defaults to 8k");
    is_int(cfg.max_header_size, 16384, "max_header_size defaults to 16k");
    is_int(cfg.max_headers, 100, "max_headers defaults to 100");
    is_int(cfg.max_body, 16 << 20, "max_body defaults to 16m");
    is_int(cfg.header_timeout, 10000, "header_timeout defaults to 10 s");
    is_int(cfg.body_timeout, 10000, "body_timeout defaults to 10 s");
    is_int(cfg.keepalive_timeout, 5000, "keepalive_timeout defaults to 5 s");
    is_int(cfg.send_timeout, 30000, "send_timeout defaults to 30 s");
}

static void test_times(void)
{
    static const struct {
        const char *text;
        int rc;
        unsigned ms;
    } cases[] = {
        {"250", 0, 250},
        {"250ms", 0, 250},
        {"3s", 0, 3000},
        {"1", 0, 1},
        {"3600s", 0, 3600000},
        {"3600001", -1, 0},
        {"3601s", -1, 0},
        {"0", -1, 0},
        {"0s", -1, 0},
        {"", -1, 0},
        {"s", -1, 0},
        {"-5s", -1, 0},
        {"5 s", -1, 0},
        {"5m", -1, 0},
        {"5sec", -1, 0},
        {"1.5s", -1, 0},
        {"99999999999999999999s", -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config cfg;
        char err[CONFIG_ERR_MAX] = "";
        char desc[96];
        config_defaults(&cfg, tables);
        int rc = config_set(&cfg, "send_timeout", cases[i].text, err);
        snprintf(desc, sizeof desc, "send_timeout = '%s' %s", cases[i].text,
                 cases[i].rc ? "refused" : "accepted");
        is_int(rc, cases[i].rc, desc);
        if (rc == 0)
            is_int(cfg.send_timeout, cases[i].ms, "... in milliseconds");
        else
            ok(strstr(err, "send_timeout") != NULL, "... with a message naming the key");
    }
}

static void test_ranges(void)
{
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    config_defaults(&cfg, tables);
    is_int(config_set(&cfg, "max_url", "255", err), -1, "max_url below 256 refused");
    is_int(config_set(&cfg, "max_url", "2m", err), -1, "max_url above 1m refused");
    is_int(config_set(&cfg, "max_url", "1k", err), 0, "max_url = 1k");
    is_int(cfg.max_url, 1024, "... is 1024 bytes");
    is_int(config_set(&cfg, "max_header_size", "512", err), -1, "max_header_size below 1k refused");
    is_int(config_set(&cfg, "max_headers", "0", err), -1, "max_headers = 0 refused");
    is_int(config_set(&cfg, "max_connections", "0", err), -1, "max_connections = 0 refused");
    is_int(config_set(&cfg, "max_connections", "7", err), 0, "max_connections = 7");
    is_int(config_set(&cfg, "max_body", "whole", err), -1, "max_body = whole refused");
    is_int(config_set(&cfg, "max_body", "1", err), 0, "max_body = 1");
    is_int(config_set(&cfg, "keepalive_timeout", "1s", err), 0, "keepalive_timeout = 1s");
    is_int(config_set(&cfg, "header_timeout", "100ms", err), 0, "header_timeout = 100ms");
    is_int(config_set(&cfg, "body_timeout", "2s", err), 0, "body_timeout = 2s");
    is_int(cfg.body_timeout, 2000, "... is 2000 ms");
}

int main(void)
{
    server_config_tables(handler_modules, tables);
    test_defaults();
    test_times();
    test_ranges();
    return tap_done();
}
