/*
 * jsonw.h: the JSON text writer of log lines (server/log.c): strings
 * escaped as JSON, into a fixed buffer that is cut short (and reported
 * full) rather than grown, so a line is written without allocating.
 * Everything else builds JSON with jansson.
 */
#ifndef LOCKGATE_JSONW_H
#define LOCKGATE_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct api_jw {
	char *buf;
	size_t len, cap;
	bool full;   /* the buffer ran out: nothing more is written */
	size_t keep; /* bytes kept in reserve at the buffer's end */
} api_jw;

/* A writer over BUF (the caller's) of CAP bytes, keeping KEEP bytes in
 * reserve; BUF always holds a NUL-terminated text of LEN bytes. */
void api_jw_init(api_jw *jw, char *buf, size_t cap, size_t keep);
void api_jw_raw(api_jw *jw, const char *s, size_t n);
void api_jw_lit(api_jw *jw, const char *s);
/* S (UTF-8) as a JSON string, quotes included. */
void api_jw_str(api_jw *jw, const char *s);
void api_jw_int(api_jw *jw, int64_t v);

#endif
