/*
 * service.c: the lock algorithm of design.md section 1 over the store
 * contract.
 *
 * Every write carries a precondition: insert-if-absent for a grant, both
 * generation and metageneration for refresh, release and takeover.  Expiry
 * is judged on the store's clock (the now_ms of the answer that carried the
 * object), never on ours.  Every loop is bounded.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api.h"
#include "group_int.h"
#include "lease.h"
#include "util/wipe.h"

api_service *
api_new(gcs_store *store, api_event_fn on_event, void *ctx)
{
	api_service *svc = calloc(1, sizeof(*svc));

	if (svc == NULL)
		return NULL;
	svc->store = store;
	svc->on_event = on_event;
	svc->ctx = ctx;
	if ((svc->cache = lease_cache_new()) == NULL) {
		free(svc);
		return NULL;
	}
	return svc;
}

void
api_free(api_service *svc)
{
	if (svc == NULL)
		return;
	lease_cache_free(svc->cache);
	free(svc);
}

gcs_store *
api_store(api_service *svc)
{
	return svc->store;
}

void
svc_emit(api_service *svc, api_event_kind kind, const char *name,
    const char *owner, const char *holder, const char *actor,
    const char *reason, int64_t token, int64_t at)
{
	api_event ev;

	if (svc->on_event == NULL)
		return;
	ev.kind = kind;
	ev.name = name;
	ev.owner = owner;
	ev.holder = holder;
	ev.actor = actor;
	ev.reason = reason;
	ev.fencing_token = token;
	ev.at_ms = at;
	svc->on_event(svc->ctx, &ev);
}

static void
emit(api_service *svc, api_event_kind kind, const char *name, const char *owner,
    const char *holder, const char *actor, int64_t token, int64_t at)
{
	svc_emit(svc, kind, name, owner, holder, actor, NULL, token, at);
}

/* Translate a store failure into the API's terms: the store's message for
 * the caller, its detail (if any) for the log alone. */
int
svc_store_fail(api_err *err, const gcs_err *ge)
{
	switch (ge->status) {
	case GCS_BUSY:
		err->retry_after = 1;
		return api_fail(err, API_BUSY,
		    "the storage is rate-limiting this lock; retry shortly");
	case GCS_UNAVAILABLE:
	case GCS_DENIED:
		err->retry_after = 2;
		api_fail(err, API_UNAVAILABLE,
		    "the lock storage is unavailable (%s); retry shortly",
		    ge->msg);
		api_copy(err->detail, sizeof(err->detail), ge->detail);
		return API_UNAVAILABLE;
	case GCS_NOMEM:
		return api_fail(err, API_INTERNAL, "out of memory");
	default:
		return api_fail(err, API_INTERNAL,
		    "unexpected storage answer (%s)",
		    gcs_status_str(ge->status));
	}
}

/*
 * A new lease_id: API_LEASE_ID_NEW / 2 bytes from the kernel's CSPRNG, in
 * hex.  Each thread takes them from getrandom(2) API_RANDOM_BATCH at a
 * time rather than one system call per acquire; bytes are wiped as they
 * are handed out, so none serves twice.  (lockgate never forks, which is
 * what could otherwise make two processes share a batch.)
 */
static void
new_lease_id(char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	static __thread unsigned char pool[API_RANDOM_BATCH];
	static __thread size_t left;
	unsigned char *r;
	size_t i, n = API_LEASE_ID_NEW / 2;

	if (left < n) {
		if (getrandom(pool, sizeof(pool), 0) != (ssize_t)sizeof(pool))
			abort(); /* no entropy: never hand out guessable
				    leases */
		left = sizeof(pool);
	}
	r = pool + sizeof(pool) - left;
	left -= n;
	for (i = 0; i < n && 2 * i + 2 < len; i++) {
		buf[2 * i] = hex[r[i] >> 4];
		buf[2 * i + 1] = hex[r[i] & 15];
	}
	buf[2 * i] = '\0';
	util_wipe(r, n);
}

