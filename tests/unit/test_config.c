/* Size parsing, the key table, config files and the command line. */
#include "../../server/base/config.c"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "handlers/handlers.h"
#include "server/server.h"
#include "tests/tap.h"

#define LOG_INFO_INDEX 2

/* KEY's value in CFG as a config file spells it (a module's key too). */
static const char *value_of(const struct config *cfg, const char *key)
{
    static char buf[CONFIG_ERR_MAX];
    if (config_get(cfg, key, buf, sizeof buf) != 0)
        snprintf(buf, sizeof buf, "(no key %s)", key);
    return buf;
}

/* Every key: the core's and each module's (filled by main or the init). */
static const struct config_table *tables[CONFIG_TABLES_MAX + 1];

static void test_sizes(void)
{
    static const struct {
        const char *text;
        bool whole_ok;
        int rc;
        size_t value;
    } cases[] = {
        {"1", false, 0, 1},
        {"4096", false, 0, 4096},
        {"4k", false, 0, 4096},
        {"4K", false, 0, 4096},
        {"16m", false, 0, 16u << 20},
        {"whole", true, 0, CONFIG_WHOLE},
        {"whole", false, -EINVAL, 0},
        {"0", false, -EINVAL, 0},
        {"0k", false, -EINVAL, 0},
        {"", false, -EINVAL, 0},
        {"k", false, -EINVAL, 0},
        {"-4k", false, -EINVAL, 0},
        {" 4k", false, -EINVAL, 0},
        {"4kb", false, -EINVAL, 0},
        {"4g", false, -EINVAL, 0},
        {"12q", false, -EINVAL, 0},
        {"99999999999999999999999", false, -ERANGE, 0},
        {"9999999999999999m", false, -ERANGE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t value = 0;
        char desc[96];
        int rc = config_parse_size(cases[i].text, cases[i].whole_ok, &value);
        snprintf(desc, sizeof desc, "size '%s'%s -> %d", cases[i].text,
                 cases[i].whole_ok ? " (whole ok)" : "", cases[i].rc);
        is_int(rc, cases[i].rc, desc);
        if (rc == 0)
            is_int(value, cases[i].value, "  value");
    }
    char buf[32];
    config_format_size(65536, buf, sizeof buf);
    is_str(buf, "64k", "format 64k");
    config_format_size(16u << 20, buf, sizeof buf);
    is_str(buf, "16m", "format 16m");
    config_format_size(1000, buf, sizeof buf);
    is_str(buf, "1000", "format 1000");
    config_format_size(CONFIG_WHOLE, buf, sizeof buf);
    is_str(buf, "whole", "format whole");
}

static void test_listen(void)
{
    static const struct {
        const char *text;
        int family; /* 0: refused */
        const char *addr;
        int port;
    } cases[] = {
        {"127.0.0.1:8080", AF_INET, "127.0.0.1", 8080},
        {"0.0.0.0:0", AF_INET, "0.0.0.0", 0},
        {"localhost:80", AF_INET, "127.0.0.1", 80},
        {"LocalHost:65535", AF_INET, "127.0.0.1", 65535},
        {"[::1]:8080", AF_INET6, "::1", 8080},
        {"[::]:1", AF_INET6, "::", 1},
        {"::1:8080", 0, NULL, 0},
        {"[127.0.0.1]:80", 0, NULL, 0},
        {"[localhost]:80", 0, NULL, 0},
        {"localhost", 0, NULL, 0},
        {"example.com:80", 0, NULL, 0},
        {"nonsense", 0, NULL, 0},
        {"127.0.0.1:65536", 0, NULL, 0},
        {"127.0.0.1:", 0, NULL, 0},
        {"127.0.0.1:+80", 0, NULL, 0},
        {"127.0.0.1:80 ", 0, NULL, 0},
        {"127.0.0.1:000080", 0, NULL, 0},
        {":80", 0, NULL, 0},
        {"[]:80", 0, NULL, 0},
        {"", 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sockaddr_storage ss;
        char desc[96], name[64] = "";
        int rc = config_parse_addr(cases[i].text, &ss);
        snprintf(desc, sizeof desc, "listen '%s' %s", cases[i].text,
                 cases[i].family ? "parses" : "is refused");
        ok(cases[i].family ? rc == 0 && ss.ss_family == cases[i].family : rc == -EINVAL, desc);
        if (rc != 0 || cases[i].family == 0)
            continue;
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        if (ss.ss_family == AF_INET)
            uv_ip4_name(a4, name, sizeof name);
        else
            uv_ip6_name(a6, name, sizeof name);
        is_str(name, cases[i].addr, "  its address");
        is_int(ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port), cases[i].port,
               "  its port");
    }

    /* Through the key: the message names it and says what it takes. */
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    config_defaults(&cfg, tables);
    is_int(config_set(&cfg, "listen", "localhost:0", err), 0, "listen = localhost:0");
    is_str(value_of(&cfg, "listen"), "localhost:0", "  kept as written");
    is_int(config_set(&cfg, "listen", "example.com:80", err), -1, "listen = example.com:80");
    ok(strncmp(err, "listen: 'example.com:80' is not ADDR:PORT, [ADDR6]:PORT or localhost:PORT",
               strlen("listen: 'example.com:80' is not ADDR:PORT")) == 0,
       "  the message names the key and what it accepts");
    is_str(value_of(&cfg, "listen"), "localhost:0", "  and the value is kept");
}

static void test_defaults_and_set(void)
{
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    config_defaults(&cfg, tables);
    is_str(cfg.listen, "127.0.0.1:8080", "default listen");
    is_int(cfg.threads, 4, "default threads");
    ok(cfg.partition == CONFIG_AUTO_SIZE, "default partition: auto");
    is_int(cfg.partition_min, 64 << 10, "default partition_min");
    is_int(cfg.partition_max, 1 << 20, "default partition_max");
    is_int(cfg.scheduler, 1, "default scheduler: fair");
    is_int(config_set(&cfg, "gzip_partition", "auto", err), -1, "gzip_partition has no auto");
    is_int(config_set(&cfg, "scheduler", "fifo", err), 0, "scheduler fifo");
    is_int(cfg.send_buffer, 0, "default send_buffer: off, the kernel's autotuning");
    is_int(cfg.send_lowat, 1 << 20, "default send_lowat");
    is_int(cfg.send_turn, 256 << 10, "default send_turn");
    is_int(config_set(&cfg, "send_buffer", "off", err), 0, "send_buffer off");
    is_int(cfg.send_buffer, 0, "  is 0: the kernel's own");
    is_int(config_set(&cfg, "send_buffer", "1k", err), -1, "send_buffer below 4k refused");
    is_int(config_set(&cfg, "max_body", "off", err), -1, "off only where a key offers it");
    is_int(cfg.scheduler, 0, "  is the first choice");
    is_str(value_of(&cfg, "gzip_max_body"), "16m", "default gzip_max_body");

    is_int(config_set(&cfg, "partition", "whole", err), 0, "partition = whole");
    ok(cfg.partition == CONFIG_WHOLE, "  is whole");
    is_int(config_set(&cfg, "threads", "0", err), -1, "threads = 0 refused");
    is_int(config_set(&cfg, "threads", "1025", err), -1, "threads = 1025 refused");
    is_int(config_set(&cfg, "threads", "abc", err), -1, "threads = abc refused");
    is_int(config_set(&cfg, "threads", "12", err), 0, "threads = 12");
    is_int(cfg.threads, 12, "  is 12");
    is_int(config_set(&cfg, "gzip_max_body", "whole", err), -1, "gzip_max_body = whole refused");
    is_int(config_set(&cfg, "partition", "2048m", err), -1, "partition beyond 1 GiB refused");
    is_int(config_set(&cfg, "nope", "1", err), -1, "unknown key refused");
    ok(strstr(err, "nope") != NULL, "  message names the key");
    is_int(config_set(&cfg, "root", "", err), -1, "empty root refused");
}

static const char *write_file(const char *text)
{
    static char path[] = "/tmp/unclog-test-XXXXXX";
    strcpy(path, "/tmp/unclog-test-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        abort();
    close(fd);
    return path;
}

static void test_files(void)
{
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    config_defaults(&cfg, tables);
    const char *path = write_file("# comment\n\n  partition = 4k  # trailing\n"
                                  "gzip_partition=whole\nroot = /srv/www\n");
    is_int(config_load_file(&cfg, path, err), 0, "a good file loads");
    is_int(cfg.partition, 4096, "  partition 4k");
    is_str(value_of(&cfg, "gzip_partition"), "whole", "  gzip_partition whole");
    is_str(cfg.root, "/srv/www", "  root");
    unlink(path);

    static const struct {
        const char *text;
        int line;
    } bad[] = {
        {"bogus = 1\n", 1}, {"# ok\npartition = 0\n", 2},  {"\n\nthreads = lots\n", 3},
        {"partition\n", 1}, {"partition = 4k\n = 5\n", 2}, {"partition = 12q\n", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        config_defaults(&cfg, tables);
        path = write_file(bad[i].text);
        char want[64], desc[96];
        snprintf(want, sizeof want, "%s:%d: ", path, bad[i].line);
        snprintf(desc, sizeof desc, "bad file %zu refused with file:line", i);
        ok(config_load_file(&cfg, path, err) == -1 && strncmp(err, want, strlen(want)) == 0, desc);
        unlink(path);
    }
    ok(config_load_file(&cfg, "/nonexistent/unclog.conf", err) == -1, "missing file refused");
}

/* on/off, and the spellings other servers' files use; a typo of a key
 * offers the key. */
static void test_spellings(void)
{
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    config_defaults(&cfg, tables);
    static const struct {
        const char *text;
        const char *value;
    } bools[] = {{"on", "on"},   {"yes", "on"}, {"true", "on"},
                 {"off", "off"}, {"no", "off"}, {"false", "off"}};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        char desc[64];
        snprintf(desc, sizeof desc, "listing = %s is %s", bools[i].text, bools[i].value);
        ok(config_set(&cfg, "listing", bools[i].text, err) == 0 &&
               strcmp(value_of(&cfg, "listing"), bools[i].value) == 0,
           desc);
    }
    is_int(config_set(&cfg, "listing", "maybe", err), -1, "listing = maybe refused");
    is_int(config_set(&cfg, "listing", "ON", err), -1, "  and ON (values are lower case)");

    static const struct {
        const char *typo, *near;
    } typos[] = {
        {"partiton", "partition"},
        {"partitio", "partition"},
        {"parttion", "partition"},
        {"thread", "threads"},
        {"gzip_partiton", "gzip_partition"},
        {"listng", "listing"},
        {"lsiting", "listing"},
        {"root", "root"},
        {"bogus", NULL},
        {"x", NULL},
        {"", NULL},
        {"partition_minimum", NULL},
    };
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        char desc[96];
        const char *got = config_near_key(&cfg, typos[i].typo);
        snprintf(desc, sizeof desc, "near '%s': %s", typos[i].typo,
                 typos[i].near ? typos[i].near : "none");
        if (typos[i].near == NULL)
            ok(got == NULL, desc);
        else
            is_str(got, typos[i].near, desc);
    }
    config_set(&cfg, "partiton", "4k", err);
    ok(strstr(err, "did you mean 'partition'?") != NULL, "unknown key 'partiton' offers partition");
}

static void test_cli(void)
{
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    enum config_action action;
    config_defaults(&cfg, tables);
    char *argv[] = {"unclog",           "-c",    "x.conf",  "--partition", "8k", "--threads=2",
                    "--gzip-partition", "whole", "somedir", NULL};
    int argc = 9;
    is_str(config_cli_file(argc, argv), "x.conf", "-c found");
    is_int(config_apply_cli(&cfg, argc, argv, &action, err), 0, "flags apply");
    is_int(cfg.partition, 8192, "  --partition 8k");
    is_int(cfg.threads, 2, "  --threads=2");
    is_str(value_of(&cfg, "gzip_partition"), "whole", "  --gzip-partition whole");
    is_str(cfg.root, "somedir", "  positional DIR is the root");

    char *bad1[] = {"unclog", "--partition", "12q", NULL};
    is_int(config_apply_cli(&cfg, 3, bad1, &action, err), -1, "--partition 12q refused");
    char *bad2[] = {"unclog", "--frobnicate", NULL};
    is_int(config_apply_cli(&cfg, 2, bad2, &action, err), -1, "unknown flag refused");
    char *bad3[] = {"unclog", "--threads", NULL};
    is_int(config_apply_cli(&cfg, 2, bad3, &action, err), -1, "missing value refused");
    is_str(err, "--threads: needs a value", "  the flag, then the message");
    /* A flag followed by an option has no value: it does not take the option. */
    char *bad6[] = {"unclog", "--cache-control", "--admin", "dir", NULL};
    is_int(config_apply_cli(&cfg, 4, bad6, &action, err), -1, "--cache-control --admin refused");
    ok(strncmp(err, "--cache-control: needs a value, not the option --admin (", 56) == 0,
       "  --cache-control needs a value, not the option --admin");
    char *bad7[] = {"unclog", "--gzip-types", "--listen", "127.0.0.1:0", "dir", NULL};
    is_int(config_apply_cli(&cfg, 5, bad7, &action, err), -1, "--gzip-types --listen refused");
    ok(strstr(err, "--gzip-types=VALUE") != NULL, "  the message shows --gzip-types=VALUE");
    char *bad8[] = {"unclog", "--root", "--listing", "on", NULL};
    is_int(config_apply_cli(&cfg, 4, bad8, &action, err), -1, "--root --listing on refused");
    char *bad9[] = {"unclog", "--access_log", "-c", "x.conf", NULL};
    is_int(config_apply_cli(&cfg, 4, bad9, &action, err), -1, "--access_log -c refused");
    ok(strncmp(err, "--access_log: needs a value, not the option -c ", 47) == 0,
       "  -c is an option too; the flag as typed");
    char *bad10[] = {"unclog", "-c", "--listen", "127.0.0.1:0", NULL};
    ok(config_cli_file(4, bad10) == NULL, "-c --listen names no file");
    is_int(config_apply_cli(&cfg, 4, bad10, &action, err), -1, "-c --listen refused");
    is_str(err, "-c: needs a file, not the option --listen", "  -c needs a file");
    /* After '=', or a lone "-", a value may start with '-'. */
    char *dash[] = {"unclog", "--cache-control=--x", "--access-log", "-", "--root=-d", NULL};
    is_int(config_apply_cli(&cfg, 5, dash, &action, err), 0, "--key=-value and --key - apply");
    is_str(value_of(&cfg, "cache_control"), "--x", "  --cache-control=--x");
    is_str(cfg.access_log, "-", "  --access-log -");
    is_str(cfg.root, "-d", "  --root=-d");
    /* A flag is named as typed, with dashes or underscores. */
    char *bad4[] = {"unclog", "--emulate-disk=xx", NULL};
    is_int(config_apply_cli(&cfg, 2, bad4, &action, err), -1, "--emulate-disk=xx refused");
    ok(strncmp(err, "--emulate-disk: 'xx' ", 21) == 0, "  named --emulate-disk as typed");
    char *bad5[] = {"unclog", "--emulate_disk", "xx", NULL};
    is_int(config_apply_cli(&cfg, 3, bad5, &action, err), -1, "--emulate_disk xx refused");
    ok(strncmp(err, "--emulate_disk: 'xx' ", 21) == 0, "  named --emulate_disk as typed");
    char *help[] = {"unclog", "--help", NULL};
    config_apply_cli(&cfg, 2, help, &action, err);
    is_int(action, CONFIG_HELP, "--help");
    char *routes[] = {"unclog", "--routes", NULL};
    config_apply_cli(&cfg, 2, routes, &action, err);
    is_int(action, CONFIG_ROUTES, "--routes (for the man page)");
    char *classes[] = {"unclog", "--job-classes", NULL};
    config_apply_cli(&cfg, 2, classes, &action, err);
    is_int(action, CONFIG_JOB_CLASSES, "--job-classes (for the man page)");
}

static void test_workers_and_reload(void)
{
    struct config cur, next;
    char err[CONFIG_ERR_MAX], kept[128];
    config_defaults(&cur, tables);
    is_int(cur.workers, 1, "workers defaults to 1");
    is_int(config_set(&cur, "workers", "auto", err), 0, "workers auto");
    is_int(cur.workers, CONFIG_AUTO, "  is CONFIG_AUTO");
    is_int(config_set(&cur, "workers", "0", err), -1, "workers 0 refused");
    is_int(config_set(&cur, "workers", "3", err), 0, "workers 3");
    is_int(cur.log_level, LOG_INFO_INDEX, "log_level defaults to info");
    is_int(config_set(&cur, "log_level", "debug", err), 0, "log_level debug");
    is_int(cur.log_level, 3, "  is the fourth choice");
    is_int(config_set(&cur, "log_level", "de", err), -1, "a prefix of a choice is refused");
    is_int(config_set(&cur, "log_level", "", err), -1, "an empty choice is refused");
    is_int(config_set(&cur, "log_level", "info|debug", err), -1, "the list itself is refused");

    /* A reload: restart-only keys come back, live keys stay new. */
    next = cur;
    config_set(&next, "listen", "127.0.0.1:9", err);
    config_set(&next, "threads", "9", err);
    config_set(&next, "partition", "4k", err);
    config_set(&next, "access_log", "/tmp/x.log", err);
    config_keep_restart_keys(&next, &cur, kept, sizeof kept);
    is_str(kept, "listen threads", "the changed restart-only keys are named");
    is_str(next.listen, cur.listen, "  listen keeps its running value");
    is_int(next.threads, cur.threads, "  threads keeps its running value");
    is_int(next.partition, 4096, "  partition takes the new value");
    is_str(next.access_log, "/tmp/x.log", "  access_log takes the new value");
    next = cur;
    config_keep_restart_keys(&next, &cur, kept, sizeof kept);
    is_str(kept, "", "nothing named when nothing changed");
}

/* Every key of every table: its value round-trips through its spelling;
 * a live key is accepted as a live change and a reload or restart key is
 * refused with what changes it; choice names map to their values and back;
 * a reload keeps exactly the restart keys. */
static void test_table(void)
{
    struct config cfg, next;
    char err[CONFIG_ERR_MAX], again[CONFIG_ERR_MAX], kept[512], want_kept[512] = "";
    const struct config_key *k;
    size_t live = 0, restart = 0, n;
    config_defaults(&cfg, tables);
    for (n = 0; (k = config_key_at(&cfg, n)) != NULL; n++) {
        char value[CONFIG_ERR_MAX], desc[160];
        ok(config_find(&cfg, k->name) == k, k->name);
        is_int(config_get(&cfg, k->name, value, sizeof value), 0, "  has a value");
        next = cfg;
        is_int(config_set(&next, k->name, value, err), 0, "  its spelling sets it again");
        config_get(&next, k->name, again, sizeof again);
        is_str(again, value, "  to the same value");
        next = cfg;
        int rc = config_set_live(&next, k->name, value, err);
        if (k->when == CONFIG_LIVE) {
            live++;
            is_int(rc, 0, "  live: accepted as a live change");
        } else {
            snprintf(desc, sizeof desc, "  %s: refused as a live change, saying so",
                     k->when == CONFIG_RESTART ? "restart" : "reload");
            ok(rc == -1 && strstr(err, k->when == CONFIG_RESTART ? "restart" : "reload (SIGHUP)") &&
                   strstr(err, k->name) == err,
               desc);
        }
        for (const struct config_choice *ch = k->choices; ch != NULL && ch->name != NULL; ch++) {
            /* An address key's words are kept as text ("unix:" is unix:/PATH). */
            bool text = k->type == CONFIG_ADDR;
            const char *word =
                text && strcmp(ch->name, "unix:") == 0 ? "unix:/run/u.sock" : ch->name;
            next = cfg;
            snprintf(desc, sizeof desc, "  choice %s round-trips", word);
            ok(config_set(&next, k->name, word, err) == 0 &&
                   (text || *(const unsigned *)field_of(
                                &next, find_ref(&next, k->name, strlen(k->name))) == ch->value) &&
                   strcmp(value_of(&next, k->name), word) == 0,
               desc);
        }
        if (k->when == CONFIG_RESTART) {
            restart++;
            snprintf(want_kept + strlen(want_kept), sizeof want_kept - strlen(want_kept), "%s%s",
                     want_kept[0] ? " " : "", k->name);
        }
    }
    ok(n > 30 && live >= 7 && restart == 5, "the table has every key, 7 live and 5 restart ones");
    is_int(config_key_at(&cfg, n), 0, "nothing past the last key");
    ok(config_find(&cfg, "gzip_types") != NULL && config_find(&cfg, "admin") != NULL,
       "modules' keys are found with the core's");
    is_int(config_set_live(&cfg, "no_such_key", "1", err), -1, "an unknown key is refused live");
    /* A reload that changes every key keeps the restart ones, and names them. */
    next = cfg;
    config_set(&next, "listen", "127.0.0.1:9", err);
    config_set(&next, "admin_listen", "unix:/run/u.sock", err);
    config_set(&next, "root", "/elsewhere", err);
    config_set(&next, "threads", "9", err);
    config_set(&next, "workers", "7", err);
    config_set(&next, "gzip_types", "text/plain", err);
    config_keep_restart_keys(&next, &cfg, kept, sizeof kept);
    is_str(kept, want_kept, "a reload keeps exactly the restart keys");
    is_str(value_of(&next, "gzip_types"), "text/plain", "  and takes a module's key");
}

/* A key's value as a number, read through its row (what /stats' setting
 * figures show), and --keys picked from the command line. */
static void test_number_and_keys(void)
{
    static struct config cfg;
    char err[CONFIG_ERR_MAX];
    enum config_action action;
    uint64_t v = 99;
    config_defaults(&cfg, tables);
    ok(config_number(&cfg, "threads", &v) == 0 && v == 4, "config_number: threads is 4");
    ok(config_number(&cfg, "partition_min", &v) == 0 && v == 65536, "  partition_min is 64k");
    ok(config_number(&cfg, "partition", &v) == 0 && v == CONFIG_AUTO_SIZE, "  partition is auto");
    ok(config_number(&cfg, "admin", &v) == 0 && v == 0, "  a module's switch: admin is off");
    ok(config_number(&cfg, "scheduler", &v) == 0, "  a choice has its value");
    ok(config_number(&cfg, "emulate_disk", &v) == -1, "  emulate_disk has none (its text does)");
    ok(config_number(&cfg, "nope", &v) == -1, "  nor a key that does not exist");
    char *argv[] = {"unclog", "--keys", NULL};
    is_int(config_apply_cli(&cfg, 2, argv, &action, err), 0, "--keys parses");
    is_int(action, CONFIG_KEYS, "  and asks for the keys");
}

int main(void)
{
    server_config_tables(handler_modules, tables);
    test_number_and_keys();
    test_sizes();
    test_listen();
    test_defaults_and_set();
    test_files();
    test_spellings();
    test_cli();
    test_workers_and_reload();
    test_table();
    return tap_done();
}
