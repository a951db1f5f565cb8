/*
 * group.c: counted semaphores and shared (read) locks over the store
 * contract: the layout and safety argument are in README ("Semaphores and
 * shared locks: the storage layout").
 *
 * A group is a head object at NAME (metadata lg_kind=group) and one object
 * NAME#LEASE_ID per lease, but for the group's first lease: the insert that
 * creates the head carries it, and is its grant (the name is absent only
 * while no group lease can be valid).  Every later acquire inserts its
 * own lease object, recording the head's generation and metageneration,
 * then lists the group: it is granted only if the head is unchanged,
 * every live lease (the head's among them) has its mode and limit, and
 * the live leases, its own and pending ones included, are within the
 * limit.  Of any set of leases
 * valid at once, the one that listed last saw all the others, each
 * inserted before its own listing.  A pending lease only ever causes a
 * refusal.  Every loop is bounded; liveness under contention is left to
 * the waiters' retries.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_int.h"

#define AGAIN    (-1) /* the head moved: start over */
#define EMBEDDED (-2) /* granted: the lease the head carries is ours */

/* The head that carries REQ's lease META: META without the head's
 * generations, marked a head.  New reference, or NULL. */
static json_t *
head_with_lease(const json_t *meta)
{
	json_t *m = json_copy((json_t *)meta);

	if (m == NULL || json_object_del(m, LEASE_KEY_HEAD_GEN) != 0 ||
	    json_object_del(m, LEASE_KEY_HEAD_METAGEN) != 0 ||
	    json_object_set_new(m, LEASE_KEY_KIND,
	        json_string(LEASE_KIND_GROUP)) != 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/*
 * Step 1 of a group acquire: the group head of REQ's name into HEAD.  An
 * absent name is created as a head carrying REQ's lease META: that one
 * insert is the grant (EMBEDDED), for while any group lease may be valid
 * the name exists (README).  A head carrying REQ's own lease (an earlier
 * attempt's insert, applied) is EMBEDDED too, when the answer's store
 * time shows it is not past its expiry (else cleared: AGAIN).  An
 * expired exclusive lease is taken over by patching it into a plain head
 * (never delete and insert: see README).  API_OK, EMBEDDED, AGAIN, or an
 * answer (a live exclusive lease refuses).
 */
static int
head_ready(api_service *svc, const api_acquire_req *req, const json_t *meta,
    gcs_object *head, api_lock *out, api_err *err)
{
	gcs_object cur, cleared;
	gcs_err ge;
	json_t *m;
	int rc;

	rc = gcs_get(svc->store, req->name, &cur, &ge);
	if (rc == GCS_NOT_FOUND) {
		if ((m = head_with_lease(meta)) == NULL)
			return api_fail(err, API_INTERNAL, "out of memory");
		rc = gcs_insert(svc->store, req->name, m, head, &ge);
		json_decref(m);
		if (rc == GCS_OK)
			return EMBEDDED;
		return rc == GCS_PRECONDITION ? AGAIN
		                              : svc_store_fail(err, &ge);
	}
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if (lease_is_head(&cur)) {
		if (!group_head_has_lease(&cur) ||
		    strcmp(lease_id_of(&cur), req->lease_id) != 0 ||
		    strcmp(lease_owner_of(&cur), req->owner) != 0) {
			*head = cur;
			return API_OK;
		}
		if (cur.now_ms > 0 && !lease_past_expiry(&cur) &&
		    !lease_written_late(&cur)) {
			*head = cur;
			return EMBEDDED;
		}
		/* Ours, but past its expiry or written late (others
		 * counted it free), or with no store time to tell: no
		 * grant.  Cleared; a lease of our own is judged. */
		rc = group_clear_head(svc, req->name, cur.generation,
		    cur.metageneration, &cleared, &ge);
		gcs_object_clear(&cur);
		if (rc == GCS_OK)
			gcs_object_clear(&cleared);
		return rc == GCS_OK || rc == GCS_PRECONDITION ||
		        rc == GCS_NOT_FOUND
		    ? AGAIN
		    : svc_store_fail(err, &ge);
	}
	if (!lease_expired(&cur)) {
		/* An exclusive holder: to a semaphore, another limit. */
		rc = group_refuse(req, &cur, req->mode != API_MODE_SHARED, out,
		    err);
		gcs_object_clear(&cur);
		return rc;
	}
	rc = group_patch_to_head(svc, req->name, &cur, head, &ge);
	if (rc == GCS_OK)
		svc_emit(svc, API_EV_TAKEOVER, req->name, lease_owner_of(&cur),
		    json_string_value(
		        json_object_get(cur.metadata, LEASE_KEY_HOLDER)),
		    req->owner, NULL, lease_token_of(&cur), cur.now_ms);
	gcs_object_clear(&cur);
	if (rc == GCS_OK)
		return API_OK;
	return rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND
	    ? AGAIN
	    : svc_store_fail(err, &ge);
}

/* Where this instance remembers lease O of NAME, object ONAME: under
 * ONAME, but the lease a head carries under NAME#LEASE_ID, as the group
 * leases are (an exclusive lease over a group stays under NAME). */
static void
cache_key(char *key, size_t len, const char *name, const char *oname,
    const gcs_object *o)
{
	if (strcmp(oname, name) == 0 && lease_is_head(o))
		group_obj_name(key, len, name, lease_id_of(o));
	else
		api_copy(key, len, oname);
}

/* Remember lease O of NAME (object ONAME) as this instance's to write. */
static void
remember(api_service *svc, const char *name, const char *oname,
    const gcs_object *o)
{
	char key[GCS_NAME_MAX + 1];
	lease_ref ref;

	cache_key(key, sizeof(key), name, oname, o);
	lease_ref_of(&ref, lease_id_of(o), lease_owner_of(o), o);
	ref.embedded = strcmp(oname, name) == 0 && lease_is_head(o);
	lease_cache_put(svc->cache, key, &ref);
}

/* Answer REQ with lease O (object ONAME), granted or found again. */
static int
grant(api_service *svc, const api_acquire_req *req, const char *oname,
    const gcs_object *o, bool found, api_lock *out)
{
	char key[GCS_NAME_MAX + 1];
	lease_ref known;
	bool announced;

	cache_key(key, sizeof(key), req->name, oname, o);
	announced = found &&
	    lease_cache_get(svc->cache, key, lease_id_of(o), &known) &&
	    known.generation == o->generation;
	lease_read(req->name, o, true, out);
	remember(svc, req->name, oname, o);
	svc_emit(svc, announced ? API_EV_REFRESHED : API_EV_GRANTED, req->name,
	    req->owner, req->holder, req->owner, NULL, lease_token_of(o),
	    o->updated_ms);
	return API_OK;
}

/* Whether NOW, a lease written at UPDATED_MS with TTL (s) and renewed,
 * was written past that lease's expiry (others may have judged it
 * expired): the refresh rule of group leases.  A version read back is
 * judged by what its refresh wrote (lease_written_late); this, by what
 * the writer knows, needs nothing of the store's metagenerations. */
static bool
renewed_late(int64_t updated_ms, long ttl, const gcs_object *now)
{
	return now->updated_ms > lease_ends_ms(updated_ms, ttl);
}

/*
 * Whether lease O (object ONAME), just renewed for the keyed acquire REQ,
 * is a grant: the object its key found may be one no listing ever
 * judged (an attempt whose insert was applied but answered as failed, or
 * whose instance died before its listing).  So it is judged as an
 * insert of our own is, on a listing after the renewal: NAME still a
 * group head, and the same head (its generation) as when O was inserted,
 * O there and not past its expiry, and room for it beside the other
 * live leases.  The head's generation: a head deleted and created again
 * since O's insert means tokens were handed out since (a plain lease at
 * NAME, the new head's), all newer than O's generation, which as a
 * token now would go backwards.  1 yes, 0 no, -1 on a store failure
 * (ERR set).
 */
static int
keyed_judged(api_service *svc, const api_acquire_req *req, const char *oname,
    const gcs_object *o, api_err *err)
{
	const gcs_object *held, *own;
	group_view v;
	gcs_err ge;
	bool mismatch;
	int ok;

	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge), -1;
	own = group_view_find(&v, oname);
	ok = v.has_head && lease_is_head(&v.head) && own != NULL &&
	    own->generation == o->generation && !lease_past_expiry(own) &&
	    (strcmp(oname, req->name) == 0 ||
	        lease_meta_long(own, LEASE_KEY_HEAD_GEN, 1, GCS_GEN_MAX, 0) ==
	            v.head.generation) &&
	    group_judge(&v, req, oname, &held, &mismatch) == 0;
	group_view_clear(&v);
	return ok;
}

/*
 * What renew_keyed makes of a failed write RC to its own lease: gone, 0
 * (go on as a new lease); moved, AGAIN (perhaps by our own write, applied
 * with its answer lost and its retry refused: the lease may still be
 * ours, so look again, as a refresh does); else 2, the store's failure
 * in ERR.
 */
static int
keyed_write_failed(int rc, const gcs_err *ge, api_err *err)
{
	if (rc == GCS_NOT_FOUND)
		return 0;
	if (rc == GCS_PRECONDITION)
		return AGAIN;
	svc_store_fail(err, ge);
	return 2;
}

/*
 * End O, the lease at NAME that a keyed acquire found and will not grant,
 * before a new lease is acquired: left standing, it would hold a slot
 * beside the new one until its expiry, its key still naming it.  0 when
 * it is gone, AGAIN when it moved (look again), 2 on a store failure
 * (ERR set: the client's retry finds it again).
 */
static int
drop_for_new(api_service *svc, const char *name, const gcs_object *o,
    api_err *err)
{
	gcs_err ge;
	int rc = group_drop(svc, name, o, &ge);

	return rc == GCS_OK ? 0 : keyed_write_failed(rc, &ge, err);
}

/*
 * One look for renew_keyed: as it, or AGAIN when the lease moved under
 * its renewal or its end.
 */
static int
renew_keyed_once(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	group_view v;
	gcs_object obj;
	gcs_err ge;
	size_t i;
	int rc, judged;

	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK) {
		svc_store_fail(err, &ge);
		return 2;
	}
	for (i = 0; i < v.n; i++)
		if (lease_is_ours(&v.leases[i].obj, req))
			break;
	if (i == v.n) {
		group_view_clear(&v);
		return 0;
	}
	if (!group_same_kind(&v.leases[i].obj, req)) {
		group_refuse_view(req, &v, &v.leases[i].obj, NULL, true, out,
		    err);
		group_view_clear(&v);
		return 2;
	}
	rc = svc_renew(svc, v.leases[i].name, v.leases[i].obj.generation,
	    v.leases[i].obj.metageneration, req->ttl,
	    lease_ends_ms(v.leases[i].obj.updated_ms,
	        lease_ttl_of(&v.leases[i].obj)),
	    &obj, &ge);
	if (rc == GCS_OK) {
		/* Renewed late, now or by an earlier refresh, a lister may
		 * have counted it free: as group_refresh, it is lost.  Or
		 * judged no grant.  Either way it ends before a new lease
		 * is acquired.  Unjudged (a store failure), it is left: a
		 * lease only ever causes refusals. */
		judged = lease_written_late(&v.leases[i].obj) ||
		        renewed_late(v.leases[i].obj.updated_ms,
		            lease_ttl_of(&v.leases[i].obj), &obj)
		    ? 0
		    : keyed_judged(svc, req, v.leases[i].name, &obj, err);
		if (judged == 1) {
			grant(svc, req, v.leases[i].name, &obj, true, out);
			rc = 1;
		} else if (judged == 0)
			rc = drop_for_new(svc, v.leases[i].name, &obj, err);
		else
			rc = 2;
		gcs_object_clear(&obj);
		group_view_clear(&v);
		return rc;
	}
	group_view_clear(&v);
	/* A 412 taken as gone left the lease beside the new one until its
	 * expiry, its key still naming it. */
	return keyed_write_failed(rc, &ge, err);
}