/* Remember lease O under KEY: the lock name, or a group lease's object
 * name. */
void
svc_remember(api_service *svc, const char *key, const char *lease_id,
    const char *owner, const gcs_object *o)
{
	lease_ref ref;

	lease_ref_of(&ref, lease_id, owner, o);
	lease_cache_put(svc->cache, key, &ref);
}

/*
 * REQ's own lease O, renewed after a read found it: an earlier attempt of
 * the same request (a retried insert that had been applied, an attempt
 * whose answer was lost) or the client re-acquiring with its own key.
 * Remember it, and announce the grant unless this instance already knew
 * this lease: for the log, the timeline and the counters, learning of a
 * grant whose answer was lost is the grant.
 */
static void
found_ours(api_service *svc, const api_acquire_req *req, const gcs_object *o)
{
	lease_ref known;
	bool announced =
	    lease_cache_get(svc->cache, req->name, lease_id_of(o), &known) &&
	    known.generation == o->generation;

	svc_remember(svc, req->name, lease_id_of(o), req->owner, o);
	emit(svc, announced ? API_EV_REFRESHED : API_EV_GRANTED, req->name,
	    req->owner, req->holder, req->owner, lease_token_of(o),
	    o->updated_ms);
}

/*
 * Move the lease of NAME at generation GEN and metageneration METAGEN
 * forward (the store's updated time, and so its expiry), with the ttl
 * TTL when it is above 0, and for a group lease the end of the version
 * replaced, PREV_END_MS, when above 0: one conditional patch.  The
 * store's status; *OUT is the patched object on GCS_OK.
 */
int
svc_renew(api_service *svc, const char *name, int64_t gen, int64_t metagen,
    int ttl, int64_t prev_end_ms, gcs_object *out, gcs_err *ge)
{
	json_t *patch = json_object();
	int rc;

	if (patch == NULL ||
	    lease_meta_set_int(patch, LEASE_KEY_REFRESH, metagen + 1) != 0 ||
	    (ttl > 0 && lease_meta_set_int(patch, LEASE_KEY_TTL, ttl) != 0) ||
	    (prev_end_ms > 0 &&
	        lease_meta_set_int(patch, LEASE_KEY_PREV_END, prev_end_ms) !=
	            0)) {
		json_decref(patch);
		memset(ge, 0, sizeof(*ge));
		ge->status = GCS_NOMEM;
		return GCS_NOMEM;
	}
	rc = gcs_patch(svc->store, name, gen, metagen, patch, out, ge);
	json_decref(patch);
	return rc;
}

/* Seconds a refused acquirer should wait before asking again. */
static int
retry_after_of(const gcs_object *o, const api_lock *held)
{
	int64_t left, s;

	if (o->now_ms <= 0)
		return 2; /* no storage time: nothing to count from */
	left = held->expires_at_ms + API_EXPIRY_MARGIN_MS - o->now_ms;
	s = (left + 999) / 1000;

	if (s < 1)
		s = 1;
	if (s > 60)
		s = 60;
	return (int)s;
}

/* API_OK when lease metadata META fits the store's cap (see
 * api_acquire_check), else API_BAD_REQUEST in ERR. */
int
svc_meta_fits(const json_t *meta, api_err *err)
{
	size_t n = lease_stored_bytes(meta);

	if (n <= API_META_BYTES_MAX)
		return API_OK;
	api_fail(err, API_BAD_REQUEST,
	    "holder, purpose and labels (with the owner and its claims) "
	    "take %zu bytes as stored lock metadata, over the store's "
	    "limit of %d bytes: shorten them",
	    n, API_META_BYTES_MAX);
	err->reason = "metadata_too_large";
	return API_BAD_REQUEST;
}

