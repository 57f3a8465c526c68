/* The control plane's region (server/workers/control.c): what a publish writes and
 * when the generation moves (a POST's keys only, a reload's differences
 * only), the slots' states, the wake-ups, and the robust mutex: a process
 * that dies holding it does not stop the others. */
#include "../../server/workers/control.c"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "server/server.h"
#include "tests/tap.h"

static const struct config_table *tables[] = {&server_config_table, NULL};

/* The index of key NAME in a view (config_key_at's). */
static size_t key(const struct config *cfg, const char *name)
{
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        if (strcmp(k->name, name) == 0)
            return i;
    }
    abort();
}

static struct config with(const struct config *cfg, const char *name, const char *value)
{
    struct config next = *cfg;
    char err[CONFIG_ERR_MAX];
    if (config_set_live(&next, name, value, err) != 0)
        abort();
    return next;
}

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

static void test_publish(struct control *ctl, const struct config *cfg)
{
    struct control_view v;
    size_t part = key(cfg, "partition"), sched = key(cfg, "scheduler");
    control_read(ctl, &v);
    is_int(v.generation, 1, "a new region is at generation 1");
    is_str(v.value[part], "auto", "with the configuration's live values");
    ok(!v.changed[part], "none changed yet");

    struct config next = with(cfg, "partition", "4k");
    ok(control_publish(ctl, &next, cfg, 500, &v), "a POST's change moves the generation");
    is_int(v.generation, 2, "by one");
    is_str(v.value[part], "4k", "the new value is shared");
    ok(v.changed[part] && v.changed_ms[part] == 500, "with when it changed");
    ok(!control_publish(ctl, &next, cfg, 600, &v), "the same change again: no move");
    is_int(v.changed_ms[part], 500, "and its time is kept");

    /* A worker that has not applied generation 2 yet still runs auto. */
    next = with(cfg, "scheduler", "fifo");
    ok(control_publish(ctl, &next, cfg, 700, &v), "a stale worker's POST of another key");
    is_str(v.value[sched], "fifo", "publishes its key");
    is_str(v.value[part], "4k", "and not the partition it never changed");

    ok(control_publish(ctl, &next, NULL, 800, &v), "a reload publishes what differs");
    is_str(v.value[part], "auto", "the file's partition wins over the POST's");
    is_int(v.generation, 4, "the generation moves once");
    ok(!control_publish(ctl, &next, NULL, 900, &v), "the same file reloaded by another worker");
    is_int(v.generation, 4, "does not move it again");
}

static void test_slots(struct control *ctl)
{
    struct control_view v;
    is_int(control_worker_state(ctl, 1, 1), -1, "a slot nobody joined is not running");
    is_int(control_life(ctl, 1), 0, "it has no life");
    uint64_t first = control_join(ctl, 1, &v);
    ok(first != 0 && control_life(ctl, 1) == first,
       "a worker that joins runs, in a life of its own");
    is_int(control_worker_state(ctl, 1, 1), 0, "a worker that joined has applied nothing yet");
    control_applied(ctl, 1, v.generation);
    is_int(control_worker_state(ctl, 1, v.generation), 1, "then what it says it applied");
    is_int(control_worker_state(ctl, 1, v.generation + 1), 0, "and not the next one");
    uint64_t second = control_join(ctl, 1, &v);
    is_int(control_worker_state(ctl, 1, 1), 0, "a worker joining a slot again starts over");
    ok(second != 0 && second != first && control_life(ctl, 1) == second,
       "in a new life: what the first wrote is not the running worker's");
    control_worker_gone(ctl, 1);
    is_int(control_worker_state(ctl, 1, 1), -1, "a reaped worker's slot is not running");
    is_int(control_life(ctl, 1), 0, "its life is 0 from the reap");
    ok(control_join(ctl, 1, &v) != second, "and the next worker's is never a life given before");
    control_worker_gone(ctl, 1);

    control_wake_others(ctl, 1);
    ok(!readable(control_fd(ctl, 1)), "a worker does not wake itself");
    ok(readable(control_fd(ctl, 2)), "it wakes the others");
    control_drain(ctl, 2);
    ok(!readable(control_fd(ctl, 2)), "drained, the eventfd is quiet again");
}

/* Runs FN in a child process: returns its wait status. */
static int in_child(void (*fn)(struct control *), struct control *ctl)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* a lock that never comes back kills the child */
        fn(ctl);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void die_holding(struct control *ctl)
{
    lock(ctl);
}

/* Reads the settings with stderr going to the file named by log_path, so
 * that the warning the takeover logs is read by the test, not printed. */
static const char *log_path;
static void read_it(struct control *ctl)
{
    if (freopen(log_path, "w", stderr) == NULL)
        _exit(3);
    struct control_view v;
    control_read(ctl, &v);
    fflush(stderr);
}

static void test_robust(struct control *ctl)
{
    char path[] = "/tmp/unclog-test-control-XXXXXX", text[512] = "";
    int fd = mkstemp(path);
    if (!ok(fd >= 0, "a file for the child's log"))
        return;
    log_path = path;
    int status = in_child(die_holding, ctl);
    ok(WIFEXITED(status), "a process exits holding the lock");
    status = in_child(read_it, ctl);
    ssize_t n = read(fd, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    ok(strstr(text, "a worker died holding the settings lock") != NULL,
       "the takeover is logged as a warning");
    if (!ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "another still takes it, in another process"))
        return; /* the lock is gone for good: taking it here would hang */
    struct control_view v;
    control_read(ctl, &v);
    is_int(v.generation, 4, "and the settings are as they were");
}

int main(void)
{
    static struct config cfg;
    config_defaults(&cfg, tables);
    struct control *ctl = control_create(2, &cfg);
    if (!ok(ctl != NULL, "the region for two workers is mapped"))
        return tap_done();
    is_int(control_workers(ctl), 2, "with two slots");
    test_publish(ctl, &cfg);
    test_slots(ctl);
    test_robust(ctl);
    control_free(ctl);
    return tap_done();
}
