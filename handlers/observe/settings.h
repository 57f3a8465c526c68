#ifndef UNCLOG_SETTINGS_H
#define UNCLOG_SETTINGS_H

#include "server/module.h"

/* GET /settings: the live settings as JSON. POST /settings with a
 * form-urlencoded body (partition=64k&scheduler=fifo) changes them, all or
 * nothing, validated as the config file is, and answers the new JSON.
 * Only with `admin = on` and only for loopback clients (403 otherwise):
 * anyone who can change the partition can clog the server on purpose, so
 * the switch is for the person at the machine (a talk, a lab). */
extern const struct module settings_module;

struct buf;
struct server;

/* Appends {"KEY":UPTIME_MS,...}: when each live setting last changed. */
void settings_changes_json(const struct server *srv, struct buf *o);

#endif