/*
 * A keyed acquire whose client key names a live lease of its owner in
 * the group: 1 when that lease was renewed, judged a grant and OUT is
 * the answer, 0 when there is none (or it is gone meanwhile, or it is no
 * grant: ended, acquire anew), 2 when ERR is the answer: a store
 * failure, a lease that kept moving, or 409 limit_mismatch (OUT set)
 * when the request asks with another mode or limit than that lease holds
 * (as it would be answered beside any other holder of that kind).
 */
static int
renew_keyed(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	int i, rc;

	for (i = 0; i < API_WRITE_LOOPS; i++)
		if ((rc = renew_keyed_once(svc, req, out, err)) != AGAIN)
			return rc;
	err->retry_after = 1;
	api_fail(err, API_BUSY,
	    "the lease kept changing while acquiring; retry shortly");
	return 2;
}

/* Insert REQ's lease object ONAME with META (step 2), or find it there
 * from an earlier attempt of the same request.  The store's status; MINE
 * the object on GCS_OK. */
static int
insert_own(api_service *svc, const api_acquire_req *req, const char *oname,
    const json_t *meta, gcs_object *mine, gcs_err *ge)
{
	int rc = gcs_insert(svc->store, oname, meta, mine, ge);

	if (rc != GCS_PRECONDITION)
		return rc;
	/* The lease_id is this request's own, so the object is ours: an
	 * earlier attempt whose insert was applied. */
	rc = gcs_get(svc->store, oname, mine, ge);
	if (rc == GCS_OK && strcmp(lease_id_of(mine), req->lease_id) != 0) {
		gcs_object_clear(mine);
		return gcs_fail(ge, GCS_PRECONDITION, "not our lease");
	}
	return rc;
}

