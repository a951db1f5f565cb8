/* web.h: the dashboard's files, compiled into the binary (scripts/embed.c). */
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

#endif
