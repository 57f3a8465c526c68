/* libFuzzer target: configuration parsing (server/base/config.c).
 *
 * The first byte picks the entry point: config_parse_size, config_set on one
 * of the keys, config_load_file (the input written to a temp file), or
 * config_apply_cli (the input split at NULs into argv). A size that parses
 * must survive a round trip through config_format_size. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/base/config.h"
#include "handlers/handlers.h"
#include "server/server.h"

/* Every key: the core's and each module's (filled by main or the init). */
static const struct config_table *tables[CONFIG_TABLES_MAX + 1];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char file[] = "/tmp/unclog-fuzz-config-XXXXXX";
static int file_fd = -1;

static const char *const keys[] = {
    "listen",          "root",         "threads",           "partition",    "gzip_partition",
    "gzip_max_body",   "access_log",   "listing",           "gzip_static",  "gzip_min_size",
    "max_connections", "max_url",      "max_header_size",   "max_headers",  "max_body",
    "header_timeout",  "body_timeout", "keepalive_timeout", "send_timeout", "no_such_key",
};

static void remove_file(void)
{
    unlink(file);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    server_config_tables(handler_modules, tables);
    file_fd = mkstemp(file);
    if (file_fd < 0)
        abort();
    atexit(remove_file);
    return 0;
}

static void fuzz_size(const char *text)
{
    size_t size;
    if (config_parse_size(text, true, &size) == 0) {
        char again[64];
        size_t back;
        config_format_size(size, again, sizeof again);
        if (config_parse_size(again, true, &back) != 0 || back != size)
            abort();
    }
}

static void fuzz_cli(char *text, size_t len)
{
    char *argv[64] = {"unclog"};
    int argc = 1;
    for (char *p = text; p < text + len && argc < 63; p += strlen(p) + 1)
        argv[argc++] = p;
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    enum config_action action;
    config_defaults(&cfg, tables);
    (void)config_cli_file(argc, argv);
    (void)config_apply_cli(&cfg, argc, argv, &action, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    char *text = malloc(size);
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    config_defaults(&cfg, tables);
    switch (data[0] % 4) {
    case 0:
        fuzz_size(text);
        break;
    case 1:
        (void)config_set(&cfg, keys[data[1] % (sizeof keys / sizeof keys[0])], text, err);
        break;
    case 2:
        if (ftruncate(file_fd, 0) != 0 || pwrite(file_fd, data + 2, size - 2, 0) < 0)
            abort();
        (void)config_load_file(&cfg, file, err);
        break;
    case 3:
        fuzz_cli(text, size - 2);
        break;
    }
    free(text);
    return 0;
}