int
api_acquire_check(const api_acquire_req *req, api_err *err)
{
	char lease_id[API_LEASE_ID_MAX + 1];
	json_t *meta;
	int rc;

	memset(err, 0, sizeof(*err));
	/* Not prepared yet: as wide as the lease_id prepare makes. */
	if (req->lease_id[0] != '\0')
		api_copy(lease_id, sizeof(lease_id), req->lease_id);
	else
		snprintf(lease_id, sizeof(lease_id), "%0*d", API_LEASE_ID_NEW,
		    0);
	if ((meta = lease_metadata(req, lease_id)) == NULL)
		return api_fail(err, API_INTERNAL, "out of memory");
	rc = svc_meta_fits(meta, err);
	json_decref(meta);
	return rc;
}

void
api_acquire_prepare(api_acquire_req *req)
{
	if (req->lease_id[0] == '\0')
		new_lease_id(req->lease_id, sizeof(req->lease_id));
}

/* Fill OUT and ERR with CUR as the holder that refuses REQ. */
static int
held_by(const api_acquire_req *req, const gcs_object *cur, api_lock *out,
    api_err *err)
{
	lease_read(req->name, cur, false, out);
	err->retry_after = retry_after_of(cur, out);
	return api_fail(err, API_LOCKED, "the lock is held by %.180s until %s",
	    out->owner, "its lease expires or is released");
}

int
api_acquire_peek(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	if (req->lease_id[0] == '\0')
		return api_fail(err, API_INTERNAL,
		    "an acquire without a lease_id (not prepared)");
	rc = gcs_get(svc->store, req->name, &cur, &ge);
	if (rc == GCS_NOT_FOUND)
		return API_OK;
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if (lease_is_head(&cur))
		rc = group_peek(svc, req, out, err);
	else if (lease_is_ours(&cur, req) || lease_expired(&cur))
		rc = API_OK; /* an attempt renews it, or takes over */
	else if (api_acquire_is_group(req))
		rc = group_refuse(req, &cur, req->mode != API_MODE_SHARED, out,
		    err);
	else
		rc = held_by(req, &cur, out, err);
	gcs_object_clear(&cur);
	return rc;
}

