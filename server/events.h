/*
 * events.h: the per-instance timeline of recent lock events.
 *
 * A bounded buffer of the recent events this process saw (at most
 * SRV_EVENTS_MAX, from the api service's event callback), read back per
 * lock name for the dashboard's detail view (GET /v1/locks/{name}:events).
 * It is only what this instance saw: another instance's events are not
 * here, and the buffer is lost on restart.  It never holds a lease_id.
 *
 * Consecutive refreshes of one lease are folded into one entry (its time
 * moves forward, its count goes up), so a lock refreshed every second does
 * not push every other lock's history out.
 *
 * Fair eviction: one lock or one owner cannot flood the buffer so that
 * the others' events vanish.  When it is full, the event that makes room
 * is the oldest of the lock with the most events; but when the owner with
 * the most events has more than twice as many as that lock (one owner
 * spread over many locks), it is that owner's oldest.  Among locks (or
 * owners) with as many, the one that got that many first.  So a flooding
 * lock or owner pushes out only its own events once it has the most; and
 * where one owner has every event (one token for all of CI), one lock
 * keeps at most half of the buffer.  Events without an owner count as
 * the owner "".  Bounded work per event: no scan of the buffer.
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
