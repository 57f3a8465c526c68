#ifndef UNCLOG_FILES_H
#define UNCLOG_FILES_H

#include "handlers/files/files_config.h"
#include "server/http/conn.h"
#include "server/module.h"

/* GET/HEAD of a file under the root, the fallback route: the path is
 * resolved on the loop, the file opened and fstat'ed in one threadpool job,
 * then streamed by the pump. The module's state is the small-file cache. */
extern const struct module files_module;

#endif
