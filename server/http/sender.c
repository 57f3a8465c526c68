/* The sender: the loop's response writes, by client, a pass at a time. */
#include "server/http/sender.h"

#include "server/base/snapshot.h"
#include "server/base/util.h"

/* A pass begins after each poll: the writes that wait get theirs, as far
 * as it goes. */
static void sender_begin(struct pass_sub *sub)
{
    struct sender *snd = container_of(sub, struct sender, sub);
    share_new_pass(&snd->share);
    struct share_item *item;
    while ((item = share_next(&snd->share)) != NULL) {
        struct sender_wait *t = container_of(item, struct sender_wait, item);
        t->go(t);
    }
}

static bool sender_waiting(const struct pass_sub *sub)
{
    return share_waiting(&container_of(sub, const struct sender, sub)->share);
}

/* A write that waits keeps the loop from blocking until its turn comes. */
bool sender_admit(struct sender *snd, struct sender_wait *t, uint64_t client, size_t bytes)
{
    t->item.client = client;
    t->item.bytes = bytes;
    bool now = share_admit(&snd->share, &t->item);
    if (!now)
        pass_wake(snd->pass);
    return now;
}

void sender_drop(struct sender *snd, struct sender_wait *t)
{
    share_remove(&snd->share, &t->item);
}

void sender_count_whole(struct sender *snd)
{
    snd->whole_at_once++;
}

void sender_init(struct sender *snd, struct pass *pass, size_t pass_bytes)
{
    *snd = (struct sender){
        .sub = {.begin = sender_begin, .waiting = sender_waiting},
        .pass = pass,
    };
    share_init(&snd->share, pass_bytes);
    pass_subscribe(pass, &snd->sub);
}

void sender_set_pass_bytes(struct sender *snd, size_t pass_bytes)
{
    share_set_pass_bytes(&snd->share, pass_bytes);
}

static const struct snap_def send_turn_def = {
    .key = "turn_bytes",
    .metric = "unclog_send_turn_bytes",
    .help = "Bytes the loop hands the kernel per pass before the writes that wait take turns by "
            "client (send_turn).",
    .merge = SNAP_SAME};
static const struct snap_def send_at_once_def = {
    .key = "at_once",
    .metric = "unclog_send_writes_at_once_total",
    .kind = SNAP_COUNTER,
    .help =
        "Response writes handed to the kernel as they came: nothing waited, the pass had room."};
static const struct snap_def send_whole_def = {
    .key = "whole_at_once",
    .metric = "unclog_send_whole_at_once_total",
    .kind = SNAP_COUNTER,
    .help = "Answers from memory that the kernel took whole as the request was dispatched: no "
            "write request, no pause in reading the connection."};
static const struct snap_def send_deferred_def = {
    .key = "deferred",
    .metric = "unclog_send_writes_deferred_total",
    .kind = SNAP_COUNTER,
    .help = "Response writes that waited for a later pass of the loop, in their client's queue."};
static const struct snap_def send_contended_def = {
    .key = "contended",
    .metric = "unclog_send_writes_contended_total",
    .kind = SNAP_COUNTER,
    .help = "Waiting writes handed out while two clients or more had writes waiting."};
static const struct snap_def send_turns_def = {
    .key = "turns",
    .metric = "unclog_send_turns_total",
    .kind = SNAP_COUNTER,
    .help = "Passes of the loop that began with writes waiting."};
static const struct snap_def send_waiting_def = {
    .key = "waiting_clients",
    .metric = "unclog_send_waiting_clients",
    .help = "Clients (hash buckets) with writes waiting now."};
static const struct snap_def send_clients_max_def = {
    .key = "waiting_clients_max",
    .metric = "unclog_send_waiting_clients_max",
    .help = "Most clients (hash buckets) with writes waiting at once: a client's connections "
            "wait in one queue.",
    .merge = SNAP_MAX};
static const struct snap_def send_lag_def = {
    .key = "lag_max",
    .metric = "unclog_send_lag_max_bytes",
    .help = "Most bytes one client with writes waiting was handed beyond another waiting one, "
            "counted from when both waited: at most a quantum (64 KiB) and one write.",
    .merge = SNAP_MAX};

void sender_stats(const struct sender *snd, struct snapshot *s)
{
    const struct share *sh = &snd->share;
    snap_open(s, "send", NULL);
    snap_add(s, &send_turn_def, sh->pass_bytes);
    snap_add(s, &send_at_once_def, sh->counters.at_once);
    snap_add(s, &send_whole_def, snd->whole_at_once);
    snap_add(s, &send_deferred_def, sh->counters.deferred);
    snap_add(s, &send_contended_def, sh->counters.contended);
    snap_add(s, &send_turns_def, sh->counters.passes);
    snap_add(s, &send_waiting_def, sh->queue.active);
    snap_add(s, &send_clients_max_def, sh->counters.clients_max);
    snap_add(s, &send_lag_def, sh->counters.lag_max);
    snap_close(s);
}
