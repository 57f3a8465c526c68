/* A minimal TAP producer for the unit tests: include it once per test binary. */
#ifndef UNCLOG_TAP_H
#define UNCLOG_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_count, tap_failed;

/* Reports one check; returns COND so callers can skip follow-ups. */
static int tap_ok(int cond, const char *file, int line, const char *desc)
{
    tap_count++;
    printf("%sok %d - %s\n", cond ? "" : "not ", tap_count, desc);
    if (!cond) {
        tap_failed++;
        printf("#   failed at %s:%d\n", file, line);
    }
    return cond;
}

#define ok(cond, desc) tap_ok(!!(cond), __FILE__, __LINE__, desc)

/* Compares integers and strings, printing both on failure. */
#define is_int(got, want, desc)                                                                    \
    do {                                                                                           \
        long long got_ = (long long)(got), want_ = (long long)(want);                              \
        if (!ok(got_ == want_, desc))                                                              \
            printf("#   got %lld, want %lld\n", got_, want_);                                      \
    } while (0)

#define is_str(got, want, desc)                                                                    \
    do {                                                                                           \
        const char *got_ = (got), *want_ = (want);                                                 \
        if (!ok(got_ != NULL && strcmp(got_, want_) == 0, desc))                                   \
            printf("#   got \"%s\", want \"%s\"\n", got_ ? got_ : "(null)", want_);                \
    } while (0)

/* Prints the plan; the exit status says whether everything passed. */
static int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed != 0;
}

#endif
