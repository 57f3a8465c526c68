#ifndef UNCLOG_FILES_CONFIG_H
#define UNCLOG_FILES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* The module's keys (files_module.config fills it). */
struct files_config {
    bool listing;            /* HTML index of directories without index.html */
    bool dotfiles;           /* serve and list hidden names (path_hidden) */
    bool gzip_files;         /* compress compressible files on the fly */
    bool gzip_static;        /* send FILE.gz when it exists and gzip is accepted */
    size_t gzip_min_size;    /* smaller files are sent as they are */
    char gzip_types[512];    /* media types compressed, space-separated; text/ matches any text */
    char cache_control[256]; /* Cache-Control of file responses, or "off" */
    bool file_cache;         /* keep small files' bodies in memory */
    size_t file_cache_max_file; /* largest file kept */
    size_t file_cache_size;     /* all bodies kept */
};

#endif
