/*
 * metrics.h: process-wide Prometheus counters and histograms.
 *
 * Every recording function is thread-safe, lock-free (relaxed atomics on
 * fixed arrays) and never allocates: the label sets are fixed in advance
 * and a value outside them is counted under "other".  Only
 * metrics_render() allocates, and it is called by the /metrics handler.
 *
 * Exposition: Prometheus text format 0.0.4, every name prefixed lockgate_,
 * units in the names (_seconds, _total).
 */
#ifndef LOCKGATE_METRICS_H
#define LOCKGATE_METRICS_H

#include <stddef.h>

#include "api/api.h"
#include "gcs/gcs.h"

/* Labels of lockgate_http_requests_total{route}: "acquire", "refresh",
 * "release", "force_release" (or "forceRelease"), "inspect", "list",
 * "whoami", "healthz", "readyz", "metrics", "asset" (the dashboard and
 * /lockctl); anything else is "other".  STATUS is the HTTP status (100..599, else
 * "other"); SECONDS the time from the first byte to the queued answer. */
void metrics_http(const char *route, int status, double seconds);

/* A lock outcome: "granted", "conflict", "lost", "expired_takeover",
 * "forced", "released", "refreshed", "abandoned" (a waiter's lease given
 * back because nobody was left to be told of it), "too_many_waiters" (a
 * wait refused by the waiter caps); anything else is "other". */
void metrics_lock_outcome(const char *outcome);

/* An acquire answered with a lease, and one that began to wait, by the
 * kind of lease asked for: mode="exclusive" (limit 1), "shared" or
 * "semaphore" (limit > 1). */
void metrics_grant(api_mode mode, int limit);
void metrics_wait_start(api_mode mode, int limit);
/* Time a waiter spent waiting, whatever the outcome (granted, timed out,
 * shut down, disconnected). */
void metrics_wait_observe(double seconds);

/* N connections closed because their request head was overdue
 * (lockgate_slow_heads_closed_total). */
void metrics_slow_heads(unsigned n);

/* N waiting acquires whose client left before their answer
 * (lockgate_waiters_abandoned_total). */
void metrics_waiters_abandoned(unsigned n);

/* N connections their client closed with a request head pending: a new
 * connection whose first head never came whole, or a kept one that had
 * begun its next (lockgate_heads_dropped_total). */
void metrics_heads_dropped(unsigned n);

/* N connections answered 503 at once, over the connection limit
 * (lockgate_connections_refused_total). */
void metrics_conns_refused(unsigned n);

/* Adjust the lockgate_waiters gauge: +1 when a request starts waiting,
 * -1 when it stops.  The gauge never renders below 0. */
void metrics_waiters_add(int delta);

/* A store call: OP "insert", "get", "patch", "delete", "list", "check"
 * (else "other"); STATUS a gcs_status_str() ("ok", "not_found", ...,
 * else "other"). */
void metrics_store_call(const char *op, const char *status, double seconds);

/* The exposition text, including the store layer's gcs_stats_get()
 * counters.  New string (caller free()s it), *len set to its length;
 * NULL (and *len 0) when out of memory. */
char *metrics_render(size_t *len);

/* store_metrics.c: wrap INNER so that every call through the store
 * contract is recorded with metrics_store_call(op, status, seconds).
 * Takes ownership of INNER in every case: gcs_store_free() on the result
 * frees both; on allocation failure INNER is freed and NULL returned.
 * The wrapper keeps INNER's scheme.  NULL INNER returns NULL. */
gcs_store *srv_store_instrument(gcs_store *inner);

#endif