/*
 * Steps 2 and 3 of a group acquire over HEAD: insert our lease, list,
 * group_judge.  API_OK granted, AGAIN, or a refusal (our lease deleted).
 */
static int
try_group(api_service *svc, const api_acquire_req *req, json_t *meta,
    const gcs_object *head, api_lock *out, api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	const gcs_object *held, *own;
	gcs_object mine;
	group_view v;
	gcs_err ge;
	bool mismatch;
	int rc;

	group_obj_name(oname, sizeof(oname), req->name, req->lease_id);
	if (lease_meta_set_int(meta, LEASE_KEY_HEAD_GEN, head->generation) !=
	        0 ||
	    lease_meta_set_int(meta, LEASE_KEY_HEAD_METAGEN,
	        head->metageneration) != 0)
		return api_fail(err, API_INTERNAL, "out of memory");
	rc = insert_own(svc, req, oname, meta, &mine, &ge);
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
		return AGAIN;
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if ((rc = group_view_scan(svc, req->name, &v, &ge)) != GCS_OK) {
		/* Unjudged, so not granted: withdrawn if the store lets us
		 * (else it only causes refusals until it expires). */
		group_remove_quietly(svc, oname, &mine);
		gcs_object_clear(&mine);
		return svc_store_fail(err, &ge);
	}
	/* Our object, not past its expiry at the listing: one an earlier
	 * attempt left, found again, may be (others counted it free), and
	 * so may a new one when the listing came late. */
	if ((own = group_view_find(&v, oname)) == NULL ||
	    lease_past_expiry(own) ||
	    !group_head_is(&v,
	        lease_meta_long(&mine, LEASE_KEY_HEAD_GEN, 1, GCS_GEN_MAX, 0),
	        lease_meta_long(&mine, LEASE_KEY_HEAD_METAGEN, 1, GCS_GEN_MAX,
	            0))) {
		rc = AGAIN;
	} else if (group_judge(&v, req, oname, &held, &mismatch) != 0) {
		rc =
		    group_refuse_view(req, &v, held, oname, mismatch, out, err);
	} else {
		rc = grant(svc, req, oname, &mine, false, out);
		group_sweep_expired(svc, &v);
		gcs_object_clear(&mine);
		group_view_clear(&v);
		return rc;
	}
	if (rc != AGAIN)
		group_sweep_expired(svc, &v);
	group_remove_quietly(svc, oname, &mine);
	gcs_object_clear(&mine);
	group_view_clear(&v);
	return rc;
}

