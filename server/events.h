/*
 * events.h: the per-instance timeline of recent lock events.
 *
 * A bounded ring buffer of the last SRV_EVENTS_MAX events this process saw
 * (from the api service's event callback), read back per lock name for the
 * dashboard's detail view (GET /v1/locks/{name}:events).  It is only what
 * this instance saw: another instance's events are not here, and the ring
 * is lost on restart.  It never holds a lease_id.
 *
 * Consecutive refreshes of one lease are folded into one entry (its time
 * moves forward, its count goes up), so a lock refreshed every second does
 * not push every other lock's history out of the ring.
 *
 * All functions are thread-safe (one mutex; no call blocks on I/O).
 */
#ifndef LOCKGATE_EVENTS_H
#define LOCKGATE_EVENTS_H

#include <stddef.h>

#include <jansson.h>

#include "api/api.h"

#define SRV_EVENTS_MAX        4096 /* events kept by one process */
#define SRV_EVENTS_ANSWER_MAX 200  /* events in one answer, whatever asked */

/* Record EV.  Its strings are copied (NULL and "" are kept as absent);
 * EV stays the caller's.  On allocation failure the event is dropped. */
void srv_events_record(const api_event *ev);

/* The recent events of lock NAME, newest first, at most MAX of them
 * (0 or above SRV_EVENTS_ANSWER_MAX means SRV_EVENTS_ANSWER_MAX):
 * {"events":[{"kind":"acquired|refreshed|released|takeover|
 *   force_released|lost","at":RFC3339,"owner":s|null,"holder":s|null,
 *   "actor":s|null,"reason":s|null,"fencing_token":"decimal","count":n}]}
 * where reason is a force release's (else null), count is the number of refreshes folded into a "refreshed" entry
 * (1 for every other kind).  New reference (json_decref), NULL on
 * allocation failure. */
json_t *srv_events_json(const char *name, size_t max);

/* Forget every event and free their memory (shutdown, tests). */
void srv_events_reset(void);

#endif
