/*
 * params.h: request parameters from a JSON body or the query string,
 * turned into bounded, typed values (params.c).  The query string is read
 * through two callbacks, so the parsing is testable without a server.
 */
#ifndef LOCKGATE_PARAMS_H
#define LOCKGATE_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "api/api.h"

typedef int (*params_visit_fn)(void *arg, const char *key, const char *value);

typedef struct srv_params {
	json_t *body; /* owned: the parsed body object, or NULL */
	/* The query value of KEY: NULL when absent, "" for a bare "?key". */
	const char *(*query)(void *ctx, const char *key);
	/* Call FN for every query argument, in order, until it returns
	 * non-zero. */
	void (*each)(void *ctx, params_visit_fn fn, void *arg);
	void *ctx;
} srv_params;

/* Parse BODY (LEN bytes, may be 0) and check that every parameter (body
 * key or query argument) is one of ALLOWED (NULL-terminated), none is
 * repeated and none comes both ways.  0, or -1 with ERR. */
int params_prepare(srv_params *p, const char *body, size_t len,
    const char *const *allowed, api_err *err);
/* Release the parsed body. */
void params_clear(srv_params *p);
/* A string parameter into OUT (at most OUTLEN-1 bytes of UTF-8 without
 * control characters).  0 = absent (OUT ""), 1 = present, -1 = bad. */
int params_str(srv_params *p, const char *key, char *out, size_t outlen,
    api_err *err);
/* An integer in [MIN, MAX]; DEF when absent.  0 or -1 (ERR). */
int params_int(srv_params *p, const char *key, long min, long max, long def,
    long *out, api_err *err);
int
params_bool(srv_params *p, const char *key, bool def, bool *out, api_err *err);
/* The labels object (new reference in *OUT) or NULL when absent; 0, or
 * -1 with ERR. */
int params_labels(srv_params *p, json_t **out, api_err *err);

#endif
