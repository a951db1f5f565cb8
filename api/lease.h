/*
 * lease.h: internal to api/: the lease as object metadata, and the
 * instance's cache of the leases it granted.
 */
#ifndef LOCKGATE_LEASE_H
#define LOCKGATE_LEASE_H

#include <stdbool.h>

#include "api.h"

/* Metadata keys of a lock object.  Every value is a string. */
#define LEASE_KEY_ID           "lease_id"
#define LEASE_KEY_CLIENT       "client_key" /* the acquire's key, if it had one */
#define LEASE_KEY_OWNER        "owner"
#define LEASE_KEY_HOLDER       "holder"
#define LEASE_KEY_PURPOSE      "purpose"
#define LEASE_KEY_TTL          "ttl"
#define LEASE_KEY_EXPECTED     "expected_duration"
#define LEASE_KEY_LABELS       "labels"
#define LEASE_KEY_CLAIMS       "claims"
#define LEASE_KEY_REFRESH      "refresh_seq"
/* A group lease's refresh also writes when the version it replaced ended
 * (ms, store time): a version written past that end was written late,
 * after others may have counted the lease free, and whoever reads it can
 * tell (lease_written_late): the refresh whose answer was lost, retried,
 * finds its own late write and does not take it for a live lease. */
#define LEASE_KEY_PREV_END     "prev_end"
/* Semaphores and shared locks (group.c).  A group's head object at NAME
 * carries LEASE_KEY_KIND = LEASE_KIND_GROUP and no lease; each of its
 * leases is an object NAME#LEASE_ID with the keys above plus its mode,
 * its limit and the head's generation and metageneration it was
 * inserted under.  An exclusive lease that replaced a group head (by a
 * patch: the head is never deleted while a group lease may be valid)
 * carries LEASE_KEY_OVER_GROUP = "1" and, as its fencing token, the
 * generation of a marker object NAME#LEASE_ID (LEASE_KIND_TOKEN) it
 * inserted for that: the head's own generation may have been a token
 * before. */
#define LEASE_KEY_KIND         "lg_kind"
#define LEASE_KIND_GROUP       "group"
#define LEASE_KIND_TOKEN       "token"
#define LEASE_KEY_MODE         "mode"
#define LEASE_KEY_LIMIT        "limit"
#define LEASE_KEY_HEAD_GEN     "head_generation"
#define LEASE_KEY_HEAD_METAGEN "head_metageneration"
#define LEASE_KEY_OVER_GROUP   "lg_over_group"
#define LEASE_KEY_TOKEN        "lg_token"
#define LEASE_GROUP_SEP        '#'

/* The metadata of a new lease; new reference, NULL on allocation failure. */
json_t *lease_metadata(const api_acquire_req *req, const char *lease_id);
/* The bytes the stores count for lease metadata META (gcs/file_objects.c and
 * the gs:// client: its compact JSON text, '"' and '\' escaped in two
 * bytes, control characters in six), as large as refreshes can make it:
 * with a refresh_seq of the widest int64 and the widest ttl. */
size_t lease_stored_bytes(const json_t *meta);
/* The TTL (s) lease O was written with, within the API's range. */
long lease_ttl_of(const gcs_object *o);
/* When a lease written at UPDATED_MS with TTL (s) ends: the expiry it
 * shows, held at INT64_MAX (another writer's times may be anything). */
int64_t lease_ends_ms(int64_t updated_ms, long ttl);
/* 1 when the object's end (lease_ends_ms) + margin is before the store's
 * now: others may take it over; 0 when the answer carried no store time
 * (now_ms 0). */
int lease_expired(const gcs_object *o);
/* 1 when the store's now is past the object's end, margin left out: a
 * lease of one's own found so is no grant, for others may count it free
 * from there on (their margin is the store clock's resolution); 0
 * without a store time. */
int lease_past_expiry(const gcs_object *o);
/* 1 when O's last write was a refresh applied past the end of the
 * version it replaced (LEASE_KEY_PREV_END, read only while
 * LEASE_KEY_REFRESH names O's metageneration: no other write came since):
 * the lease was lost then, whatever its expiry says now. */
int lease_written_late(const gcs_object *o);
/* Borrowed strings from the object's metadata ("" when absent). */
const char *lease_id_of(const gcs_object *o);
/* The key an acquire recognises its own lease by: the client's key, or
 * the lease_id when the acquire had none (and for leases written before
 * client keys were stored apart, whose lease_id was the client's key). */
const char *lease_key_of(const gcs_object *o);
const char *lease_owner_of(const gcs_object *o);
/* 1 when O is REQ's own live lease: its key (lease_key_of) is REQ's
 * client key, or without one the lease_id REQ writes; its owner is REQ's
 * owner; and it has not expired. */
int lease_is_ours(const gcs_object *o, const api_acquire_req *req);
/* 1 when O is a group head (no lease in it). */
int lease_is_head(const gcs_object *o);
/* 1 when O is an exclusive lease that replaced a group head. */
int lease_over_group(const gcs_object *o);
/* 1 when O is such a lease with no fencing token written yet: never
 * granted (group_exclusive_over writes the token last). */
int lease_over_group_pending(const gcs_object *o);
/* O's fencing token: its generation, or for an exclusive lease over a
 * group the marker's generation it recorded (0 while it has none: never
 * granted, its generation possibly an earlier lease's token). */
