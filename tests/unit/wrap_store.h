/*
 * wrap_store.h: a test store that wraps another, counts every call by
 * operation, and can be told to misbehave the way a network does: apply a
 * write and then report a failure that was retried (the ambiguous cases of
 * design.md section 1).
 */
#ifndef LOCKGATE_WRAP_STORE_H
#define LOCKGATE_WRAP_STORE_H

#include <stdbool.h>

#include "gcs/gcs.h"

typedef enum wrap_op {
	W_INSERT,
	W_GET,
	W_PATCH,
	W_REMOVE,
	W_LIST,
	W_NOPS
} wrap_op;

typedef struct wrap_store {
	gcs_store base;
	gcs_store *inner; /* owned */
	int calls[W_NOPS];
	/* Next call of op `ghost_op`: apply it, then answer as a retried
	 * request whose first answer was lost would be answered by GCS:
	 * insert and patch -> 412 (attempts 2), remove -> 404 (attempts
	 * 2). */
	int ghost_op; /* -1 = none */
	/* Next call of op `fail_op` fails with `fail_status` unapplied. */
	int fail_op;
	gcs_status fail_status;
	/* Next call of op `lost_op` (insert, patch, remove): apply it, then
	 * fail with `lost_status` as if its answer was lost and every retry
	 * failed (attempts 2). */
	int lost_op;
	gcs_status lost_status;
	/* Next call of op `retried_op` (patch, remove): answered as the retry of
	 * a first attempt that failed unanswered and unapplied (a slow
	 * 503): what the store answers, with attempts 2. */
	int retried_op;
	/* Called (once) between a lost or ghost write and its answer: what
	 * another client did meanwhile (NULL: nothing). */
	void (*meanwhile)(void *ctx);
	void *meanwhile_ctx;
	/* Called (once) just before the next call of op `before_op` goes
	 * to the store (after a fail_op it did not take): what another
	 * client did first. */
	int before_op; /* -1 = none */
	void (*before)(void *ctx);
	void *before_ctx;
	/* Answers carry no store time (now_ms GCS_NOW_UNKNOWN), as through
	 * a proxy that drops Date. */
	bool no_time;
} wrap_store;

/* Wraps INNER (taking ownership). */
wrap_store *wrap_store_new(gcs_store *inner);
int wrap_writes(const wrap_store *w);
void wrap_reset(wrap_store *w);

#endif
