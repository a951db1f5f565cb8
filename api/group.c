/*
 * group.c: counted semaphores and shared (read) locks over the store
 * contract: the layout and safety argument are in README ("Semaphores and
 * shared locks: the storage layout").
 *
 * A group is a head object at NAME (metadata lg_kind=group, no lease, no
 * expiry) and one object NAME#LEASE_ID per lease.  An acquire inserts its
 * own lease object, recording the head's generation and metageneration,
 * then lists the group: it is granted only if the head is unchanged,
 * every live lease has its mode and limit, and the live leases, its own
 * and pending ones included, are within the limit.  Of any set of leases
 * valid at once, the one that listed last saw all the others, each
 * inserted before its own listing.  A pending lease only ever causes a
 * refusal.  Every loop is bounded; liveness under contention is left to
 * the waiters' retries.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "lease.h"

#define GROUP_LIST_PAGE 100 /* objects per listing page */
#define GROUP_SWEEP_MAX 8   /* expired leases one acquire removes */

/* The objects of one group, as one listing saw them. */
typedef struct group_view {
	bool has_head;
	gcs_object head;   /* the object at NAME (a head, or a lease) */
	gcs_entry *leases; /* owned: lease objects; markers left out */
	size_t n, cap;
	bool truncated; /* more objects than API_GROUP_SCAN_PAGES hold */
} group_view;

static void
view_clear(group_view *v)
{
	size_t i;

	gcs_object_clear(&v->head);
	for (i = 0; i < v->n; i++) {
		free(v->leases[i].name);
		gcs_object_clear(&v->leases[i].obj);
	}
	free(v->leases);
	memset(v, 0, sizeof(*v));
}

/* NAME#LEASE_ID into BUF (GCS_NAME_MAX + 1 bytes). */
static void
obj_name(char *buf, size_t len, const char *name, const char *lease_id)
{
	snprintf(buf, len, "%s%c%s", name, LEASE_GROUP_SEP, lease_id);
}

static int
is_marker(const gcs_object *o)
{
	const char *k =
	    json_string_value(json_object_get(o->metadata, LEASE_KEY_KIND));

	return k != NULL && strcmp(k, LEASE_KIND_TOKEN) == 0;
}

/* Take entry E of NAME's listing into V: 1 when E is beyond the group
 * (the listing is done), 0 taken or skipped, -1 out of memory. */
static int
view_take(group_view *v, const char *name, gcs_entry *e)
{
	size_t len = strlen(name);
	gcs_entry *grown;

	if (strcmp(e->name, name) == 0) {
		gcs_object_clear(&v->head);
		v->head = e->obj;
		memset(&e->obj, 0, sizeof(e->obj));
		v->has_head = true;
		return 0;
	}
	if (strncmp(e->name, name, len) != 0 ||
	    (unsigned char)e->name[len] > LEASE_GROUP_SEP)
		return 1;
	/* Another client's object that sorts below the group (no lock name
	 * holds such a byte): not ours, and the group follows it. */
	if (e->name[len] != LEASE_GROUP_SEP)
		return 0;
	if (is_marker(&e->obj))
		return 0;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 8;
		if ((grown = realloc(v->leases, cap * sizeof(*grown))) == NULL)
			return -1;
		v->leases = grown;
		v->cap = cap;
	}
	v->leases[v->n++] = *e;
	memset(e, 0, sizeof(*e));
	return 0;
}

/* List the objects of NAME (the head and NAME#... leases: contiguous,
 * '#' sorting below every lock-name character) into V.  The store's
 * status; V is cleared on failure. */
