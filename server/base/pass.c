#include "server/base/pass.h"

#include "server/base/util.h"

static bool any_waiting(const struct pass *p)
{
    for (const struct pass_sub *s = p->subs; s != NULL; s = s->next) {
        if (s->waiting != NULL && s->waiting(s))
            return true;
    }
    return false;
}

static void end_pass(struct pass *p)
{
    for (struct pass_sub *s = p->subs; s != NULL; s = s->next) {
        if (s->end != NULL)
            s->end(s);
    }
    p->ended++;
}

/* After each poll. */
static void on_check(uv_check_t *check)
{
    struct pass *p = container_of(check, struct pass, check);
    for (struct pass_sub *s = p->subs; s != NULL; s = s->next) {
        if (s->begin != NULL)
            s->begin(s);
    }
}

/* Before the prepare, while work waits: what waits runs, and the poll that
 * follows does not block unless nothing waits any more. */
static void on_idle(uv_idle_t *idle)
{
    struct pass *p = container_of(idle, struct pass, idle);
    for (struct pass_sub *s = p->subs; s != NULL; s = s->next) {
        if (s->run != NULL && s->waiting != NULL && s->waiting(s))
            s->run(s);
    }
    if (!any_waiting(p))
        uv_idle_stop(idle);
}

/* Before the poll, which may wait for a client's next request. */
static void on_prepare(uv_prepare_t *prepare)
{
    end_pass(container_of(prepare, struct pass, prepare));
}

void pass_init(struct pass *p, uv_loop_t *loop)
{
    *p = (struct pass){0};
    uv_check_init(loop, &p->check); /* cannot fail */
    uv_idle_init(loop, &p->idle);
    uv_prepare_init(loop, &p->prepare);
    uv_unref((uv_handle_t *)&p->check);
    uv_unref((uv_handle_t *)&p->idle);
    uv_unref((uv_handle_t *)&p->prepare);
    uv_check_start(&p->check, on_check);
    uv_prepare_start(&p->prepare, on_prepare);
}

void pass_subscribe(struct pass *p, struct pass_sub *sub)
{
    struct pass_sub **at = &p->subs;
    while (*at != NULL)
        at = &(*at)->next;
    sub->next = NULL;
    *at = sub;
}

void pass_unsubscribe(struct pass *p, struct pass_sub *sub)
{
    for (struct pass_sub **at = &p->subs; *at != NULL; at = &(*at)->next) {
        if (*at == sub) {
            *at = sub->next;
            sub->next = NULL;
            return;
        }
    }
}

void pass_wake(struct pass *p)
{
    if (!p->closing)
        uv_idle_start(&p->idle, on_idle); /* nothing when it runs */
}

uint64_t pass_now(struct pass *p)
{
    uint64_t now = uv_now(p->prepare.loop);
    if (now != p->clock_ms) {
        p->clock_ms = now;
        end_pass(p);
    }
    return p->ended;
}

bool pass_new(struct pass *p, uint64_t *seen)
{
    if (p->closing)
        return true; /* the prepare handle ends no more passes */
    uint64_t now = pass_now(p);
    if (*seen == now)
        return false;
    *seen = now;
    return true;
}

void pass_close(struct pass *p)
{
    if (p->closing)
        return;
    p->closing = true;
    uv_close((uv_handle_t *)&p->check, NULL);
    uv_close((uv_handle_t *)&p->idle, NULL);
    uv_close((uv_handle_t *)&p->prepare, NULL);
}
