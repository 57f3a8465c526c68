#include "server/base/http_date.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* N's last WIDTH digits at OUT. */
static void digits(char *out, int n, int width)
{
    for (int i = width - 1; i >= 0; i--, n /= 10)
        out[i] = (char)('0' + n % 10);
}

void http_date_format(time_t t, char out[HTTP_DATE_LEN])
{
    struct tm tm;
    /* A date HTTP cannot write (before year 0, after 9999): the epoch. */
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900) {
        t = 0;
        gmtime_r(&t, &tm);
    }
    /* By hand: strftime's %a and %b follow the locale, HTTP's names do not,
     * and a file's Last-Modified is written for every response. */
    memcpy(out, "Sun, 00 Jan 0000 00:00:00 GMT", HTTP_DATE_LEN);
    memcpy(out, days[tm.tm_wday], 3);
    digits(out + 5, tm.tm_mday, 2);
    memcpy(out + 8, months[tm.tm_mon], 3);
    digits(out + 12, tm.tm_year + 1900, 4);
    digits(out + 17, tm.tm_hour, 2);
    digits(out + 20, tm.tm_min, 2);
    digits(out + 23, tm.tm_sec, 2);
}

static int month_index(const char *name)
{
    for (int i = 0; i < 12; i++) {
        if (strncmp(months[i], name, 3) == 0 && name[3] == '\0')
            return i;
    }
    return -1;
}

static bool valid(const struct tm *tm)
{
    return tm->tm_mday >= 1 && tm->tm_mday <= 31 && tm->tm_hour <= 23 && tm->tm_min <= 59 &&
           tm->tm_sec <= 60 && tm->tm_year >= 70 && tm->tm_year < 8000;
}

bool http_date_parse(const char *text, time_t *t)
{
    struct tm tm = {0};
    char wday[10], mon[4], tail[4];
    int year, n = 0;
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (sscanf(text, "%3s, %2d %3s %4d %2d:%2d:%2d %3s%n", wday, &tm.tm_mday, mon, &year,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, tail, &n) == 8 &&
        text[n] == '\0' && strcmp(tail, "GMT") == 0) {
        /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    } else if (sscanf(text, "%9[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d %3s%n", wday, &tm.tm_mday, mon,
                      &year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, tail, &n) == 8 &&
               text[n] == '\0' && strcmp(tail, "GMT") == 0) {
        year += year < 70 ? 2000 : 1900;
        /* asctime: "Sun Nov  6 08:49:37 1994" */
    } else if (sscanf(text, "%3s %3s %2d %2d:%2d:%2d %4d%n", wday, mon, &tm.tm_mday, &tm.tm_hour,
                      &tm.tm_min, &tm.tm_sec, &year, &n) == 7 &&
               text[n] == '\0') {
    } else {
        return false;
    }
    tm.tm_mon = month_index(mon);
    tm.tm_year = year - 1900;
    if (tm.tm_mon < 0 || !valid(&tm))
        return false;
    *t = timegm(&tm);
    return true;
}
