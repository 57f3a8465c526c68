#ifndef UNCLOG_HANDLERS_H
#define UNCLOG_HANDLERS_H

#include "server/module.h"

/* Every handler module, NULL-terminated, in route-matching order. */
extern const struct module *const handler_modules[];

#endif
