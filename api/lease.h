/*
 * lease.h: internal to api/: the lease as object metadata, and the
 * instance's cache of the leases it granted.
 */
#ifndef LOCKGATE_LEASE_H
#define LOCKGATE_LEASE_H

#include <stdbool.h>

#include "api.h"

/* Metadata keys of a lock object.  Every value is a string. */
#define LEASE_KEY_ID       "lease_id"
#define LEASE_KEY_CLIENT   "client_key" /* the acquire's key, if it had one */
#define LEASE_KEY_OWNER    "owner"
#define LEASE_KEY_HOLDER   "holder"
#define LEASE_KEY_PURPOSE  "purpose"
#define LEASE_KEY_TTL      "ttl"
#define LEASE_KEY_EXPECTED "expected_duration"
#define LEASE_KEY_LABELS   "labels"
#define LEASE_KEY_CLAIMS   "claims"
#define LEASE_KEY_REFRESH  "refresh_seq"

/* The metadata of a new lease; new reference, NULL on allocation failure. */
json_t *lease_metadata(const api_acquire_req *req, const char *lease_id);
/* The bytes the stores count for lease metadata META (gcs/file_objects.c and
 * the gs:// client: its compact JSON text, '"' and '\' escaped in two
 * bytes, control characters in six), as large as refreshes can make it:
 * with a refresh_seq of the widest int64 and the widest ttl. */
size_t lease_stored_bytes(const json_t *meta);
/* 1 when the object's updated + ttl (+ margin) is before the store's now;
 * 0 when the answer carried no store time (now_ms 0). */
int lease_expired(const gcs_object *o);
/* Borrowed strings from the object's metadata ("" when absent). */
const char *lease_id_of(const gcs_object *o);
/* The key an acquire recognises its own lease by: the client's key, or
 * the lease_id when the acquire had none (and for leases written before
 * client keys were stored apart, whose lease_id was the client's key). */
const char *lease_key_of(const gcs_object *o);
const char *lease_owner_of(const gcs_object *o);
/* Fill OUT from object O of lock NAME; lease_id only WITH_LEASE. */
void lease_read(const char *name, const gcs_object *o, bool with_lease,
    api_lock *out);

/* What this instance remembers of a lease it wrote last, so that refresh
 * and release cost one store write and no read. */
typedef struct lease_ref {
	char lease_id[API_LEASE_ID_MAX + 1];
	char owner[API_OWNER_MAX + 1];
	int64_t generation;
	int64_t metageneration;
} lease_ref;

typedef struct lease_cache lease_cache;
lease_cache *lease_cache_new(void);
void lease_cache_free(lease_cache *c);
/* Remember REF for NAME (replacing what was there). */
void lease_cache_put(lease_cache *c, const char *name, const lease_ref *ref);
/* 1 and *out filled when NAME is cached with LEASE_ID. */
int lease_cache_get(lease_cache *c, const char *name, const char *lease_id,
    lease_ref *out);
void lease_cache_del(lease_cache *c, const char *name);

#endif