int
group_acquire(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	gcs_object head;
	json_t *meta;
	int rc, i;

	if ((meta = lease_metadata(req, req->lease_id)) == NULL)
		return api_fail(err, API_INTERNAL, "out of memory");
	if (svc_meta_fits(meta, err) != API_OK) {
		json_decref(meta);
		return API_BAD_REQUEST;
	}
	if (req->key[0] != '\0' &&
	    (rc = renew_keyed(svc, req, out, err)) != 0) {
		json_decref(meta);
		return rc == 1 ? API_OK : (int)err->code;
	}
	for (i = 0; i < API_ACQUIRE_LOOPS; i++) {
		memset(&head, 0, sizeof(head));
		rc = head_ready(svc, req, meta, &head, out, err);
		if (rc == EMBEDDED) /* announced unless this instance knew */
			rc = grant(svc, req, req->name, &head, true, out);
		else if (rc == API_OK)
			rc = try_group(svc, req, meta, &head, out, err);
		gcs_object_clear(&head);
		if (rc != AGAIN) {
			json_decref(meta);
			return rc;
		}
	}
	json_decref(meta);
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lock changed hands too often while acquiring; retry shortly");
}

/* Insert the marker NAME#LEASE_ID whose generation is an exclusive lease
 * over a group's fencing token; 0 and *TOKEN, or the store's status.  A
 * marker already there is ours from an earlier attempt (its insert
 * applied though answered as failed, or its removal failed): replaced,
 * never reused, for its generation may be older than a lease granted
 * since, and a token must be newer than every one handed out before. */
static int
insert_marker(api_service *svc, const char *oname, int64_t *token, gcs_err *ge)
{
	gcs_object o;
	json_t *m = json_pack("{s:s}", LEASE_KEY_KIND, LEASE_KIND_TOKEN);
	int rc;

	if (m == NULL)
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	rc = gcs_insert(svc->store, oname, m, &o, ge);
	if (rc == GCS_PRECONDITION &&
	    (rc = gcs_get(svc->store, oname, &o, ge)) == GCS_OK) {
		rc = group_is_marker(&o)
		    ? gcs_remove(svc->store, oname, o.generation,
		          o.metageneration, ge)
		    : gcs_fail(ge, GCS_PRECONDITION, "not a marker");
		gcs_object_clear(&o);
		if (rc == GCS_OK)
			rc = gcs_insert(svc->store, oname, m, &o, ge);
	}
	json_decref(m);
	if (rc == GCS_OK)
		*token = o.generation;
	gcs_object_clear(&o);
	return rc;
}

/* Patch HEAD of NAME into the exclusive lease META flagged over a group,
 * with no fencing token yet (group_exclusive_over writes it): every key
 * of the head goes (the lease it may carry, judged expired), META's are
 * set.  The store's status; OUT on GCS_OK. */
static int
patch_to_lease(api_service *svc, const char *name, const json_t *meta,
    const gcs_object *head, gcs_object *out, gcs_err *ge)
{
	json_t *p = json_object(), *v;
	const char *k;
	int rc;

	json_object_foreach(head->metadata, k, v)
	{
		if (p != NULL && json_object_set_new(p, k, json_null()) != 0) {
			json_decref(p);
			p = NULL;
		}
	}
	if (p == NULL || json_object_update(p, (json_t *)meta) != 0 ||
	    json_object_set_new(p, LEASE_KEY_KIND, json_null()) != 0 ||
	    json_object_set_new(p, LEASE_KEY_OVER_GROUP, json_string("1"))) {
		json_decref(p);
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	}
	rc = gcs_patch(svc->store, name, head->generation, head->metageneration,
	    p, out, ge);
	json_decref(p);
	return rc;
}

/* Write TOKEN into LEASE of NAME, flagged over a group: the grant.  The
 * store's status; OUT on GCS_OK. */
static int
set_token(api_service *svc, const char *name, const gcs_object *lease,
    int64_t token, gcs_object *out, gcs_err *ge)
{
	json_t *p = json_object();
	int rc;

	if (p == NULL || lease_meta_set_int(p, LEASE_KEY_TOKEN, token) != 0) {
		json_decref(p);
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	}
	rc = gcs_patch(svc->store, name, lease->generation,
	    lease->metageneration, p, out, ge);
	json_decref(p);
	return rc;
}

/* Remove the marker ONAME of generation TOKEN (never patched, so of
 * metageneration 1); a failure leaves it to be ignored by every lister. */
static void
remove_marker(api_service *svc, const char *oname, int64_t token)
{
	gcs_err ge;

	(void)gcs_remove(svc->store, oname, token, 1, &ge);
}