int
api_acquire_finds_own(api_service *svc, const api_acquire_req *req)
{
	gcs_object cur;
	group_view v;
	gcs_err ge;
	size_t i;
	int own;

	if (req->key[0] == '\0' ||
	    gcs_get(svc->store, req->name, &cur, &ge) != GCS_OK)
		return 0;
	if (!lease_is_head(&cur)) {
		own =
		    lease_is_ours(&cur, req) && !lease_over_group_pending(&cur);
		gcs_object_clear(&cur);
		return own;
	}
	gcs_object_clear(&cur);
	if (group_view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return 0;
	for (i = 0, own = 0; i < v.n && !own; i++)
		own = lease_is_ours(&v.leases[i].obj, req);
	group_view_clear(&v);
	return own;
}

/* long: one retry loop (insert, read the holder, take over an expired lease)
 * whose branches share the loop's state; the steps it calls are already
 * helpers */
int
api_acquire(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	const char *lease_id = req->lease_id;
	gcs_object obj, cur;
	gcs_err ge;
	json_t *meta;
	int rc, i;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	/* A lease_id made here would differ on every attempt: an attempt
	 * could not know the lease an earlier one left as its own. */
	if (lease_id[0] == '\0')
		return api_fail(err, API_INTERNAL,
		    "an acquire without a lease_id (not prepared)");
	if (api_acquire_is_group(req))
		return group_acquire(svc, req, out, err);
	if ((meta = lease_metadata(req, lease_id)) == NULL)
		return api_fail(err, API_INTERNAL, "out of memory");
	/* Before any store call: a store would refuse it as a bug of ours,
	 * and mem:// would not refuse it at all. */
	if (svc_meta_fits(meta, err) != API_OK) {
		json_decref(meta);
		return API_BAD_REQUEST;
	}

	for (i = 0; i < API_ACQUIRE_LOOPS; i++) {
		rc = gcs_insert(svc->store, req->name, meta, &obj, &ge);
		if (rc == GCS_OK) {
			lease_read(req->name, &obj, true, out);
			svc_remember(svc, req->name, lease_id, req->owner,
			    &obj);
			emit(svc, API_EV_GRANTED, req->name, req->owner,
			    req->holder, req->owner, obj.generation,
			    obj.updated_ms);
			gcs_object_clear(&obj);
			json_decref(meta);
			return API_OK;
		}
		if (rc != GCS_PRECONDITION) {
			json_decref(meta);
			return svc_store_fail(err, &ge);
		}
		/* Someone holds it, or did a moment ago: look. */
		rc = gcs_get(svc->store, req->name, &cur, &ge);
		if (rc == GCS_NOT_FOUND)
			continue;
		if (rc != GCS_OK) {
			json_decref(meta);
			return svc_store_fail(err, &ge);
		}
		if (lease_is_head(&cur)) {
			rc = group_exclusive_over(svc, req, meta, &cur, out,
			    err);
			gcs_object_clear(&cur);
			if (rc == API_BUSY && err->reason != NULL &&
			    strcmp(err->reason, "moved") == 0) {
				memset(err, 0, sizeof(*err));
				continue;
			}
			json_decref(meta);
			return rc;
		}
		if (lease_is_ours(&cur, req) &&
		    lease_over_group_pending(&cur)) {
			/* Ours, flagged over a group and never granted: an
			 * attempt refused or cut short before its token.
			 * Back to a head, and start over: a token taken now
			 * is newer than any group lease granted meanwhile. */
			rc = group_patch_to_head(svc, req->name, &cur, &obj,
			    &ge);
			gcs_object_clear(&cur);
			if (rc == GCS_OK)
				gcs_object_clear(&obj);
			if (rc == GCS_OK || rc == GCS_PRECONDITION ||
			    rc == GCS_NOT_FOUND)
				continue;
			json_decref(meta);
			return svc_store_fail(err, &ge);
		}
		if (lease_is_ours(&cur, req)) {
			/* Ours: a retried insert that had succeeded, an
			 * earlier attempt of this request whose answer was
			 * lost, or a client re-acquiring with its own key.
			 * Renewed before it is answered: it may be close to
			 * its expiry, and the caller counts its TTL from
			 * now.  A 412 or 404 means it moved: look again.
			 * Flagged over a group, it may never have been
			 * granted: patched over the head, refused for a group
			 * lease granted meanwhile, and never patched back
			 * (its instance died, or the store failed that
			 * patch).  So it is renewed only while no group lease
			 * is live, as it would be taken over. */
			if (lease_over_group(&cur) &&
			    (rc = group_guard_removal(svc, req->name, &cur,
			         err)) != 0) {
				gcs_object_clear(&cur);
				if (rc > 0)
					continue;
				json_decref(meta);
				return (int)err->code;
			}
			rc = svc_renew(svc, req->name, cur.generation,
			    cur.metageneration, req->ttl, 0, &obj, &ge);
			gcs_object_clear(&cur);
			if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
				continue;
			json_decref(meta);
			if (rc != GCS_OK)
				return svc_store_fail(err, &ge);
			lease_read(req->name, &obj, true, out);
			found_ours(svc, req, &obj);
			gcs_object_clear(&obj);
			return API_OK;
		}
		if (lease_expired(&cur) && lease_over_group(&cur) &&
		    (rc = group_guard_removal(svc, req->name, &cur, err)) !=
		        0) {
			/* Group leases live (it became a head again) or
			 * it moved: look again; or a store failure. */
			gcs_object_clear(&cur);
			if (rc > 0)
				continue;
			json_decref(meta);
			return (int)err->code;
		}
		if (lease_expired(&cur)) {
			/* Both preconditions: a re-created object restarts
			 * metageneration at 1, so metageneration alone could
			 * delete someone else's new lease. */
			rc = gcs_remove(svc->store, req->name, cur.generation,
			    cur.metageneration, &ge);
			if (rc == GCS_OK) {
				emit(svc, API_EV_TAKEOVER, req->name,
				    lease_owner_of(&cur),
				    json_string_value(
				        json_object_get(cur.metadata,
				            LEASE_KEY_HOLDER)),
				    req->owner, lease_token_of(&cur),
				    cur.now_ms);
			} else if (rc != GCS_NOT_FOUND &&
			    rc != GCS_PRECONDITION) {
				gcs_object_clear(&cur);
				json_decref(meta);
				return svc_store_fail(err, &ge);
			}
			/* 404/412: someone else moved first; start over. */
			gcs_object_clear(&cur);
			continue;
		}
		rc = held_by(req, &cur, out, err);
		gcs_object_clear(&cur);
		json_decref(meta);
		return rc;
	}
	json_decref(meta);
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lock changed hands too often while acquiring; retry shortly");
}

bool
svc_key_given(const api_lease_req *req, const gcs_object *o, api_err *err)
{
	if (strcmp(lease_id_of(o), req->lease_id) == 0 ||
	    strcmp(lease_key_of(o), req->lease_id) != 0 ||
	    (!req->admin && strcmp(lease_owner_of(o), req->owner) != 0))
		return false;
	api_fail(err, API_BAD_REQUEST,
	    "this lease_id is the idempotency key the lease was acquired "
	    "with, not its lease_id: refresh and release with the lease_id "
	    "the acquire answered");
	err->reason = "lease_id_is_key";
	return true;
}

static const char lease_gone[] =
    "no lease holds this lock any more: it was released or expired and "
    "taken over; stop the work it protected";

/*
 * Whether CUR, the object at REQ's name, is the lease REQ names: API_OK,
 * else the refusal in ERR.  KNOWN is the generation an earlier round
 * found (0: none): a lease is one grant, so an object of another
 * generation is another lease, lost to the caller even if it carries the
 * same lease_id.  The client key of a lease of the caller's own, sent as
 * a lease_id, is a 400.  Owner mismatches are refused here.
 */
static int
lease_judge(const api_lease_req *req, int64_t known, const gcs_object *cur,
    api_err *err)
{
	if (lease_is_head(cur)) /* the caller looks among its leases */
		return api_fail(err, API_LEASE_NOT_FOUND, lease_gone);
	if (known == 0 && req->metageneration == 0 &&
	    svc_key_given(req, cur, err))
		return API_BAD_REQUEST;
	if (strcmp(lease_id_of(cur), req->lease_id) != 0 ||
	    (known != 0 && cur->generation != known))
		return api_fail(err, API_LEASE_LOST,
		    "the lock is now held by another lease; stop the work it "
		    "protected");
	if (req->metageneration != 0 &&
	    (cur->generation != req->generation ||
	        cur->metageneration != req->metageneration)) {
		api_fail(err, API_LEASE_LOST,
		    "the lease was renewed since the version asked for");
		err->reason = "lease_renewed"; /* internal: give-backs only */
		return API_LEASE_LOST;
	}
	if (lease_over_group_pending(cur))
		/* Our writer's attempt over a group, never granted: no
		 * lease of ours, and not to be deleted as one (group leases
		 * may be live beside it, and NAME must stand for them). */
		return api_fail(err, API_LEASE_NOT_FOUND,
		    "no lease holds this lock for this lease_id: its acquire "
		    "was never granted");
	if (!req->admin && strcmp(lease_owner_of(cur), req->owner) != 0)
		return api_fail(err, API_FORBIDDEN,
		    "this lease belongs to another owner");
	return API_OK;
}

/*
 * Find the live object of the lease named in REQ: from the cache when this
 * instance wrote it last, else by reading it (lease_judge; *REF's
 * generation is the one an earlier round found when not USE_CACHE).  On
 * API_OK *ref holds the generations to write against.
 */
static int
lease_lookup(api_service *svc, const api_lease_req *req, bool use_cache,
    lease_ref *ref, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc;

	if (use_cache && req->metageneration == 0 &&
	    lease_cache_get(svc->cache, req->name, req->lease_id, ref)) {
		if (!req->admin && strcmp(ref->owner, req->owner) != 0)
			return api_fail(err, API_FORBIDDEN,
			    "this lease belongs to another owner");
		return API_OK;
	}
	rc = gcs_get(svc->store, req->name, &cur, &ge);
	if (rc == GCS_NOT_FOUND) {
		lease_cache_del(svc->cache, req->name);
		return api_fail(err, API_LEASE_NOT_FOUND, lease_gone);
	}
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	rc = lease_judge(req, use_cache ? 0 : ref->generation, &cur, err);
	if (rc == API_OK) {
		lease_ref_of(ref, req->lease_id, lease_owner_of(&cur), &cur);
		lease_cache_put(svc->cache, req->name, ref);
	}
	gcs_object_clear(&cur);
	return rc;
}

/* RC of a first lease_lookup says the lock's object is not this lease:
 * it may be a lease of a semaphore or shared lock (group.c). */
static bool
not_exclusive(int rc)
{
	return rc == API_LEASE_LOST || rc == API_LEASE_NOT_FOUND;
}

/*
 * A lease whose TTL has passed but that nobody took over yet can still be
 * refreshed or released: the object never stopped existing, so nobody else
 * was granted the lock in between, and a concurrent takeover's delete
 * carries the old metageneration and fails.
 */
int
api_refresh(api_service *svc, const api_lease_req *req, api_lock *out,
    api_err *err)
{
	lease_ref ref;
	gcs_object obj;
	gcs_err ge;
	api_err gerr;
	bool seen = false; /* the lease was found once: it was real */
	int rc, grc, i;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	memset(&ref, 0, sizeof(ref));
	if (group_known(svc, req))
		return group_refresh(svc, req, out, err);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		rc = lease_lookup(svc, req, i == 0, &ref, err);
		if (!seen && not_exclusive(rc)) {
			/* Perhaps a lease of a semaphore or shared lock. */
			memset(&gerr, 0, sizeof(gerr));
			grc = group_refresh(svc, req, out, &gerr);
			if (grc != API_LEASE_NOT_FOUND) {
				*err = gerr;
				return grc;
			}
		}
		if (rc != API_OK) {
			/* Only a lease known to have existed can be lost:
			 * any caller can send a lease_id nobody ever held. */
			if (seen &&
			    (rc == API_LEASE_LOST || rc == API_LEASE_NOT_FOUND))
				emit(svc, API_EV_LOST, req->name, req->owner,
				    NULL, req->owner, ref.generation, 0);
			return rc;
		}
		seen = true;
		rc = svc_renew(svc, req->name, ref.generation,
		    ref.metageneration, req->ttl, 0, &obj, &ge);
		if (rc == GCS_OK) {
			lease_read(req->name, &obj, true, out);
			svc_remember(svc, req->name, req->lease_id, ref.owner,
			    &obj);
			emit(svc, API_EV_REFRESHED, req->name, ref.owner,
			    out->holder, req->owner, obj.generation,
			    obj.updated_ms);
			gcs_object_clear(&obj);
			return API_OK;
		}
		if (rc == GCS_PRECONDITION)
			continue; /* moved under us: re-read and decide */
		if (rc == GCS_NOT_FOUND) {
			lease_cache_del(svc->cache, req->name);
			emit(svc, API_EV_LOST, req->name, ref.owner, NULL,
			    req->owner, ref.generation, 0);
			return api_fail(err, API_LEASE_NOT_FOUND, lease_gone);
		}
		return svc_store_fail(err, &ge);
	}
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lease kept changing while refreshing; retry shortly");
}

