/*
 * group_int.h: what group.c (acquire, refresh, release and the rest of a
 * group's operations) and group_view.c (a group as one listing sees it,
 * and how it is judged) share.  Private to api/.
 */
#ifndef LOCKGATE_GROUP_INT_H
#define LOCKGATE_GROUP_INT_H

#include <stdbool.h>

#include "api.h"
#include "lease.h"

/* The objects of one group, as one listing saw them. */
typedef struct group_view {
	bool has_head;
	gcs_object head;   /* the object at NAME (a head, or a lease) */
	gcs_entry *leases; /* owned: lease objects; markers left out */
	size_t n, cap;
	bool truncated; /* more objects than API_GROUP_SCAN_PAGES hold */
} group_view;

void group_view_clear(group_view *v);
/* 1 when O is a group head that carries a lease of its own: the first
 * lease of a group, granted by the insert that created the head (its
 * fencing token the head's generation).  A view lists it among its
 * leases under the lock's own name. */
int group_head_has_lease(const gcs_object *o);
/* Whether E, a lease of a view, is the one its head carries. */
bool group_entry_is_head(const gcs_entry *e);
/* NAME#LEASE_ID, the object of one lease of NAME, into BUF. */
void
group_obj_name(char *buf, size_t len, const char *name, const char *lease_id);
/* 1 when O is the short-lived marker whose generation is an exclusive
 * lease's fencing token over a group (group.c). */
int group_is_marker(const gcs_object *o);
/* List the objects of NAME (its head and its leases) into V; the
 * store's status, V cleared on failure. */
int
group_view_scan(api_service *svc, const char *name, group_view *v, gcs_err *ge);
/* The lease object ONAME as V saw it (borrowed), or NULL. */
const gcs_object *group_view_find(const group_view *v, const char *oname);
/* Whether V's head is a group head of generation GEN and
 * metageneration METAGEN. */
bool group_head_is(const group_view *v, int64_t gen, int64_t metagen);
/* The live lease of V acquired first, leaving out SKIP; NULL if none. */
const gcs_object *group_earliest_live(const group_view *v, const char *skip);
/* V's live leases, but SKIP, as OUT's holders (earliest on top). */
int group_view_holders(const group_view *v, const char *name, const char *skip,
    api_lock *out);
/* The 409 for REQ over V (locked or limit_mismatch), leaving out OWN. */
int group_refuse_view(const api_acquire_req *req, const group_view *v,
    const gcs_object *held, const char *own, bool mismatch, api_lock *out,
    api_err *err);
/* Whether lease O was taken with REQ's mode and limit. */
bool group_same_kind(const gcs_object *o, const api_acquire_req *req);
/* 0 when a lease of REQ fits V (OWN left out), else 1 with *HELD and
 * *MISMATCH set. */
int group_judge(const group_view *v, const api_acquire_req *req,
    const char *own, const gcs_object **held, bool *mismatch);
/* Patch CUR, the object at NAME, into a group head (one conditional
 * write); the store's status, OUT on GCS_OK. */
int group_patch_to_head(api_service *svc, const char *name,
    const gcs_object *cur, gcs_object *out, gcs_err *ge);
/* Clear the lease a head NAME of generation GEN and metageneration
 * METAGEN carries (one conditional patch: a plain head stays).  The
 * store's status; OUT the head on GCS_OK. */
int group_clear_head(api_service *svc, const char *name, int64_t gen,
    int64_t metagen, gcs_object *out, gcs_err *ge);
/* End lease O of a view, object NAME: a lease object is removed, a
 * head's lease cleared.  The store's status; group_drop_quietly ignores
 * it. */
int group_drop(api_service *svc, const char *name, const gcs_object *o,
    gcs_err *ge);
void
group_drop_quietly(api_service *svc, const char *name, const gcs_object *o);
/* Remove O at NAME with its preconditions, ignoring the outcome. */
void
group_remove_quietly(api_service *svc, const char *name, const gcs_object *o);
/* Remove a few leases V saw expired (a crashed holder's objects). */
void group_sweep_expired(api_service *svc, const group_view *v);

#endif
