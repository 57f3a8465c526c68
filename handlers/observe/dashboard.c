#include "handlers/observe/dashboard.h"

#include "handlers/deflate.h"
#include "handlers/observe/stats.h"

/* The page shows what /stats does; it is on the admin door only, whose
 * clients see everything (stats_view). */
static int dashboard_on_request(struct conn *c, const struct request *req)
{
    if (stats_view(c) == STATS_REFUSED)
        return stats_refuse(c);
    bool gz = gzip_accepted(req->headers[HEADER_ACCEPT_ENCODING]);
    conn_head_start(c, 200);
    /* no-cache: a browser asks again, so a rebuilt server shows its own page. */
    conn_head_add(c,
                  "Content-Type: text/html; charset=utf-8\r\nCache-Control: no-cache\r\n"
                  "Vary: Accept-Encoding\r\n%s",
                  gz ? "Content-Encoding: gzip\r\n" : "");
    if (gz)
        conn_send_body(c, (const char *)dashboard_page_gz, dashboard_page_gz_len);
    else
        conn_send_body(c, (const char *)dashboard_page, dashboard_page_len);
    return 0;
}

/* An instrument, as /stats is: counted, kept out of the latency figures;
 * on the admin door only, as /settings, which its controls use. */
static const struct route dashboard_routes[] = {
    {.path = DASHBOARD_PATH,
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = dashboard_on_request,
     .instrument = true,
     .door = ROUTE_ADMIN},
    {0},
};

const struct module dashboard_module = {
    .name = "dashboard", .routes = dashboard_routes, .page = DASHBOARD_PATH};