/* Patch LEASE of NAME, ours and never granted, back into a group head;
 * a failure leaves it to expire, or to our key's next acquire
 * (api_acquire patches back a flagged lease of ours with no token). */
static void
give_head_back(api_service *svc, const char *name, const gcs_object *lease)
{
	gcs_object back;
	gcs_err ge;

	if (group_patch_to_head(svc, name, lease, &back, &ge) == GCS_OK)
		gcs_object_clear(&back);
}

/* A write of the writer's head that failed with RC (GE): a 412 or 404
 * means the head moved (API_BUSY, reason "moved": start over), else the
 * store failed. */
static int
head_moved_or_failed(int rc, const gcs_err *ge, api_err *err)
{
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND) {
		err->reason = "moved";
		return API_BUSY;
	}
	return svc_store_fail(err, ge);
}

/*
 * The exclusive acquire over a group head: list; with no live group
 * lease, patch the head into our lease (flagged lg_over_group, one
 * write; the head is never deleted, so the default path's insert stays
 * safe), then take the fencing token (a marker's generation), then list
 * again: a group lease inserted before our patch may have been granted,
 * so if one is live we patch the head back and refuse.  Only then is the
 * token written into the lease, the grant.  The token is taken after the
 * patch: a group acquire listing after it sees the head moved and is not
 * granted, so every group lease granted was inserted before the marker,
 * and its token is older.
 */
int
group_exclusive_over(api_service *svc, const api_acquire_req *req,
    const json_t *meta, const gcs_object *head, api_lock *out, api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	const gcs_object *held;
	gcs_object lease, granted;
	group_view v;
	gcs_err ge;
	int64_t token = 0;
	bool mismatch;
	int rc;

	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (group_judge(&v, req, NULL, &held, &mismatch) != 0) {
		rc = group_refuse_view(req, &v, held, NULL, mismatch, out, err);
		group_view_clear(&v);
		return rc;
	}
	group_view_clear(&v);
	rc = patch_to_lease(svc, req->name, meta, head, &lease, &ge);
	if (rc != GCS_OK)
		return head_moved_or_failed(rc, &ge, err);
	group_obj_name(oname, sizeof(oname), req->name, req->lease_id);
	if ((rc = insert_marker(svc, oname, &token, &ge)) != GCS_OK) {
		give_head_back(svc, req->name, &lease);
		gcs_object_clear(&lease);
		if (rc != GCS_PRECONDITION)
			return svc_store_fail(err, &ge);
		err->reason = "moved"; /* not ours there: start over */
		return API_BUSY;
	}
	rc = group_view_scan(svc, req->name, &v, &ge);
	if (rc == GCS_OK && group_judge(&v, req, NULL, &held, &mismatch) != 0) {
		rc = group_refuse_view(req, &v, held, NULL, mismatch, out, err);
		give_head_back(svc, req->name, &lease);
	} else if (rc != GCS_OK) {
		/* Unjudged: give the head back rather than hold it blind. */
		rc = svc_store_fail(err, &ge);
		give_head_back(svc, req->name, &lease);
	} else if ((rc = set_token(svc, req->name, &lease, token, &granted,
	                &ge)) == GCS_OK) {
		rc = grant(svc, req, req->name, &granted, false, out);
		gcs_object_clear(&granted);
	} else {
		/* A 412 or 404: moved, or on gs:// the echo of our own
		 * write, applied and retried (the next look finds the lease
		 * granted, or it goes back as a head); or the store failed:
		 * if the token was written after all, the give-back fails
		 * and our key's retry finds the lease granted. */
		give_head_back(svc, req->name, &lease);
		rc = head_moved_or_failed(rc, &ge, err);
	}
	group_view_clear(&v);
	remove_marker(svc, oname, token); /* it served for its generation */
	gcs_object_clear(&lease);
	return rc;
}

