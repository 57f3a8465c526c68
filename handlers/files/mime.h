#ifndef UNCLOG_MIME_H
#define UNCLOG_MIME_H

/* The Content-Type for PATH from its extension (case-insensitive), with
 * "; charset=utf-8" on text types; application/octet-stream when unknown. */
const char *mime_type(const char *path);

#endif
