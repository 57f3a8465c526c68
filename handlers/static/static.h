#ifndef UNCLOG_STATIC_H
#define UNCLOG_STATIC_H

#include "server/http/conn.h"

#include "server/module.h"

/* GET/HEAD of a file under the root, the fallback route: the path is
 * resolved on the loop, the file opened and fstat'ed in one threadpool job,
 * then streamed by the pump. The module's state is the small-file cache. */
extern const struct module static_module;

#endif
