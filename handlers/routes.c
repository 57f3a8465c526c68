#include "handlers/routes.h"

#include <llhttp.h>
#include <string.h>

#include "handlers/gzip.h"
#include "handlers/static.h"
#include "handlers/stats.h"

#define BIT(m) (1ull << (m))

static const struct route routes[] = {
    {"/gzip", BIT(HTTP_POST), "POST", gzip_on_headers, gzip_on_body, gzip_on_request},
    {"/stats", BIT(HTTP_GET) | BIT(HTTP_HEAD), "GET, HEAD", NULL, NULL, stats_on_request},
    {NULL, BIT(HTTP_GET) | BIT(HTTP_HEAD), "GET, HEAD", NULL, NULL, static_on_request},
};

const struct route *route_find(const char *target)
{
    size_t len = strcspn(target, "?#");
    const struct route *r = routes;
    for (; r->path != NULL; r++) {
        if (strlen(r->path) == len && memcmp(r->path, target, len) == 0)
            break;
    }
    return r;
}
