#ifndef UNCLOG_STATIC_H
#define UNCLOG_STATIC_H

#include "server/conn.h"

/* GET/HEAD of a file under the root: the path is resolved on the loop, the
 * file opened and fstat'ed in one threadpool job, then streamed by the pump. */
int static_on_request(struct conn *c, const struct request *req);

#endif
