#ifndef UNCLOG_ROUTES_H
#define UNCLOG_ROUTES_H

#include "server/conn.h"

/* The route for TARGET's path (query ignored): an exact endpoint, or the
 * static-file fallback. Never NULL. */
const struct route *route_find(const char *target);

#endif