static int
view_scan(api_service *svc, const char *name, group_view *v, gcs_err *ge)
{
	char *token = NULL;
	gcs_page page;
	size_t i;
	int rc = GCS_OK, pages, done = 0, t;

	memset(v, 0, sizeof(*v));
	for (pages = 0; !done; pages++) {
		if (pages == API_GROUP_SCAN_PAGES) {
			v->truncated = true;
			break;
		}
		/* Small first: most groups are; then as the store allows,
		 * so that a limit of API_LIMIT_MAX (and as many pending)
		 * fits in API_GROUP_SCAN_PAGES. */
		rc = gcs_list(svc->store, name,
		    pages == 0 ? GROUP_LIST_PAGE : GCS_LIST_PAGE_MAX, token,
		    &page, ge);
		free(token);
		token = NULL;
		if (rc != GCS_OK)
			break;
		for (i = 0; i < page.n && !done; i++) {
			/* Entries carry the page's store time. */
			page.items[i].obj.now_ms = page.now_ms;
			if ((t = view_take(v, name, &page.items[i])) < 0) {
				rc = gcs_fail(ge, GCS_NOMEM, "out of memory");
				done = 1;
			} else if (t > 0)
				done = 1;
		}
		token = page.next_token;
		page.next_token = NULL;
		gcs_page_clear(&page);
		if (token == NULL)
			done = 1;
	}
	free(token);
	if (rc != GCS_OK)
		view_clear(v);
	return rc;
}

/* V saw the lease object ONAME (a force release may have removed it). */
static bool
view_has(const group_view *v, const char *oname)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		if (strcmp(v->leases[i].name, oname) == 0)
			return true;
	return false;
}

/* The head as V saw it is the group head of generation GEN and
 * metageneration METAGEN. */
static bool
head_is(const group_view *v, int64_t gen, int64_t metagen)
{
	return v->has_head && lease_is_head(&v->head) &&
	    v->head.generation == gen && v->head.metageneration == metagen;
}

static bool
same_kind(const gcs_object *o, api_mode mode, int limit)
{
	api_mode m;
	int l;

	lease_mode_of(o, &m, &l);
	return m == mode && (mode == API_MODE_SHARED || l == limit);
}

static int
req_limit(const api_acquire_req *req)
{
	return req->mode == API_MODE_SHARED || req->limit < 1 ? 1 : req->limit;
}

/* The live lease of V acquired first, other than the one named SKIP
 * (may be NULL); NULL when none. */
static const gcs_object *
earliest_live(const group_view *v, const char *skip)
{
	const gcs_object *best = NULL;
	size_t i;

	for (i = 0; i < v->n; i++) {
		const gcs_object *o = &v->leases[i].obj;
		if (lease_expired(o) ||
		    (skip != NULL && strcmp(v->leases[i].name, skip) == 0))
			continue;
		if (best == NULL || o->created_ms < best->created_ms ||
		    (o->created_ms == best->created_ms &&
		        o->generation < best->generation))
			best = o;
	}
	return best;
}

static int
by_acquired(const void *a, const void *b)
{
	const gcs_object *x = *(const gcs_object *const *)a;
	const gcs_object *y = *(const gcs_object *const *)b;

	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return x->generation < y->generation ? -1
	    : x->generation > y->generation  ? 1
	                                     : 0;
}

/* Every live lease of V but the object named SKIP (NULL: none) as holder
 * objects, earliest acquired first, into OUT->holders; the number, or -1
 * out of memory. */
static int
view_holders(const group_view *v, const char *name, const char *skip,
    api_lock *out)
{
	const gcs_object **live;
	api_lock one;
	json_t *h;
	size_t i, n = 0;

	if ((live = calloc(v->n + 1, sizeof(*live))) == NULL)
		return -1;
	for (i = 0; i < v->n; i++)
		if (!lease_expired(&v->leases[i].obj) &&
		    (skip == NULL || strcmp(v->leases[i].name, skip) != 0))
			live[n++] = &v->leases[i].obj;
	qsort(live, n, sizeof(*live), by_acquired);
	json_decref(out->holders);
	out->holders = json_array();
	for (i = 0; i < n && out->holders != NULL; i++) {
		lease_read(name, live[i], false, &one);
		h = lease_holder_json(&one);
		api_lock_clear(&one);
		if (h == NULL || json_array_append_new(out->holders, h) != 0) {
			json_decref(out->holders);
			out->holders = NULL;
		}
	}
	free(live);
	return out->holders == NULL ? -1 : (int)n;
}