/* The lease REF of REQ is gone from the store: forgotten, announced. */
static int
released(api_service *svc, const api_lease_req *req, const lease_ref *ref,
    api_err *err)
{
	memset(err, 0, sizeof(*err));
	lease_cache_del(svc->cache, req->name);
	emit(svc, API_EV_RELEASED, req->name, ref->owner, NULL, req->owner,
	    ref->generation, 0);
	return API_OK;
}

/*
 * A release whose retried delete was refused (412) finds another lease, or
 * a group's head, at REQ's name: its first attempt, unanswered, may have
 * removed the lease REF, and that object came after; or the first attempt
 * failed and the lease expired and was taken over meanwhile, and the
 * caller had lost it (design 1).  A takeover creates its lease only once
 * ours is past its expiry (and the margin): an object there created
 * before that proves ours was removed while it lived, so released.  But
 * a semaphore's or shared lock's takeover patches our object into its
 * head instead (and an exclusive lease over that head patches it again):
 * an object of our generation there is ours, never removed, taken over,
 * its creation time still ours.  Else lost; ERR set on a store failure
 * too.
 */
static int
released_or_lost(api_service *svc, const api_lease_req *req,
    const lease_ref *ref, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc = gcs_get(svc->store, req->name, &cur, &ge);
	bool removed_live = rc == GCS_NOT_FOUND ||
	    (rc == GCS_OK && cur.generation != ref->generation &&
	        ref->updated_ms > 0 && cur.created_ms > 0 &&
	        cur.created_ms <= lease_ends_ms(ref->updated_ms, ref->ttl) +
	                API_EXPIRY_MARGIN_MS);

	if (rc == GCS_OK)
		gcs_object_clear(&cur);
	if (rc != GCS_OK && rc != GCS_NOT_FOUND)
		return svc_store_fail(err, &ge);
	if (removed_live)
		return released(svc, req, ref, err);
	lease_cache_del(svc->cache, req->name);
	return api_fail(err, API_LEASE_LOST,
	    "the release's first delete went unanswered, and meanwhile the "
	    "lease expired and was taken over: the work it protected may "
	    "have outlived it");
}

