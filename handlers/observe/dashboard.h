#ifndef UNCLOG_DASHBOARD_H
#define UNCLOG_DASHBOARD_H

#include <stddef.h>

#include "server/module.h"

/* The live dashboard, built into the binary, whatever the root: GET and
 * HEAD of DASHBOARD_PATH answer the page (static/dashboard.html as it was
 * when the server was built), which polls /stats and switches /settings.
 * A dot directory named after the server, so that the one path it claims
 * is not a file a site has by chance; every other target under /.unclog/,
 * and /dashboard.html, stay the root's files. */
extern const struct module dashboard_module;

#define DASHBOARD_PATH "/.unclog/dashboard"

/* The page's bytes, and the same gzipped (sent to a client that accepts
 * gzip): build/gen/dashboard_page.c, which the Makefile generates from
 * static/dashboard.html. */
extern const unsigned char dashboard_page[], dashboard_page_gz[];
extern const size_t dashboard_page_len, dashboard_page_gz_len;

#endif