int64_t lease_token_of(const gcs_object *o);
/* Set metadata key KEY of META to VAL, as lease metadata holds numbers
 * (a decimal string); 0, or -1 when out of memory. */
int lease_meta_set_int(json_t *meta, const char *key, long long val);
/* A metadata key of O as a bounded integer, DEF when absent or bad. */
long lease_meta_long(const gcs_object *o, const char *key, long min, long max,
    long def);
/* A lease of mode MODE and limit LIMIT as written in a group lease's
 * metadata (mode, limit), or of an exclusive lock (O without them). */
void lease_mode_of(const gcs_object *o, api_mode *mode, int *limit);
/* The holder object of L as the API shows it under "holders" (no
 * lease_id); new reference, NULL on allocation failure. */
json_t *lease_holder_json(const api_lock *l);
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
	/* When it was last written and its ttl then: so a group lease's
	 * refresh can tell whether it came after the expiry others may
	 * have judged (group.c), and a release whether the lease it finds
	 * after its retried delete could have taken ours over. */
	int64_t updated_ms;
	int ttl;
	/* A group lease carried by its head (object NAME, not
	 * NAME#LEASE_ID): group.c. */
	bool embedded;
	/* A group lease read back written late (lease_written_late):
	 * lost, never renewed. */
	bool written_late;
} lease_ref;

/* REF for the version O of the lease LEASE_ID of OWNER: its generations,
 * write time and ttl; every other field zero. */
void lease_ref_of(lease_ref *ref, const char *lease_id, const char *owner,
    const gcs_object *o);

typedef struct lease_cache lease_cache;
lease_cache *lease_cache_new(void);
void lease_cache_free(lease_cache *c);
/* Remember REF for NAME (replacing what was there). */
void lease_cache_put(lease_cache *c, const char *name, const lease_ref *ref);
/* 1 and *out filled when NAME is cached with LEASE_ID. */
int lease_cache_get(lease_cache *c, const char *name, const char *lease_id,
    lease_ref *out);
void lease_cache_del(lease_cache *c, const char *name);

/* The service, shared by service.c and group.c. */
struct api_service {
	gcs_store *store;
	lease_cache *cache;
	api_event_fn on_event;
	void *ctx;
};

/* service.c, for group.c */
int svc_store_fail(api_err *err, const gcs_err *ge);
void svc_emit(api_service *svc, api_event_kind kind, const char *name,
    const char *owner, const char *holder, const char *actor,
    const char *reason, int64_t token, int64_t at);
int svc_renew(api_service *svc, const char *name, int64_t gen, int64_t metagen,
    int ttl, int64_t prev_end_ms, gcs_object *out, gcs_err *ge);
void svc_remember(api_service *svc, const char *key, const char *lease_id,
    const char *owner, const gcs_object *o);
int svc_meta_fits(const json_t *meta, api_err *err);
/* Whether REQ names O, a lease of the caller's own (or the caller is an
 * admin), by the client key O was acquired with instead of its
 * lease_id: a caller's mistake, not a lost lease ("stop the work" would
 * be a lie).  True with ERR the 400 lease_id_is_key. */
bool svc_key_given(const api_lease_req *req, const gcs_object *o, api_err *err);

/* group.c: semaphores and shared locks.  Contracts as the api_*
 * functions they serve. */
int group_acquire(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err);
/* An exclusive acquire (limit 1) that found the group head HEAD at
 * req->name: API_OK with OUT the lease, or a refusal; API_BUSY with
 * err->reason "moved" when the head moved (start over). */
int group_exclusive_over(api_service *svc, const api_acquire_req *req,
    const json_t *meta, const gcs_object *head, api_lock *out, api_err *err);
/* An expired exclusive lease CUR flagged over a group, met by an
 * exclusive acquire or a force release: 1 when group leases are live
 * (CUR was patched back into a group head, or moved), 0 when it may be
 * removed as any other, -1 on a store failure (ERR). */
int group_guard_removal(api_service *svc, const char *name,
    const gcs_object *cur, api_err *err);
/* REQ names a group lease this instance knows (granted or refreshed). */
bool group_known(api_service *svc, const api_lease_req *req);
/* A group lease named by REQ: refresh or release.  API_LEASE_NOT_FOUND
 * when there is no such group lease. */
int group_refresh(api_service *svc, const api_lease_req *req, api_lock *out,
    api_err *err);
int group_release(api_service *svc, const api_lease_req *req, api_err *err);
/* The lock NAME whose object is the head HEAD (or an exclusive lease
 * over a group): every valid lease, as api_inspect. */
int
group_inspect(api_service *svc, const char *name, api_lock *out, api_err *err);
/* A waiter's read-only look (api_acquire_peek) at a group, for REQ or
 * for an exclusive REQ that met a group head. */
int group_peek(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err);
/* Force-release the group lease of NAME with fencing token TOKEN. */
int group_force(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t token, api_err *err);
/* Fill OUT for a refused acquire of REQ from HELD (the current lease
 * shown) and return API_LOCKED, with reason "limit_mismatch" when
 * MISMATCH. */
int group_refuse(const api_acquire_req *req, const gcs_object *held,
    bool mismatch, api_lock *out, api_err *err);

#endif