/* Seconds until the earliest expiry of the leases shown in L. */
static int
retry_after_lock(const api_lock *l)
{
	int64_t left, s;

	if (l->now_ms <= 0)
		return 2;
	left = l->expires_at_ms + API_EXPIRY_MARGIN_MS - l->now_ms;
	s = (left + 999) / 1000;
	return s < 1 ? 1 : s > 60 ? 60 : (int)s;
}

int
group_refuse(const api_acquire_req *req, const gcs_object *held, bool mismatch,
    api_lock *out, api_err *err)
{
	char lim[16];

	lease_read(req->name, held, false, out);
	err->retry_after = retry_after_lock(out);
	if (!mismatch)
		return api_fail(err, API_LOCKED,
		    "the lock is held by %.180s until %s", out->owner,
		    "its lease expires or is released");
	if (out->mode == API_MODE_SHARED)
		snprintf(lim, sizeof(lim), "any");
	else
		snprintf(lim, sizeof(lim), "%d", out->limit);
	api_fail(err, API_LOCKED,
	    "the lock is held with mode=%s and limit=%s; ask with the same "
	    "mode and limit, or wait until its holders release it",
	    out->mode == API_MODE_SHARED ? "shared" : "exclusive", lim);
	err->reason = "limit_mismatch";
	return API_LOCKED;
}

/* A refusal showing V's live leases (HELD the one on top) but the
 * refused one's own, OWN (NULL: none). */
static int
refuse_view(const api_acquire_req *req, const group_view *v,
    const gcs_object *held, const char *own, bool mismatch, api_lock *out,
    api_err *err)
{
	int rc = group_refuse(req, held, mismatch, out, err);

	if (view_holders(v, req->name, own, out) < 0) {
		api_lock_clear(out);
		return api_fail(err, API_INTERNAL, "out of memory");
	}
	return rc;
}

/*
 * Judge V for REQ, leaving out REQ's own lease OWN (an object name, or
 * NULL): 0 when a lease of REQ fits, else 1 with *HELD the live lease to
 * show and *MISMATCH whether the holders use another mode or limit.  A
 * truncated view is full.
 */
static int
judge(const group_view *v, const api_acquire_req *req, const char *own,
    const gcs_object **held, bool *mismatch)
{
	int limit = req_limit(req), live = 0;
	bool group = req->mode == API_MODE_SHARED || limit > 1;
	size_t i;

	*mismatch = false;
	*held = earliest_live(v, own);
	for (i = 0; i < v->n; i++) {
		const gcs_object *o = &v->leases[i].obj;
		if (lease_expired(o) ||
		    (own != NULL && strcmp(v->leases[i].name, own) == 0))
			continue;
		live++;
		if (!group || !same_kind(o, req->mode, limit)) {
			/* Shown: the earliest lease, as on every answer,
			 * unless it is of our kind (the others pending).  A
			 * semaphore's holders, to anyone but their own kind:
			 * another limit.  Shared readers to an exclusive
			 * acquire: simply locked. */
			api_mode m;
			int l;
			if (group && same_kind(*held, req->mode, limit))
				*held = o;
			lease_mode_of(*held, &m, &l);
			*mismatch = !(m == API_MODE_SHARED &&
			    req->mode == API_MODE_EXCLUSIVE && limit == 1);
			return 1;
		}
	}
	if (*held != NULL && v->truncated)
		return 1;
	if (!group)
		return live > 0;
	return req->mode != API_MODE_SHARED && live + 1 > limit;
}

/* Metadata that turns an object with metadata OLD into a group head:
 * every key of OLD deleted, lg_kind set.  New reference or NULL. */
static json_t *
head_patch(const json_t *old)
{
	json_t *p = json_object();
	const char *k;
	json_t *v;

	if (p == NULL)
		return NULL;
	json_object_foreach((json_t *)old, k, v)
	{
		if (json_object_set_new(p, k, json_null()) != 0)
			goto fail;
	}
	if (json_object_set_new(p, LEASE_KEY_KIND,
	        json_string(LEASE_KIND_GROUP)) != 0)
		goto fail;
	return p;
fail:
	json_decref(p);
	return NULL;
}

