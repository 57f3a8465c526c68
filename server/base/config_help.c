/* The text generated from the keys' tables: --help (which the man page is
 * made from, man/mkman.sh) and --keys. */
#include "server/base/config.h"

#include <stdlib.h>
#include <string.h>

/* What --help (and so the man page) says of how a running server takes a
 * new value. */
static const char *when_text(enum config_when when)
{
    switch (when) {
    case CONFIG_RESTART:
        return "; restart only: a reload keeps it";
    case CONFIG_RELOAD:
        return "";
    case CONFIG_LIVE:
        return "; live: POST /settings";
    }
    abort();
}

void config_print_keys(const struct config *cfg, FILE *out)
{
    static const char *const when[] = {
        [CONFIG_RESTART] = "restart", [CONFIG_RELOAD] = "reload", [CONFIG_LIVE] = "live"};
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++)
        fprintf(out, "%s\t%s\t%s\n", k->name, k->fallback, when[k->when]);
}

/* The head line of a key's --help entry: "      --gzip-partition SIZE|whole". */
static void key_spec(const struct config_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "      --%s %s", k->name, k->arg);
    for (char *p = buf + 8; *p != ' ' && *p != '\0'; p++) {
        if (*p == '_')
            *p = '-';
    }
}

#define USAGE_WIDTH  80 /* a terminal's columns: no line of --help is wider */
#define USAGE_INDENT 10 /* where a description's lines start */

/* Writes TEXT to OUT in lines of at most USAGE_WIDTH columns, the first
 * indented by FIRST, the others by REST, broken at spaces (a word longer
 * than a line stands alone on its own). */
static void wrap(FILE *out, const char *text, int first, int rest)
{
    int indent = first;
    while (*text != '\0') {
        int len = (int)strlen(text), cut = len, room = USAGE_WIDTH - indent;
        if (len > room) {
            cut = room;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = (int)strcspn(text, " ");
        }
        fprintf(out, "%*s%.*s\n", indent, "", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        indent = rest;
    }
}

/* One entry: HEAD on its line, then the description wrapped below it. */
static void entry(FILE *out, const char *head, const char *text)
{
    fprintf(out, "%s\n", head);
    wrap(out, text, USAGE_INDENT, USAGE_INDENT);
}

void config_usage(const struct config *cfg, FILE *out, const char *argv0)
{
    static const char *const last[][2] = {
        {"      --routes", "print every route (its path, then its methods), one a line, and exit"},
        {"      --job-classes", "print the threadpool's job classes, one a line, and exit"},
        {"      --keys", "print every configuration key, its default and when a change applies "
                         "(live, reload or restart), tab-separated, one a line, and exit"},
        {"  -h, --help", "print this text and exit"},
        {"  -V, --version", "print the version (with libuv's and zlib's) and exit"},
    };
    const struct config_key *k;
    char spec[128], text[2048];
    fprintf(out,
            "usage: %s [OPTIONS] [DIR]\n"
            "Serves DIR (or the configured root) over HTTP/1.1, reading files through the\n"
            "libuv threadpool in partitions. Every option with a value is also a key of\n"
            "the configuration file: --gzip-partition 64k is gzip_partition = 64k, or\n"
            "--gzip-partition=64k: the form for a value that starts with -.\n\n",
            argv0);
    entry(out, "  -c, --config FILE", "configuration file (default conf/unclog.conf if present)");
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        key_spec(k, spec, sizeof spec);
        snprintf(text, sizeof text, "%s (default %s%s)", k->help, k->fallback, when_text(k->when));
        entry(out, spec, text);
    }
    for (size_t i = 0; i < ARRAY_SIZE(last); i++)
        entry(out, last[i][0], last[i][1]);
    fputs("\nSignals:\n", out);
    wrap(out,
         "SIGTERM, SIGINT: stop gracefully (responses in progress get up to 5 s; a "
         "second signal closes everything at once).",
         2, 5);
    wrap(out,
         "SIGHUP: reload the configuration file (options still override it) and reopen "
         "the access log.",
         2, 5);
    fputs("\nExit status:\n", out);
    wrap(out, "0: stopped cleanly after a signal, or printed what was asked.", 2, 5);
    wrap(out,
         "1: could not start or run for a reason outside the configuration (the address "
         "in use, the root missing or not a directory, the log not writable).",
         2, 5);
    wrap(out, "2: a bad configuration file, key, value or option.", 2, 5);
}
