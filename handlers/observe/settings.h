#ifndef UNCLOG_SETTINGS_H
#define UNCLOG_SETTINGS_H

#include <stdbool.h>

#include "server/module.h"

/* GET /settings: the live settings as JSON. POST /settings with a
 * form-urlencoded body (partition=64k&scheduler=fifo) changes them, all or
 * nothing, validated as the config file is, and answers the new JSON.
 * Only with `admin = on` and only for loopback clients (403 otherwise):
 * anyone who can change the partition can clog the server on purpose, so
 * the switch is for the person at the machine (a talk, a lab). */
extern const struct module settings_module;

/* The module's keys (settings_module.config fills it). */
struct settings_config {
    bool admin; /* /settings answers loopback clients */
};

struct buf;
struct server;

/* Whether admin = on: /settings answers (loopback clients). */
bool settings_admin(const struct server *srv);

/* Appends {"KEY":UPTIME_MS,...}: when each live setting last changed. */
void settings_changes_json(const struct server *srv, struct buf *o);

#endif