/* Patch CUR (an exclusive lease) of NAME into a group head; the store's
 * status, OUT the head on GCS_OK. */
static int
patch_to_head(api_service *svc, const char *name, const gcs_object *cur,
    gcs_object *out, gcs_err *ge)
{
	json_t *p = head_patch(cur->metadata);
	int rc;

	if (p == NULL)
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	rc = gcs_patch(svc->store, name, cur->generation, cur->metageneration,
	    p, out, ge);
	json_decref(p);
	return rc;
}

/* Remove object NAME at O's generations, for cleaning up; failures are
 * left for the next one (an expired lease counts for nothing). */
static void
remove_quietly(api_service *svc, const char *name, const gcs_object *o)
{
	gcs_err ge;

	(void)gcs_remove(svc->store, name, o->generation, o->metageneration,
	    &ge);
}

/* Remove up to GROUP_SWEEP_MAX leases V saw expired: a crashed holder's
 * object would otherwise stay in every listing.  Safe: an expired lease
 * counts for nothing, and its holder's refresh would be lost anyway. */
static void
sweep_expired(api_service *svc, const group_view *v)
{
	size_t i;
	int n = 0;

	for (i = 0; i < v->n && n < GROUP_SWEEP_MAX; i++)
		if (lease_expired(&v->leases[i].obj)) {
			remove_quietly(svc, v->leases[i].name,
			    &v->leases[i].obj);
			n++;
		}
}

#define AGAIN (-1) /* the head moved: start over */

/*
 * Step 1 of a group acquire: the group head of REQ's name into HEAD,
 * creating it, or taking over an expired exclusive lease by patching it
 * into a head (never delete and insert: see README).  API_OK, AGAIN, or
 * an answer (a live exclusive lease refuses).
 */
