#ifndef UNCLOG_HTTP_DATE_H
#define UNCLOG_HTTP_DATE_H

#include <stdbool.h>
#include <time.h>

#define HTTP_DATE_LEN 30 /* "Sun, 06 Nov 1994 08:49:37 GMT" and its NUL */

/* Writes T as an IMF-fixdate (RFC 9110 5.6.7) into OUT. */
void http_date_format(time_t t, char out[HTTP_DATE_LEN]);

/* Parses an IMF-fixdate (also the obsolete RFC 850 and asctime forms).
 * Returns true and sets *T, or false for anything malformed. */
bool http_date_parse(const char *text, time_t *t);

#endif
