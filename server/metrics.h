/*
 * metrics.h: process-wide Prometheus counters and histograms.
 * Every function is thread-safe and cheap (atomics); none allocates on
 * the request path.
 */
#ifndef LOCKGATE_METRICS_H
#define LOCKGATE_METRICS_H

#include <stddef.h>

/* One finished HTTP request: ROUTE is the route template ("acquire",
 * "inspect", ...), never a lock name. */
void metrics_http(const char *route, int status, double seconds);
/* A lock outcome: "granted", "conflict", "lost", "expired_takeover",
 * "forced", "released", "refreshed". */
void metrics_lock_outcome(const char *outcome);
/* Time a waiter spent waiting, whatever the outcome. */
void metrics_wait_observe(double seconds);
void metrics_waiters_add(int delta);
/* A store call: OP "insert|get|patch|delete|list|check", STATUS a
 * gcs_status_str(). */
void metrics_store_call(const char *op, const char *status, double seconds);

/* The exposition text.  New string (free()), *len set. */
char *metrics_render(size_t *len);

#endif