int
group_guard_removal(api_service *svc, const char *name, const gcs_object *cur,
    api_err *err)
{
	group_view v;
	gcs_object head;
	gcs_err ge;
	size_t i;
	int rc;
	bool live;

	if (group_view_scan(svc, name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge), -1;
	live = v.truncated; /* leases unread may be live */
	for (i = 0; i < v.n; i++)
		live = live || !lease_expired(&v.leases[i].obj);
	group_view_clear(&v);
	if (!live)
		return 0;
	rc = group_patch_to_head(svc, name, cur, &head, &ge);
	gcs_object_clear(&head);
	if (rc == GCS_OK)
		return 1;
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
		return 2;
	return svc_store_fail(err, &ge), -1;
}

/* Read the group lease REQ names: its object ONAME, else the lease the
 * head carries (*EMBEDDED).  The store's status (GCS_NOT_FOUND when
 * neither is REQ's lease); CUR on GCS_OK. */
static int
read_lease(api_service *svc, const api_lease_req *req, const char *oname,
    gcs_object *cur, bool *embedded, gcs_err *ge)
{
	int rc = gcs_get(svc->store, oname, cur, ge);

	*embedded = false;
	if (rc == GCS_OK &&
	    (group_is_marker(cur) || strcmp(lease_id_of(cur), req->lease_id))) {
		gcs_object_clear(cur);
		rc = GCS_NOT_FOUND;
	}
	if (rc != GCS_NOT_FOUND)
		return rc;
	rc = gcs_get(svc->store, req->name, cur, ge);
	if (rc == GCS_OK &&
	    (!group_head_has_lease(cur) ||
	        strcmp(lease_id_of(cur), req->lease_id) != 0)) {
		gcs_object_clear(cur);
		rc = GCS_NOT_FOUND;
	}
	*embedded = rc == GCS_OK;
	return rc;
}

/* Whether REQ's lease_id is the client key of a lease of the group, not
 * its lease_id (svc_key_given: ERR set).  Asked only once no lease was
 * found by that lease_id: one listing, on that path alone. */
static bool
key_given(api_service *svc, const api_lease_req *req, api_err *err)
{
	group_view v;
	gcs_err ge;
	size_t i;
	bool given = false;

	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return false;
	for (i = 0; i < v.n && !given; i++)
		given = svc_key_given(req, &v.leases[i].obj, err);
	group_view_clear(&v);
	return given;
}

/* The group lease REQ names, into REF (from the cache when USE_CACHE).
 * API_OK, or API_LEASE_NOT_FOUND / API_FORBIDDEN / a store failure. */
static int
group_lookup(api_service *svc, const api_lease_req *req, const char *oname,
    bool use_cache, lease_ref *ref, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	bool embedded;
	int rc;

	if (use_cache &&
	    lease_cache_get(svc->cache, oname, req->lease_id, ref)) {
		if (!req->admin && strcmp(ref->owner, req->owner) != 0)
			return api_fail(err, API_FORBIDDEN,
			    "this lease belongs to another owner");
		return API_OK;
	}
	rc = read_lease(svc, req, oname, &cur, &embedded, &ge);
	if (rc == GCS_NOT_FOUND) {
		lease_cache_del(svc->cache, oname);
		if (use_cache && key_given(svc, req, err))
			return API_BAD_REQUEST;
		return api_fail(err, API_LEASE_NOT_FOUND,
		    "no lease holds this lock any more: it was released or "
		    "expired and taken over; stop the work it protected");
	}
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if (!req->admin && strcmp(lease_owner_of(&cur), req->owner) != 0) {
		gcs_object_clear(&cur);
		return api_fail(err, API_FORBIDDEN,
		    "this lease belongs to another owner");
	}
	lease_ref_of(ref, req->lease_id, lease_owner_of(&cur), &cur);
	ref->embedded = embedded;
	ref->written_late = lease_written_late(&cur);
	lease_cache_put(svc->cache, oname, ref);
	gcs_object_clear(&cur);
	return API_OK;
}

/* The lease REF of REQ (object ONAME), at TARGET in version O, was
 * written past its expiry: deleted (cleared from the head), and lost. */
static int
refresh_lost(api_service *svc, const api_lease_req *req, const char *oname,
    const char *target, const lease_ref *ref, const gcs_object *o, api_err *err)
{
	group_drop_quietly(svc, target, o);
	lease_cache_del(svc->cache, oname);
	svc_emit(svc, API_EV_LOST, req->name, ref->owner, NULL, req->owner,
	    NULL, ref->generation, 0);
	return api_fail(err, API_LEASE_LOST,
	    "the lease was refreshed after it expired, and others may have "
	    "counted its slot free; stop the work it protected");
}

/*
 * One patch of the lease's own object (or of the head, for the lease it
 * carries).  A lister may have judged the lease expired before the patch
 * (and granted a slot on that count), so the refresh counts only when the
 * store time of the patch is not past the expiry of the version it
 * patched; otherwise the lease is deleted (cleared from the head) and
 * lost.  So is a version found written late by an earlier refresh (its
 * answer lost, the patch applied): the store's 412 to a retry, or a
 * client's retry after a 503, must not take it for the lease to renew.
 */
int
group_refresh(api_service *svc, const api_lease_req *req, api_lock *out,
    api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	const char *target;
	lease_ref ref;
	gcs_object obj;
	gcs_err ge;
	int rc, i;

	group_obj_name(oname, sizeof(oname), req->name, req->lease_id);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		if ((rc = group_lookup(svc, req, oname, i == 0, &ref, err)) !=
		    API_OK)
			return rc;
		target = ref.embedded ? req->name : oname;
		if (ref.written_late) {
			memset(&obj, 0, sizeof(obj));
			obj.generation = ref.generation;
			obj.metageneration = ref.metageneration;
			return refresh_lost(svc, req, oname, target, &ref, &obj,
			    err);
		}
		rc = svc_renew(svc, target, ref.generation, ref.metageneration,
		    req->ttl, lease_ends_ms(ref.updated_ms, ref.ttl), &obj,
		    &ge);
		if (rc == GCS_PRECONDITION)
			continue;
		if (rc == GCS_NOT_FOUND)
			break;
		if (rc != GCS_OK)
			return svc_store_fail(err, &ge);
		if (renewed_late(ref.updated_ms, ref.ttl, &obj)) {
			rc = refresh_lost(svc, req, oname, target, &ref, &obj,
			    err);
			gcs_object_clear(&obj);
			return rc;
		}
		lease_read(req->name, &obj, true, out);
		remember(svc, req->name, target, &obj);
		svc_emit(svc, API_EV_REFRESHED, req->name, ref.owner,
		    out->holder, req->owner, NULL, obj.generation,
		    obj.updated_ms);
		gcs_object_clear(&obj);
		return API_OK;
	}
	if (i < API_WRITE_LOOPS) {
		lease_cache_del(svc->cache, oname);
		svc_emit(svc, API_EV_LOST, req->name, ref.owner, NULL,
		    req->owner, NULL, ref.generation, 0);
		return api_fail(err, API_LEASE_NOT_FOUND,
		    "no lease holds this lock any more: it was released or "
		    "expired and taken over; stop the work it protected");
	}
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lease kept changing while refreshing; retry shortly");
}

