/* The PROXY protocol's intake on a connection: a load balancer's header
 * (proxy_header.c parses it) moves the connection to the client it names;
 * and a header sent by a peer not entitled to one is told apart. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <string.h>

/* A load balancer's PROXY header names C's client, CLIENT (the balancer
 * itself for one that names none): the connection moves from the
 * balancer's place among the clients to its client's, and one that came at
 * max_connections is admitted now as a direct connection of its client
 * would be (clients_rejoin). Returns whether C is served: else it is
 * answered 503, or closes (no memory). */
static bool move_to_client(struct conn *c, const struct addr_prefix *client)
{
    /* At the limit is as a direct newcomer sees it: max_connections open
     * without C, which the server counts since its accept. */
    bool full = c->at_limit && *c->env->active > conn__cfg(c)->max_connections;
    c->at_limit = false;
    struct client_link *evict;
    enum clients_refusal why;
    int rc = clients_rejoin(c->env->clients, &c->client, c->client_id, client, full, &evict, &why);
    if (evict != NULL)
        conn_evict(evict);
    if (rc > 0)
        conn__refuse_at_limit(c, client, why);
    else if (rc < 0)
        conn__close(c, false); /* it counts for nobody */
    else
        conn__place(c);
    return rc == 0;
}

/* C's peer is a load balancer and its header is not whole yet: takes what
 * in[] holds of it. Returns whether the rest of in[] is to be parsed as
 * HTTP: false while more of the header is wanted (in[] spent), and when C
 * was refused and closes. */
bool conn__take_proxy_header(struct conn *c)
{
    size_t had = c->proxy_len, take = PROXY_HEADER_MAX - had;
    if (take > c->in_len)
        take = c->in_len;
    memcpy(c->proxy_in + had, c->in + c->in_off, take);
    c->proxy_len += take;
    struct proxy_header h;
    int n = proxy_header_parse(c->proxy_in, c->proxy_len, &h);
    if (n == 0) {
        c->in_len = 0; /* the parser refuses at PROXY_HEADER_MAX: there is room for more */
        return false;
    }
    if (n < 0) {
        c->env->proxy.malformed++;
        log_debug("proxy %s: not a PROXY header; closing", c->peer);
        conn__close(c, false);
        return false;
    }
    c->proxy_wait = false;
    c->proxy_len = 0; /* proxy_in[] now keeps the client's first bytes (conn__sniff_first) */
    c->in_off += (size_t)n - had;
    c->in_len -= (size_t)n - had;
    struct addr_prefix client;
    if (h.local) {
        /* No client named (a health check, or a client the balancer cannot
         * name, such as one on its unix socket): served, and counted as
         * the balancer's own connection, but with none of the balancer's
         * rights: who is behind it is unknown, so it is neither loopback
         * nor under stats_from. */
        c->env->proxy.local++;
        c->loopback = false;
        c->addr.family = 0;
        if (!c->at_limit)
            return true;
        conn__peer_client(c, &client);
        return move_to_client(c, &client);
    }
    c->env->proxy.clients++;
    conn__name_client(c, (const struct sockaddr *)&h.source, &client);
    return move_to_client(c, &client);
}

/* C's client (its peer, or the one a balancer's header named) sends no
 * header of its own: keeps the first bytes of its first request, to tell
 * one it sends anyway when its request fails to parse. */
void conn__sniff_first(struct conn *c)
{
    if (c->first_done || c->proxy_len >= PROXY_SNIFF)
        return;
    size_t take = PROXY_SNIFF - c->proxy_len;
    if (take > c->in_len)
        take = c->in_len;
    memcpy(c->proxy_in + c->proxy_len, c->in + c->in_off, take);
    c->proxy_len += take;
}

/* Whether C's failed first request began as a PROXY header, from a client
 * not entitled to send one (a peer not under proxy_protocol_from, or a
 * client behind a balancer, after the balancer's header): it is refused,
 * not answered. Judged on its first PROXY_SNIFF bytes (a header's fixed
 * part in either version), or fewer once they end or break a header,
 * never on how many happen to be in when its parse fails: a request such
 * as "PROXY TCP4" CR CR fails at its "X", and is answered (its CR breaks
 * the header) whether its first read held "PROX" or the whole line. */
int conn__sniff_verdict(const struct conn *c)
{
    if (c->first_done || c->proxy_len == 0)
        return -1;
    struct proxy_header h;
    int n = proxy_header_parse(c->proxy_in, c->proxy_len, &h);
    if (n != 0)
        return n > 0 ? 1 : -1;
    return c->proxy_len >= PROXY_SNIFF ? 1 : 0;
}

void conn__close_unlisted(struct conn *c)
{
    c->env->proxy.unlisted++;
    log_debug("proxy %s: a PROXY header from a peer not under proxy_protocol_from; closing",
              c->peer);
    conn__close(c, false);
}
