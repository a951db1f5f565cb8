/*
 * web.h: the dashboard's files, compiled into the binary (scripts/embed.c),
 * and the security headers every one of them is served with.
 */
#ifndef LOCKGATE_WEB_H
#define LOCKGATE_WEB_H

#include <stddef.h>

typedef struct srv_asset {
	const char *path;          /* "/index.html" */
	const unsigned char *data; /* NUL-terminated for convenience */
	size_t len;
} srv_asset;

/* Terminated by an entry with path NULL. */
extern const srv_asset srv_assets[];

#define SRV_WEB_PATH_MAX 128 /* longest asset path looked up */

/* The asset served at URL_PATH ("/" is "/index.html"; no query string),
 * and its Content-Type in *CONTENT_TYPE (a static string; may be NULL).
 * Borrowed from srv_assets[]; NULL when there is no such file. */
const srv_asset *srv_web_find(const char *url_path, const char **content_type);

/* {name, value} pairs to add to every dashboard response (a strict
 * Content-Security-Policy with no inline script or style and
 * frame-ancestors 'none', nosniff, no-referrer, ...).  Terminated by a
 * pair whose name is NULL.  The policy also suits JSON answers. */
extern const char *const srv_web_headers[][2];

#endif
