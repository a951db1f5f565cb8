/*
 * jsonw.h: a small JSON text writer for the hot paths (lease answers, log
 * lines), where building jansson objects cost more than the lock itself.
 * Writes into a growable buffer, or a fixed one that is cut short (and
 * reported full) instead of growing.
 */
#ifndef LOCKGATE_JSONW_H
#define LOCKGATE_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct api_jw {
	char *buf;
	size_t len, cap;
	bool fixed;  /* never grows: BUF belongs to the caller */
	bool full;   /* fixed buffer ran out, or allocation failed */
	size_t keep; /* bytes a fixed buffer keeps in reserve at its end */
} api_jw;

/* A growable writer; free with free(jw->buf) or take jw->buf. */
void api_jw_init(api_jw *jw);
/* A writer over BUF of CAP bytes, keeping KEEP bytes in reserve. */
void api_jw_init_fixed(api_jw *jw, char *buf, size_t cap, size_t keep);
void api_jw_raw(api_jw *jw, const char *s, size_t n);
void api_jw_lit(api_jw *jw, const char *s);
/* S (UTF-8) as a JSON string, quotes included. */
void api_jw_str(api_jw *jw, const char *s);
void api_jw_int(api_jw *jw, int64_t v);
/* ,"KEY": then the value. */
void api_jw_key(api_jw *jw, const char *key, bool first);
void api_jw_kstr(api_jw *jw, const char *key, const char *val, bool first);
void api_jw_kint(api_jw *jw, const char *key, int64_t v);
void api_jw_kbool(api_jw *jw, const char *key, bool v);
/* Milliseconds since the epoch as an RFC 3339 JSON string. */
void api_jw_ktime(api_jw *jw, const char *key, int64_t ms);

#endif
