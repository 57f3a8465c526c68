/* The configuration's values: each type's parser (sizes, times, switches,
 * choices, prefixes, addresses, emulate_disk) and its spelling back, for
 * one key's field. config.c finds the keys and their fields. */
#include "server/base/config.h"
#include "server/base/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <uv.h>

void config__fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CONFIG_ERR_MAX, fmt, ap);
    va_end(ap);
}

int config_parse_size(const char *text, bool allow_whole, size_t *out)
{
    if (allow_whole && strcmp(text, "whole") == 0) {
        *out = CONFIG_WHOLE;
        return 0;
    }
    if (!isdigit((unsigned char)text[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    if (shift != 0)
        end++;
    if (*end != '\0' || n == 0)
        return -EINVAL;
    if (n > (SIZE_MAX >> 1) >> shift)
        return -ERANGE;
    *out = (size_t)n << shift;
    return 0;
}

void config_format_size(size_t size, char *buf, size_t len)
{
    if (size == CONFIG_WHOLE)
        snprintf(buf, len, "whole");
    else if (size == CONFIG_AUTO_SIZE)
        snprintf(buf, len, "auto");
    else if (size >= MIB && size % MIB == 0)
        snprintf(buf, len, "%zum", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, len, "%zuk", size >> 10);
    else
        snprintf(buf, len, "%zu", size);
}

/* Parses "250ms", "250" (milliseconds too) or "10s" into *MS. */
static int parse_ms(const char *text, size_t *ms)
{
    if (!isdigit((unsigned char)text[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    unsigned long long scale = strcmp(end, "s") == 0 ? 1000 : 1;
    if (errno == ERANGE || n > 1000000000)
        return -ERANGE;
    if (*end != '\0' && strcmp(end, "ms") != 0 && strcmp(end, "s") != 0)
        return -EINVAL;
    *ms = (size_t)(n * scale);
    return 0;
}

/* The word K's empty list is spelled with: its one choice, else "loopback". */
static const char *addrs_none(const struct config_key *k)
{
    return k->choices != NULL ? k->choices[0].name : "loopback";
}

/* NONE (no prefix), or up to CONFIG_ADDRS_MAX address prefixes separated
 * by commas (spaces around each allowed): "192.0.2.0/24,2001:db8::7". */
static int set_addrs(struct config_addrs *a, const char *text, const char *none,
                     char err[CONFIG_ERR_MAX])
{
    struct config_addrs out = {0};
    if (strcmp(text, none) == 0) {
        *a = out;
        return 0;
    }
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        const char *item = skip_space(p), *end = p + len;
        while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (out.n == CONFIG_ADDRS_MAX) {
            config__fail(err, "'%s': at most %d prefixes", text, CONFIG_ADDRS_MAX);
            return -1;
        }
        if (addr_prefix_parse(item, (size_t)(end - item), &out.prefix[out.n++]) != 0) {
            config__fail(
                err,
                "'%.*s' is not an address or ADDRESS/LENGTH (no bits set past the length), "
                "nor %s",
                (int)(end - item), item, none);
            return -1;
        }
        p += len;
        if (*p == '\0')
            break;
    }
    *a = out;
    return 0;
}

static void get_addrs(const struct config_addrs *a, const char *none, char *buf, size_t len)
{
    struct buf b;
    buf_init_fixed(&b, buf, len);
    buf_printf(&b, "%s", a->n == 0 ? none : "");
    for (unsigned i = 0; i < a->n; i++) {
        char text[64];
        addr_prefix_format(&a->prefix[i], text, sizeof text);
        buf_printf(&b, "%s%s", i > 0 ? "," : "", text);
    }
}

/* "V4,V6": two prefix lengths, IPv4's (0 to 32) then IPv6's (0 to 128). */
static int set_prefix(const struct config_key *k, struct config_prefix *p, const char *text,
                      char err[CONFIG_ERR_MAX])
{
    char *end = NULL;
    unsigned long v4 = 33, v6 = 129;
    if (isdigit((unsigned char)text[0]))
        v4 = strtoul(text, &end, 10);
    if (end != NULL && *end == ',' && isdigit((unsigned char)end[1]))
        v6 = strtoul(end + 1, &end, 10);
    if (end == NULL || *end != '\0' || v4 > 32 || v6 > 128) {
        config__fail(err, "'%s' is not V4,V6 (prefix lengths: 0 to 32 for IPv4, 0 to 128 for IPv6)",
                     text);
        return -1;
    }
    *p = (struct config_prefix){.v4 = (unsigned)v4, .v6 = (unsigned)v6};
    return 0;
}

/* "off", or "LATENCY[,RATE]": a time (ms or s) and a size per second. */
static int set_disk(const struct config_key *k, struct disk_emulation *d, const char *text,
                    char err[CONFIG_ERR_MAX])
{
    if (strcmp(text, "off") == 0) {
        *d = (struct disk_emulation){0};
        return 0;
    }
    char latency[32];
    const char *comma = strchr(text, ',');
    size_t len = comma ? (size_t)(comma - text) : strlen(text);
    size_t ms = 0, rate = 0;
    int rc = len < sizeof latency ? 0 : -EINVAL;
    if (rc == 0) {
        memcpy(latency, text, len);
        latency[len] = '\0';
        rc = parse_ms(latency, &ms);
    }
    if (rc == 0 && (ms > k->max || (comma == NULL && ms == 0)))
        rc = -ERANGE;
    if (rc == 0 && comma != NULL)
        rc = config_parse_size(comma + 1, false, &rate);
    if (rc != 0) {
        config__fail(err,
                     "'%s' is not off or LATENCY[,RATE] (a time up to %llus, a size per second)",
                     text, k->max / 1000);
        return -1;
    }
    *d = (struct disk_emulation){.latency_ms = (unsigned)ms, .bytes_per_s = rate};
    return 0;
}

int config_parse_addr(const char *text, struct sockaddr_storage *addr)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL)
        return -EINVAL;
    size_t digits = strspn(colon + 1, "0123456789");
    if (digits == 0 || digits > 5 || colon[1 + digits] != '\0')
        return -EINVAL;
    int port = atoi(colon + 1);
    size_t len = (size_t)(colon - text);
    /* An IPv6 address has colons of its own: only in brackets. */
    bool bracketed = len >= 2 && text[0] == '[' && colon[-1] == ']';
    if (bracketed) {
        text++;
        len -= 2;
    }
    if (port > 65535 || len == 0 || len >= sizeof host)
        return -EINVAL;
    memcpy(host, text, len);
    host[len] = '\0';
    memset(addr, 0, sizeof *addr);
    if (bracketed)
        return uv_ip6_addr(host, port, (struct sockaddr_in6 *)addr) == 0 ? 0 : -EINVAL;
    if (strcasecmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    return uv_ip4_addr(host, port, (struct sockaddr_in *)addr) == 0 ? 0 : -EINVAL;
}

/* Whether TEXT is one of the words an address key K takes besides an
 * address (its choices: admin_listen's auto and off), or, when K takes
 * "unix:PATH", an absolute path short enough for a unix socket. */
static bool addr_word(const struct config_key *k, const char *text)
{
    for (const struct config_choice *c = k->choices; c->name != NULL; c++) {
        if (strcmp(c->name, "unix:") == 0 && strncmp(text, "unix:/", 6) == 0)
            return strlen(text + 5) < sizeof(((struct sockaddr_un *)0)->sun_path);
        if (strcmp(c->name, text) == 0)
            return true;
    }
    return false;
}

int config__set_field(char *field, const struct config_key *k, const char *text, char *err)
{
    size_t size;
    int rc;

    switch (k->type) {
    case CONFIG_STRING:
        if (text[0] == '\0' || strlen(text) >= k->field_size) {
            config__fail(err, "value must be 1 to %zu characters", k->field_size - 1);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    case CONFIG_UINT_AUTO:
        if (strcmp(text, "auto") == 0) {
            *(unsigned *)(void *)field = CONFIG_AUTO;
            return 0;
        }
        /* fall through */
    case CONFIG_UINT: {
        char *end;
        errno = 0;
        unsigned long long n = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < k->min ||
            n > k->max) {
            config__fail(err, "'%s' is not a whole number from %llu to %llu%s", text, k->min,
                         k->max, k->type == CONFIG_UINT_AUTO ? ", or auto" : "");
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)n;
        return 0;
    }
    case CONFIG_BOOL:
        /* The spellings other servers' files use too. */
        if (strcmp(text, "on") == 0 || strcmp(text, "yes") == 0 || strcmp(text, "true") == 0) {
            *(bool *)(void *)field = true;
            return 0;
        }
        if (strcmp(text, "off") == 0 || strcmp(text, "no") == 0 || strcmp(text, "false") == 0) {
            *(bool *)(void *)field = false;
            return 0;
        }
        config__fail(err, "'%s' is neither on nor off (nor yes/no, true/false)", text);
        return -1;
    case CONFIG_PREFIX:
        return set_prefix(k, (struct config_prefix *)(void *)field, text, err);
    case CONFIG_ADDRS:
        return set_addrs((struct config_addrs *)(void *)field, text, addrs_none(k), err);
    case CONFIG_CHOICE:
        for (const struct config_choice *ch = k->choices; ch->name != NULL; ch++) {
            if (strcmp(ch->name, text) == 0) {
                *(unsigned *)(void *)field = ch->value;
                return 0;
            }
        }
        config__fail(err, "'%s' is not one of %s", text, k->arg);
        return -1;
    case CONFIG_MS:
        rc = parse_ms(text, &size);
        if (rc == 0 && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            config__fail(err, "'%s' is not a time from %llums to %llus (ms, or s for seconds)",
                         text, k->min, k->max / 1000);
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)size;
        return 0;
    case CONFIG_SIZE:
    case CONFIG_PARTITION:
    case CONFIG_PARTITION_AUTO:
        if (k->type == CONFIG_PARTITION_AUTO && strcmp(text, "auto") == 0) {
            *(size_t *)(void *)field = CONFIG_AUTO_SIZE;
            return 0;
        }
        /* A size key whose placeholder offers "off" stores 0 for it. */
        if (k->type == CONFIG_SIZE && strcmp(text, "off") == 0 && strstr(k->arg, "|off") != NULL) {
            *(size_t *)(void *)field = 0;
            return 0;
        }
        rc = config_parse_size(text, k->type != CONFIG_SIZE, &size);
        if (rc == 0 && size != CONFIG_WHOLE && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            config__fail(err, "'%s' is not a size from %llu to %llum (k and m suffixes%s)", text,
                         k->min, k->max >> 20,
                         k->type == CONFIG_PARTITION        ? ", or whole"
                         : k->type == CONFIG_PARTITION_AUTO ? ", whole or auto"
                                                            : "");
            return -1;
        }
        *(size_t *)(void *)field = size;
        return 0;
    case CONFIG_DISK:
        return set_disk(k, (struct disk_emulation *)(void *)field, text, err);
    case CONFIG_ADDR: {
        struct sockaddr_storage addr;
        if (strlen(text) < k->field_size && k->choices != NULL && addr_word(k, text)) {
            memcpy(field, text, strlen(text) + 1);
            return 0;
        }
        if (strlen(text) >= k->field_size || config_parse_addr(text, &addr) != 0) {
            if (k->choices != NULL) {
                config__fail(
                    err,
                    "'%s' is not %s (ADDR:PORT as listen takes it; unix: then an absolute path)",
                    text, k->arg);
                return -1;
            }
            config__fail(
                err,
                "'%s' is not ADDR:PORT, [ADDR6]:PORT or localhost:PORT (IP addresses, no host "
                "names; localhost is 127.0.0.1; port 0 to 65535)",
                text);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
    }
    abort();
}

void config__get_field(const char *field, const struct config_key *k, char *buf, size_t len)
{
    bool is_unsigned = k->type == CONFIG_UINT || k->type == CONFIG_UINT_AUTO ||
                       k->type == CONFIG_MS || k->type == CONFIG_CHOICE;
    unsigned u = is_unsigned ? *(const unsigned *)(const void *)field : 0;
    switch (k->type) {
    case CONFIG_STRING:
    case CONFIG_ADDR:
        snprintf(buf, len, "%s", field);
        break;
    case CONFIG_UINT_AUTO:
    case CONFIG_UINT:
        if (k->type == CONFIG_UINT_AUTO && u == CONFIG_AUTO)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%u", u);
        break;
    case CONFIG_SIZE:
    case CONFIG_PARTITION:
    case CONFIG_PARTITION_AUTO:
        if (*(const size_t *)(const void *)field == 0)
            snprintf(buf, len, "off");
        else
            config_format_size(*(const size_t *)(const void *)field, buf, len);
        break;
    case CONFIG_BOOL:
        snprintf(buf, len, "%s", *(const bool *)field ? "on" : "off");
        break;
    case CONFIG_PREFIX: {
        const struct config_prefix *p = (const struct config_prefix *)(const void *)field;
        snprintf(buf, len, "%u,%u", p->v4, p->v6);
        break;
    }
    case CONFIG_ADDRS:
        get_addrs((const struct config_addrs *)(const void *)field, addrs_none(k), buf, len);
        break;
    case CONFIG_MS:
        snprintf(buf, len, "%ums", u);
        break;
    case CONFIG_CHOICE: {
        const struct config_choice *ch = k->choices;
        while (ch->name != NULL && ch->value != u)
            ch++;
        snprintf(buf, len, "%s", ch->name != NULL ? ch->name : "?");
        break;
    }
    case CONFIG_DISK: {
        const struct disk_emulation *d = (const struct disk_emulation *)(const void *)field;
        char rate[32] = "";
        if (d->bytes_per_s > 0)
            config_format_size(d->bytes_per_s, rate, sizeof rate);
        if (d->latency_ms == 0 && d->bytes_per_s == 0)
            snprintf(buf, len, "off");
        else
            snprintf(buf, len, "%ums%s%s", d->latency_ms, rate[0] ? "," : "", rate);
        break;
    }
    }
}