static int
head_ready(api_service *svc, const api_acquire_req *req, gcs_object *head,
    api_lock *out, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	json_t *m;
	int rc;

	rc = gcs_get(svc->store, req->name, &cur, &ge);
	if (rc == GCS_NOT_FOUND) {
		if ((m = json_pack("{s:s}", LEASE_KEY_KIND,
		         LEASE_KIND_GROUP)) == NULL)
			return api_fail(err, API_INTERNAL, "out of memory");
		rc = gcs_insert(svc->store, req->name, m, head, &ge);
		json_decref(m);
		if (rc == GCS_OK)
			return API_OK;
		return rc == GCS_PRECONDITION ? AGAIN
		                              : svc_store_fail(err, &ge);
	}
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if (lease_is_head(&cur)) {
		*head = cur;
		return API_OK;
	}
	if (!lease_expired(&cur)) {
		/* An exclusive holder: to a semaphore, another limit. */
		rc = group_refuse(req, &cur, req->mode != API_MODE_SHARED, out,
		    err);
		gcs_object_clear(&cur);
		return rc;
	}
	rc = patch_to_head(svc, req->name, &cur, head, &ge);
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

/* 1 when O (object NAME) is REQ's own live lease: its lease_id, or its
 * client key, and its owner. */
static int
is_ours(const gcs_object *o, const api_acquire_req *req)
{
	const char *key = req->key[0] != '\0' ? req->key : req->lease_id;

	return strcmp(lease_key_of(o), key) == 0 &&
	    strcmp(lease_owner_of(o), req->owner) == 0 && !lease_expired(o);
}

/* Answer REQ with lease O (object ONAME), granted or found again. */
static int
grant(api_service *svc, const api_acquire_req *req, const char *oname,
    const gcs_object *o, bool found, api_lock *out)
{
	lease_ref known;
	bool announced = found &&
	    lease_cache_get(svc->cache, oname, lease_id_of(o), &known) &&
	    known.generation == o->generation;

	lease_read(req->name, o, true, out);
	svc_remember(svc, oname, lease_id_of(o), req->owner, o);
	svc_emit(svc, announced ? API_EV_REFRESHED : API_EV_GRANTED, req->name,
	    req->owner, req->holder, req->owner, NULL, lease_token_of(o),
	    o->updated_ms);
	return API_OK;
}

/*
 * A keyed acquire whose client key names a live lease of its owner in
 * the group: 1 when that lease was renewed and OUT is the answer, 0 when
 * there is none (or it moved meanwhile: acquire anew), 2 on a store
 * failure (ERR set).
 */
static int
renew_keyed(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err)
{
	group_view v;
	gcs_object obj;
	gcs_err ge;
	size_t i;
	int rc;

	if (view_scan(svc, req->name, &v, &ge) != GCS_OK) {
		svc_store_fail(err, &ge);
		return 2;
	}
	for (i = 0; i < v.n; i++)
		if (is_ours(&v.leases[i].obj, req))
			break;
	if (i == v.n) {
		view_clear(&v);
		return 0;
	}
	rc = svc_renew(svc, v.leases[i].name, v.leases[i].obj.generation,
	    v.leases[i].obj.metageneration, req->ttl, &obj, &ge);
	if (rc == GCS_OK) {
		grant(svc, req, v.leases[i].name, &obj, true, out);
		gcs_object_clear(&obj);
		view_clear(&v);
		return 1;
	}
	view_clear(&v);
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
		return 0; /* it moved: go on as a new lease */
	svc_store_fail(err, &ge);
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
 * judge.  API_OK granted, AGAIN, or a refusal (our lease deleted).
 */
static int
try_group(api_service *svc, const api_acquire_req *req, json_t *meta,
    const gcs_object *head, api_lock *out, api_err *err)
{
	char oname[GCS_NAME_MAX + 1], num[32];
	const gcs_object *held;
	gcs_object mine;
	group_view v;
	gcs_err ge;
	bool mismatch;
	int rc;

	obj_name(oname, sizeof(oname), req->name, req->lease_id);
	api_fmt_int(num, sizeof(num), head->generation);
	json_object_set_new(meta, LEASE_KEY_HEAD_GEN, json_string(num));
	api_fmt_int(num, sizeof(num), head->metageneration);
	json_object_set_new(meta, LEASE_KEY_HEAD_METAGEN, json_string(num));
	rc = insert_own(svc, req, oname, meta, &mine, &ge);
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
		return AGAIN;
	if (rc != GCS_OK)
		return svc_store_fail(err, &ge);
	if ((rc = view_scan(svc, req->name, &v, &ge)) != GCS_OK) {
		/* Unjudged, so not granted: withdrawn if the store lets us
		 * (else it only causes refusals until it expires). */
		remove_quietly(svc, oname, &mine);
		gcs_object_clear(&mine);
		return svc_store_fail(err, &ge);
	}
	if (!view_has(&v, oname) ||
	    !head_is(&v,
	        lease_meta_long(&mine, LEASE_KEY_HEAD_GEN, 1, GCS_GEN_MAX, 0),
	        lease_meta_long(&mine, LEASE_KEY_HEAD_METAGEN, 1, GCS_GEN_MAX,
	            0))) {
		rc = AGAIN;
	} else if (judge(&v, req, oname, &held, &mismatch) != 0) {
		rc = refuse_view(req, &v, held, oname, mismatch, out, err);
	} else {
		rc = grant(svc, req, oname, &mine, false, out);
		sweep_expired(svc, &v);
		gcs_object_clear(&mine);
		view_clear(&v);
		return rc;
	}
	if (rc != AGAIN)
		sweep_expired(svc, &v);
	remove_quietly(svc, oname, &mine);
	gcs_object_clear(&mine);
	view_clear(&v);
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
		rc = head_ready(svc, req, &head, out, err);
		if (rc == API_OK) {
			rc = try_group(svc, req, meta, &head, out, err);
			gcs_object_clear(&head);
		}
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
 * over a group's fencing token; 0 and *TOKEN, or the store's status. */
static int
insert_marker(api_service *svc, const char *oname, int64_t *token, gcs_err *ge)
{
	gcs_object o;
	json_t *m = json_pack("{s:s}", LEASE_KEY_KIND, LEASE_KIND_TOKEN);
	int rc;

	if (m == NULL)
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	rc = gcs_insert(svc->store, oname, m, &o, ge);
	json_decref(m);
	if (rc == GCS_PRECONDITION) {
		/* Ours from an earlier attempt, when a marker. */
		rc = gcs_get(svc->store, oname, &o, ge);
		if (rc == GCS_OK && !is_marker(&o)) {
			gcs_object_clear(&o);
			rc = gcs_fail(ge, GCS_PRECONDITION, "not a marker");
		}
	}
	if (rc == GCS_OK)
		*token = o.generation;
	gcs_object_clear(&o);
	return rc;
}

/* Patch HEAD of NAME into the exclusive lease META flagged over a group,
 * with fencing token TOKEN.  The store's status; OUT on GCS_OK. */
static int
patch_to_lease(api_service *svc, const char *name, const json_t *meta,
    const gcs_object *head, int64_t token, gcs_object *out, gcs_err *ge)
{
	char num[32];
	json_t *p = json_copy((json_t *)meta);
	int rc;

	api_fmt_int(num, sizeof(num), token);
	if (p == NULL ||
	    json_object_set_new(p, LEASE_KEY_KIND, json_null()) != 0 ||
	    json_object_set_new(p, LEASE_KEY_OVER_GROUP, json_string("1")) ||
	    json_object_set_new(p, LEASE_KEY_TOKEN, json_string(num))) {
		json_decref(p);
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	}
	rc = gcs_patch(svc->store, name, head->generation, head->metageneration,
	    p, out, ge);
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

/*
 * The exclusive acquire over a group head: list; with no live group
 * lease, patch the head into our lease (flagged lg_over_group, one
 * write; the head is never deleted, so the default path's insert stays
 * safe), then list again: a group lease inserted meanwhile may have been
 * granted before our patch, so we patch the head back and refuse.
 */
int
group_exclusive_over(api_service *svc, const api_acquire_req *req,
    const json_t *meta, const gcs_object *head, api_lock *out, api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	const gcs_object *held;
	gcs_object lease, back;
	group_view v;
	gcs_err ge;
	int64_t token = 0;
	bool mismatch;
	int rc;

	if (view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (judge(&v, req, NULL, &held, &mismatch) != 0) {
		rc = refuse_view(req, &v, held, NULL, mismatch, out, err);
		view_clear(&v);
		return rc;
	}
	view_clear(&v);
	obj_name(oname, sizeof(oname), req->name, req->lease_id);
	if ((rc = insert_marker(svc, oname, &token, &ge)) != GCS_OK) {
		if (rc != GCS_PRECONDITION)
			return svc_store_fail(err, &ge);
		err->reason = "moved"; /* not ours there: start over */
		return API_BUSY;
	}
	rc = patch_to_lease(svc, req->name, meta, head, token, &lease, &ge);
	if (rc != GCS_OK) {
		remove_marker(svc, oname, token);
		if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND) {
			err->reason = "moved";
			return API_BUSY;
		}
		return svc_store_fail(err, &ge);
	}
	rc = view_scan(svc, req->name, &v, &ge);
	if (rc == GCS_OK && judge(&v, req, NULL, &held, &mismatch) != 0) {
		rc = refuse_view(req, &v, held, NULL, mismatch, out, err);
		if (patch_to_head(svc, req->name, &lease, &back, &ge) == GCS_OK)
			gcs_object_clear(&back);
	} else if (rc != GCS_OK) {
		/* Unjudged: give the head back rather than hold it blind. */
		rc = svc_store_fail(err, &ge);
		if (patch_to_head(svc, req->name, &lease, &back, &ge) == GCS_OK)
			gcs_object_clear(&back);
	} else {
		rc = grant(svc, req, req->name, &lease, false, out);
	}
	view_clear(&v);
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
	bool live = false;

	if (view_scan(svc, name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge), -1;
	for (i = 0; i < v.n; i++)
		live = live || !lease_expired(&v.leases[i].obj);
	view_clear(&v);
	if (!live)
		return 0;
	rc = patch_to_head(svc, name, cur, &head, &ge);
	gcs_object_clear(&head);
	if (rc == GCS_OK)
		return 1;
	if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND)
		return 2;
	return svc_store_fail(err, &ge), -1;
}

/* The group lease REQ names, into REF (from the cache when USE_CACHE).
 * API_OK, or API_LEASE_NOT_FOUND / API_FORBIDDEN / a store failure. */
static int
group_lookup(api_service *svc, const api_lease_req *req, const char *oname,
    bool use_cache, lease_ref *ref, api_err *err)
{
	gcs_object cur;
	gcs_err ge;
	int rc;

	if (use_cache &&
	    lease_cache_get(svc->cache, oname, req->lease_id, ref)) {
		if (!req->admin && strcmp(ref->owner, req->owner) != 0)
			return api_fail(err, API_FORBIDDEN,
			    "this lease belongs to another owner");
		return API_OK;
	}
	rc = gcs_get(svc->store, oname, &cur, &ge);
	if (rc == GCS_OK &&
	    (is_marker(&cur) || strcmp(lease_id_of(&cur), req->lease_id))) {
		gcs_object_clear(&cur);
		rc = GCS_NOT_FOUND;
	}
	if (rc == GCS_NOT_FOUND) {
		lease_cache_del(svc->cache, oname);
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
	memset(ref, 0, sizeof(*ref));
	api_copy(ref->lease_id, sizeof(ref->lease_id), req->lease_id);
	api_copy(ref->owner, sizeof(ref->owner), lease_owner_of(&cur));
	ref->generation = cur.generation;
	ref->metageneration = cur.metageneration;
	ref->updated_ms = cur.updated_ms;
	ref->ttl = (int)lease_meta_long(&cur, LEASE_KEY_TTL, API_TTL_MIN,
	    API_TTL_MAX, API_TTL_DEFAULT);
	lease_cache_put(svc->cache, oname, ref);
	gcs_object_clear(&cur);
	return API_OK;
}

/*
 * One patch of the lease's own object.  A lister may have judged the
 * lease expired before the patch (and granted a slot on that count), so
 * the refresh counts only when the store time of the patch is not past
 * the expiry of the version it patched; otherwise the lease is deleted
 * and lost.
 */
int
group_refresh(api_service *svc, const api_lease_req *req, api_lock *out,
    api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	lease_ref ref;
	gcs_object obj;
	gcs_err ge;
	int rc, i;

	obj_name(oname, sizeof(oname), req->name, req->lease_id);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		if ((rc = group_lookup(svc, req, oname, i == 0, &ref, err)) !=
		    API_OK)
			return rc;
		rc = svc_renew(svc, oname, ref.generation, ref.metageneration,
		    req->ttl, &obj, &ge);
		if (rc == GCS_PRECONDITION)
			continue;
		if (rc == GCS_NOT_FOUND)
			break;
		if (rc != GCS_OK)
			return svc_store_fail(err, &ge);
		if (obj.updated_ms > ref.updated_ms + (int64_t)ref.ttl * 1000) {
			remove_quietly(svc, oname, &obj);
			gcs_object_clear(&obj);
			lease_cache_del(svc->cache, oname);
			svc_emit(svc, API_EV_LOST, req->name, ref.owner, NULL,
			    req->owner, NULL, ref.generation, 0);
			return api_fail(err, API_LEASE_LOST,
			    "the lease was refreshed after it expired, and "
			    "others may have counted its slot free; stop the "
			    "work it protected");
		}
		lease_read(req->name, &obj, true, out);
		svc_remember(svc, oname, req->lease_id, ref.owner, &obj);
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

int
group_release(api_service *svc, const api_lease_req *req, api_err *err)
{
	char oname[GCS_NAME_MAX + 1];
	lease_ref ref;
	gcs_err ge;
	int rc, i;

	obj_name(oname, sizeof(oname), req->name, req->lease_id);
	for (i = 0; i < API_WRITE_LOOPS; i++) {
		if ((rc = group_lookup(svc, req, oname, i == 0, &ref, err)) !=
		    API_OK)
			return rc;
		rc = gcs_remove(svc->store, oname, ref.generation,
		    ref.metageneration, &ge);
		if (rc == GCS_OK || (rc == GCS_NOT_FOUND && ge.attempts > 1)) {
			lease_cache_del(svc->cache, oname);
			svc_emit(svc, API_EV_RELEASED, req->name, ref.owner,
			    NULL, req->owner, NULL, ref.generation, 0);
			return API_OK;
		}
		if (rc == GCS_PRECONDITION)
			continue;
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
	if (view_scan(svc, name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (v.has_head && !lease_is_head(&v.head) && !lease_expired(&v.head)) {
		/* An exclusive lease took the name meanwhile. */
		lease_read(name, &v.head, false, out);
		view_clear(&v);
		return API_OK;
	}
	if ((top = earliest_live(&v, NULL)) == NULL) {
		view_clear(&v);
		return api_fail(err, API_NOT_HELD, "nobody holds this lock");
	}
	lease_read(name, top, false, out);
	if (view_holders(&v, name, NULL, out) < 0) {
		view_clear(&v);
		api_lock_clear(out);
		return api_fail(err, API_INTERNAL, "out of memory");
	}
	view_clear(&v);
	return API_OK;
}

int
group_force(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t token, api_err *err)
{
	group_view v;
	gcs_err ge;
	size_t i;
	int rc;

	if (view_scan(svc, name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	for (i = 0; i < v.n; i++)
		if (v.leases[i].obj.generation == token)
			break;
	if (i == v.n) {
		view_clear(&v);
		api_fail(err, API_LEASE_LOST,
		    "no lease of this lock has fencing token %" PRId64
		    "; look again before force-releasing it",
		    token);
		err->reason = "fencing_token_mismatch";
		return API_LEASE_LOST;
	}
	rc = gcs_remove(svc->store, v.leases[i].name,
	    v.leases[i].obj.generation, v.leases[i].obj.metageneration, &ge);
	if (rc == GCS_OK || (rc == GCS_NOT_FOUND && ge.attempts > 1)) {
		const gcs_object *o = &v.leases[i].obj;
		lease_cache_del(svc->cache, v.leases[i].name);
		svc_emit(svc, API_EV_FORCED, name, lease_owner_of(o),
		    json_string_value(
		        json_object_get(o->metadata, LEASE_KEY_HOLDER)),
		    actor, reason, token, o->now_ms);
		rc = API_OK;
	} else if (rc == GCS_PRECONDITION || rc == GCS_NOT_FOUND) {
		api_fail(err, API_LEASE_LOST,
		    "the lease with fencing token %" PRId64 " changed or "
		    "ended meanwhile; look again",
		    token);
		err->reason = "fencing_token_mismatch";
		rc = API_LEASE_LOST;
	} else {
		rc = svc_store_fail(err, &ge);
	}
	view_clear(&v);
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

	if (view_scan(svc, req->name, &v, &ge) != GCS_OK)
		return svc_store_fail(err, &ge);
	if (v.has_head && !lease_is_head(&v.head)) {
		/* An exclusive lease holds the name: the caller judged. */
		view_clear(&v);
		return API_OK;
	}
	for (i = 0; i < v.n; i++)
		if (is_ours(&v.leases[i].obj, req))
			break; /* an attempt renews it */
	if (i == v.n && judge(&v, req, NULL, &held, &mismatch) != 0)
		rc = refuse_view(req, &v, held, NULL, mismatch, out, err);
	view_clear(&v);
	return rc;
}

bool
group_known(api_service *svc, const api_lease_req *req)
{
	char oname[GCS_NAME_MAX + 1];
	lease_ref ref;

	obj_name(oname, sizeof(oname), req->name, req->lease_id);
	return lease_cache_get(svc->cache, oname, req->lease_id, &ref) != 0;
}
