#include "server/base/http_date.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void http_date_format(time_t t, char out[HTTP_DATE_LEN])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    /* strftime's %a and %b follow the locale; HTTP's names do not. */
    memcpy(out, days[tm.tm_wday], 3);
    memcpy(out + 3, ", ", 2);
    strftime(out + 5, HTTP_DATE_LEN - 5, "%d ", &tm);
    memcpy(out + 8, months[tm.tm_mon], 3);
    strftime(out + 11, HTTP_DATE_LEN - 11, " %Y %H:%M:%S GMT", &tm);
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
