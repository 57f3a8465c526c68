#ifndef UNCLOG_CONFIG_INTERNAL_H
#define UNCLOG_CONFIG_INTERNAL_H

/* What the files of the configuration share: config.c (the tables, the
 * file and the command line) and config_value.c (each type's values). No
 * other file includes this one. */

#include <stddef.h>

/* server/base/config.h's, not included here: config.c includes this file,
 * and an include back would make a circle. */
struct config_key;

/* Writes a message in ERR (CONFIG_ERR_MAX bytes), as printf would. */
void config__fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets FIELD, the field of key K, from TEXT. Returns 0, or -1 with a
 * message without the key's name in ERR (CONFIG_ERR_MAX bytes) when TEXT
 * is not a value of K. */
int config__set_field(char *field, const struct config_key *k, const char *text, char *err);

/* Writes FIELD, the field of key K, to BUF as a config file spells it. */
void config__get_field(const char *field, const struct config_key *k, char *buf, size_t len);

#endif