int
api_release(api_service *svc, const api_lease_req *req, api_err *err)
{
	lease_ref ref;
	gcs_err ge;
	api_err gerr;
	int rc, i;
	bool sent = false; /* a delete of ours may have been applied */
	bool exact = req->metageneration != 0; /* one version, exclusive */

	memset(err, 0, sizeof(*err));
	memset(&ref, 0, sizeof(ref));
	if (!exact && group_known(svc, req))
		return group_release(svc, req, err);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		rc = lease_lookup(svc, req, i == 0, &ref, err);
		if (i == 0 && !exact && not_exclusive(rc)) {
			memset(&gerr, 0, sizeof(gerr));
			if ((rc = group_release(svc, req, &gerr)) !=
			    API_LEASE_NOT_FOUND) {
				*err = gerr;
				return rc;
			}
			rc = (int)err->code;
		}
		/* Gone: whoever removed ours, released (design 1).  Another
		 * lease (ours renewed since was not removed), or a group's
		 * head (no lease of ours, as lease_judge reads it): perhaps
		 * after our removal, perhaps a takeover. */
		if (sent &&
		    (rc == API_LEASE_NOT_FOUND ||
		        (rc == API_LEASE_LOST && err->reason == NULL)))
			return released_or_lost(svc, req, &ref, err);
		if (rc != API_OK)
			return rc;
		rc = gcs_remove(svc->store, req->name, ref.generation,
		    ref.metageneration, &ge);
		/* A 404 after a retried delete: the first attempt went
		 * through and its answer was lost. */
		if (rc == GCS_OK || (rc == GCS_NOT_FOUND && ge.attempts > 1))
			return released(svc, req, &ref, err);
		if (rc == GCS_PRECONDITION) {
			/* A 412 after a retried delete: the first attempt
			 * may have removed our lease (and someone else may
			 * have taken the free lock since).  If the lookup
			 * finds our generation gone, the lock is free of
			 * this lease: released, whoever removed it. */
			sent = sent || ge.attempts > 1;
			continue;
		}
		if (rc == GCS_NOT_FOUND) {
			lease_cache_del(svc->cache, req->name);
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
api_inspect(api_service *svc, const char *name, api_lock *out, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	rc = gcs_get(svc->store, name, &cur, &ge);
	if (rc == GCS_NOT_FOUND)
		return api_fail(err, API_NOT_HELD, "nobody holds this lock");
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if (lease_is_head(&cur)) {
		gcs_object_clear(&cur);
		return group_inspect(svc, name, out, err);
	}
	lease_read(name, &cur, false, out);
	gcs_object_clear(&cur);
	if (out->expired)
		return api_fail(err, API_NOT_HELD,
		    "nobody holds this lock: its last lease expired");
	return API_OK;
}

/* The force-release of lease O of NAME is done: forgotten, announced. */
static int
forced(api_service *svc, const char *name, const char *actor,
    const char *reason, const gcs_object *o)
{
	lease_cache_del(svc->cache, name);
	svc_emit(svc, API_EV_FORCED, name, lease_owner_of(o),
	    json_string_value(json_object_get(o->metadata, LEASE_KEY_HOLDER)),
	    actor, reason, lease_token_of(o), o->now_ms);
	return API_OK;
}

/*
 * A delete of ours answered 412 after a retry may have applied (its
 * first answer lost), and the lock been taken since: the lease it aimed
 * at gone (no object, or one of another generation) is the force done,
 * never a mismatch, and never a reason to remove the new lease too.
 */
int
api_force_release(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t expect_token, api_err *err)
{
	gcs_object cur, sent; /* sent: what a delete of ours may have ended */
	gcs_err ge;
	int rc, i;

	memset(err, 0, sizeof(*err));
	memset(&sent, 0, sizeof(sent));
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		rc = gcs_get(svc->store, name, &cur, &ge);
		if (sent.metadata != NULL &&
		    (rc == GCS_NOT_FOUND ||
		        (rc == GCS_OK && cur.generation != sent.generation))) {
			if (rc == GCS_OK)
				gcs_object_clear(&cur);
			rc = forced(svc, name, actor, reason, &sent);
			gcs_object_clear(&sent);
			return rc;
		}
		gcs_object_clear(&sent);
		if (rc == GCS_NOT_FOUND)
			return api_fail(err, API_NOT_HELD,
			    "nobody holds this lock");
		if (rc != GCS_OK)
			return svc_store_fail(err, &ge);
		if (lease_is_head(&cur)) {
			gcs_object_clear(&cur);
			if (expect_token == 0)
				return api_fail(err, API_BAD_REQUEST,
				    "this lock is held by several leases (a "
				    "semaphore or shared lock): name the lease "
				    "to remove by fencing_token");
			return group_force(svc, name, actor, reason,
			    expect_token, err);
		}
		if (expect_token != 0 && lease_token_of(&cur) != expect_token) {
			gcs_object_clear(&cur);
			api_fail(err, API_LEASE_LOST,
			    "the lock is now held by another lease (fencing "
			    "token other than %" PRId64 "); look again before "
			    "force-releasing it",
			    expect_token);
			err->reason = "fencing_token_mismatch";
			return API_LEASE_LOST;
		}
		/* An exclusive lease over a group: with group leases
		 * live, it becomes a head again instead (the name must
		 * exist while any may be valid). */
		rc = lease_over_group(&cur)
		    ? group_guard_removal(svc, name, &cur, err)
		    : 0;
		if (rc == 0) {
			rc = gcs_remove(svc->store, name, cur.generation,
			    cur.metageneration, &ge);
			if (rc == GCS_PRECONDITION && ge.attempts > 1)
				gcs_object_copy(&sent, &cur);
		} else if (rc == 1)
			rc = GCS_OK;
		else if (rc == 2)
			rc = GCS_PRECONDITION;
		else {
			gcs_object_clear(&cur);
			return (int)err->code;
		}
		if (rc == GCS_OK || (rc == GCS_NOT_FOUND && ge.attempts > 1)) {
			forced(svc, name, actor, reason, &cur);
			gcs_object_clear(&cur);
			return API_OK;
		}
		gcs_object_clear(&cur);
		if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
			continue;
		return svc_store_fail(err, &ge);
	}
	gcs_object_clear(&sent);
	err->retry_after = 1;
	return api_fail(err, API_BUSY,
	    "the lock kept changing while force-releasing; retry shortly");
}