/* End lease REF of REQ (object ONAME, or the lease the head carries):
 * one conditional write.  The store's status. */
static int
end_lease(api_service *svc, const api_lease_req *req, const char *oname,
    const lease_ref *ref, gcs_err *ge)
{
	gcs_object head;
	int rc;

	if (!ref->embedded)
		return gcs_remove(svc->store, oname, ref->generation,
		    ref->metageneration, ge);
	rc = group_clear_head(svc, req->name, ref->generation,
	    ref->metageneration, &head, ge);
	if (rc == GCS_OK)
		gcs_object_clear(&head);
	return rc;
}

/*
 * The release of REF, the lease the head of REQ's name carried, whose
 * clearing patch met a 412 after a retry and then found it gone: its
 * first attempt, unanswered, may have cleared it; or that attempt failed,
 * the lease expired, and an exclusive acquire patched the head into its
 * own lease (removing every key the head had, ours judged expired): a
 * takeover, and the caller had lost its lease (design 1).  That patch
 * needs a listing that judged ours expired, so an exclusive lease there,
 * at the head's generation, read before our expiry and its margin had
 * passed, proves ours was cleared first: released.  Read after (or with
 * no store time), lost.  Anything else at the name (a head, a new
 * object, none) counts as our clearing, as before.
 */
static int
head_released_or_lost(api_service *svc, const api_lease_req *req,
    const char *oname, const lease_ref *ref, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc = gcs_get(svc->store, req->name, &cur, &ge);
	bool taken;

	if (rc != GCS_OK && rc != GCS_NOT_FOUND)
		return svc_store_fail(err, &ge);
	taken = rc == GCS_OK && cur.generation == ref->generation &&
	    !lease_is_head(&cur) &&
	    (cur.now_ms <= 0 ||
	        cur.now_ms > lease_ends_ms(ref->updated_ms, ref->ttl) +
	                API_EXPIRY_MARGIN_MS);
	if (rc == GCS_OK)
		gcs_object_clear(&cur);
	lease_cache_del(svc->cache, oname);
	memset(err, 0, sizeof(*err));
	if (taken) {
		svc_emit(svc, API_EV_LOST, req->name, ref->owner, NULL,
		    req->owner, NULL, ref->generation, 0);
		return api_fail(err, API_LEASE_LOST,
		    "the release's first attempt went unanswered, and "
		    "meanwhile the lease expired and was taken over: the work "
		    "it protected may have outlived it");
	}
	svc_emit(svc, API_EV_RELEASED, req->name, ref->owner, NULL, req->owner,
	    NULL, ref->generation, 0);
	return API_OK;
}

int
group_release(api_service *svc, const api_lease_req *req, api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	lease_ref ref;
	gcs_err ge;
	bool sent = false; /* a clearing patch of ours may have applied */
	int rc, i;

	group_obj_name(oname, sizeof(oname), req->name, req->lease_id);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		rc = group_lookup(svc, req, oname, i == 0, &ref, err);
		if (sent && rc == API_LEASE_NOT_FOUND)
			return head_released_or_lost(svc, req, oname, &ref,
			    err);
		if (rc != API_OK)
			return rc;
		rc = end_lease(svc, req, oname, &ref, &ge);
		if (rc == GCS_OK || (rc == GCS_NOT_FOUND && ge.attempts > 1)) {
			lease_cache_del(svc->cache, oname);
			svc_emit(svc, API_EV_RELEASED, req->name, ref.owner,
			    NULL, req->owner, NULL, ref.generation, 0);
			return API_OK;
		}
		if (rc == GCS_PRECONDITION) {
			/* A 412 after a retried patch of the head: the
			 * first attempt may have cleared our lease. */
			sent = sent || (ref.embedded && ge.attempts > 1);
			continue;
		}
		if (rc == GCS_NOT_FOUND) {
			lease_cache_del(svc->cache, oname);
			return api_fail(err, API_LEASE_NOT_FOUND,
			    "no lease holds this lock any more: it was "
			    "released or expired and taken over");
		}
		return svc_store_fail(err, &ge);
	}
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lease kept changing while releasing; retry shortly");
}

