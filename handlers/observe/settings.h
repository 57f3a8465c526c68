#ifndef UNCLOG_SETTINGS_H
#define UNCLOG_SETTINGS_H

#include <stdbool.h>

#include "server/module.h"

/* GET /settings: the live settings as JSON. POST /settings with a
 * form-urlencoded body (partition=64k&scheduler=fifo) changes them, all or
 * nothing, validated as the config file is, and answers the new JSON.
 * Only with `admin = on`, only on the admin door (admin_listen: the public
 * listener has no /settings), and only from the server's own page
 * (settings_refusal); 403 otherwise: anyone who can
 * change the partition can clog the server on purpose, so the switch is
 * for the person at the machine (a talk, a lab), not for whatever page
 * their browser has open. */
extern const struct module settings_module;

/* The module's keys (settings_module.config fills it). */
struct settings_config {
    bool admin; /* /settings answers (on the admin door) */
};

struct server;

/* Whether REQ, on the admin door, comes from the server's own page or
 * from no browser at all: NULL, or the rule it breaks, for the 403 body.
 * The speaker's browser is itself a loopback client, so a page of any
 * other origin must not reach the switch (cross-site request forgery, DNS
 * rebinding); and a reverse proxy or tunnel on the machine makes any
 * client a loopback one. The rules: no proxy header (Forwarded,
 * X-Forwarded-For, X-Real-IP, Via); an absolute-form target's authority
 * and the Host are localhost, 127.x.y.z or [::1], with or without a port;
 * an Origin is exactly http:// and that Host (not null); a Sec-Fetch-Site
 * is same-origin or none; a POST is application/x-www-form-urlencoded.
 * Reads REQ only. */
const char *settings_refusal(const struct request *req);

/* Whether admin = on: /settings answers (on the admin door). */
bool settings_admin(const struct server *srv);

#endif