int
group_inspect(api_service *svc, const char *name, api_lock *out, api_err *err)
{
	const gcs_object *top;
	group_view v;
	gcs_err ge;

	memset(out, 0, sizeof(*out));
	if (group_view_scan(svc, name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (v.has_head && !lease_is_head(&v.head) && !lease_expired(&v.head)) {
		/* An exclusive lease took the name meanwhile. */
		lease_read(name, &v.head, false, out);
		group_view_clear(&v);
		return API_OK;
	}
	if ((top = group_earliest_live(&v, NULL)) == NULL) {
		group_view_clear(&v);
		return api_fail(err, API_NOT_HELD, "nobody holds this lock");
	}
	lease_read(name, top, false, out);
	if (group_view_holders(&v, name, NULL, out) < 0) {
		group_view_clear(&v);
		api_lock_clear(out);
		return api_fail(err, API_INTERNAL, "out of memory");
	}
	group_view_clear(&v);
	return API_OK;
}

/* End lease E of a view: its object removed, or the head's lease
 * cleared.  The store's status. */
static int
end_entry(api_service *svc, const gcs_entry *e, gcs_err *ge)
{
	gcs_object head;
	int rc;

	if (!group_entry_is_head(e))
		return gcs_remove(svc->store, e->name, e->obj.generation,
		    e->obj.metageneration, ge);
	rc = group_clear_head(svc, e->name, e->obj.generation,
	    e->obj.metageneration, &head, ge);
	if (rc == GCS_OK)
		gcs_object_clear(&head);
	return rc;
}

/* The force-release of lease O of group NAME is done: forget it, say so. */
static void
forced(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t token, const gcs_object *o)
{
	char key[GCS_NAME_MAX + 1];

	group_obj_name(key, sizeof(key), name, lease_id_of(o));
	lease_cache_del(svc->cache, key);
	svc_emit(svc, API_EV_FORCED, name, lease_owner_of(o),
	    json_string_value(json_object_get(o->metadata, LEASE_KEY_HOLDER)),
	    actor, reason, token, o->now_ms);
}

/*
 * Remove the lease of group NAME whose fencing token is TOKEN.  As for an
 * exclusive lease, a lease that changed meanwhile (refreshed) is looked
 * at again; a clearing patch of the head that met a 412 after a retry may
 * have applied (its first answer lost), and a lease then gone is the
 * force-release done.
 */
int
group_force(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t token, api_err *err)
{
	gcs_object sent; /* the lease a clearing patch of ours may have ended */
	group_view v;
	gcs_err ge;
	bool again = true;
	size_t i;
	int rc = API_OK, k;

	memset(&sent, 0, sizeof(sent));
	for (k = 0; k < API_WRITE_LOOPS && again; k++) {
		again = false;
		if (group_view_scan(svc, name, &v, &ge) != GCS_OK) {
			rc = svc_store_fail(err, &ge);
			break;
		}
		for (i = 0; i < v.n; i++)
			if (v.leases[i].obj.generation == token)
				break;
		if (i == v.n && sent.metadata != NULL) {
			forced(svc, name, actor, reason, token, &sent);
			rc = API_OK;
		} else if (i == v.n) {
			api_fail(err, API_LEASE_LOST,
			    "no lease of this lock has fencing token %" PRId64
			    "; look again before force-releasing it",
			    token);
			err->reason = "fencing_token_mismatch";
			rc = API_LEASE_LOST;
		} else {
			rc = end_entry(svc, &v.leases[i], &ge);
			if (rc == GCS_OK ||
			    (rc == GCS_NOT_FOUND && ge.attempts > 1)) {
				forced(svc, name, actor, reason, token,
				    &v.leases[i].obj);
				rc = API_OK;
			} else if (rc == GCS_PRECONDITION ||
			    rc == GCS_NOT_FOUND) {
				if (rc == GCS_PRECONDITION && ge.attempts > 1 &&
				    group_entry_is_head(&v.leases[i]) &&
				    sent.metadata == NULL)
					gcs_object_copy(&sent,
					    &v.leases[i].obj);
				again = true;
			} else {
				rc = svc_store_fail(err, &ge);
			}
		}
		group_view_clear(&v);
	}
	gcs_object_clear(&sent);
	if (again) {
		err->retry_after = 1;
		rc = api_fail(err, API_BUSY,
		    "the lease kept changing while force-releasing; retry "
		    "shortly");
	}
	return rc;
}

/*
 * For a waiter: a read-only judgement of whether an attempt of REQ is
 * worth making.  API_OK, or API_LOCKED with OUT and ERR as a refusal.
 */
int
group_peek(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	const gcs_object *held;
	group_view v;
	gcs_err ge;
	bool mismatch;
	size_t i;
	int rc = API_OK;

	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (v.has_head && !lease_is_head(&v.head)) {
		/* An exclusive lease holds the name: the caller judged. */
		group_view_clear(&v);
		return API_OK;
	}
	for (i = 0; i < v.n; i++)
		if (lease_is_ours(&v.leases[i].obj, req))
			break; /* an attempt renews it */
	if (i == v.n && group_judge(&v, req, NULL, &held, &mismatch) != 0)
		rc = group_refuse_view(req, &v, held, NULL, mismatch, out, err);
	group_view_clear(&v);
	return rc;
}

bool
group_known(api_service *svc, const api_lease_req *req)
{
	char oname[GCS_NAME_MAX + 1];
	lease_ref ref;

	group_obj_name(oname, sizeof(oname), req->name, req->lease_id);
	return lease_cache_get(svc->cache, oname, req->lease_id, &ref) != 0;
}
