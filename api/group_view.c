/*
 * group_view.c: a semaphore's or shared lock's objects as one listing
 * sees them (its head and its NAME#LEASE_ID leases, contiguous in a
 * listing), and the judgement of an acquire against them: whether the
 * head is unchanged, whether every live lease is of the request's kind,
 * and whether the live leases fit the limit.  The layout and the safety
 * argument: README ("Semaphores and shared locks") and group.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_int.h"

#define GROUP_LIST_PAGE 100 /* objects per listing page */
#define GROUP_SWEEP_MAX 8   /* expired leases one acquire removes */

void
group_view_clear(group_view *v)
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
void
group_obj_name(char *buf, size_t len, const char *name, const char *lease_id)
{
	snprintf(buf, len, "%s%c%s", name, LEASE_GROUP_SEP, lease_id);
}

int
group_is_marker(const gcs_object *o)
{
	const char *k =
	    json_string_value(json_object_get(o->metadata, LEASE_KEY_KIND));

	return k != NULL && strcmp(k, LEASE_KIND_TOKEN) == 0;
}

/* Room in V for one more lease: 0, or -1 out of memory. */
static int
view_reserve(group_view *v)
{
	gcs_entry *grown;
	size_t cap;

	if (v->n < v->cap)
		return 0;
	cap = v->cap ? v->cap * 2 : 8;
	if ((grown = realloc(v->leases, cap * sizeof(*grown))) == NULL)
		return -1;
	v->leases = grown;
	v->cap = cap;
	return 0;
}

/* Take entry E of NAME's listing into V: 1 when E is beyond the group
 * (the listing is done), 0 taken or skipped, -1 out of memory. */
static int
view_take(group_view *v, const char *name, gcs_entry *e)
{
	size_t len = strlen(name);

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
	if (group_is_marker(&e->obj))
		return 0;
	if (view_reserve(v) != 0)
		return -1;
	v->leases[v->n++] = *e;
	memset(e, 0, sizeof(*e));
	return 0;
}

int
group_head_has_lease(const gcs_object *o)
{
	return lease_is_head(o) && lease_id_of(o)[0] != '\0';
}

bool
group_entry_is_head(const gcs_entry *e)
{
	return strchr(e->name, LEASE_GROUP_SEP) == NULL;
}

/* Add V's head, which carries a lease, to V's leases under NAME: counted,
 * shown and judged as every other lease.  0, or -1 out of memory. */
static int
view_add_embedded(group_view *v, const char *name)
{
	if (view_reserve(v) != 0)
		return -1;
	if ((v->leases[v->n].name = strdup(name)) == NULL)
		return -1;
	gcs_object_copy(&v->leases[v->n].obj, &v->head);
	v->n++;
	return 0;
}

/* List the objects of NAME (the head and NAME#... leases: contiguous,
 * '#' sorting below every lock-name character) into V.  The store's
 * status; V is cleared on failure. */
int
group_view_scan(api_service *svc, const char *name, group_view *v, gcs_err *ge)
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
	if (rc == GCS_OK && v->has_head && group_head_has_lease(&v->head) &&
	    view_add_embedded(v, name) != 0)
		rc = gcs_fail(ge, GCS_NOMEM, "out of memory");
	if (rc != GCS_OK)
		group_view_clear(v);
	return rc;
}

/* The lease object ONAME as V saw it, or NULL (a force release may have
 * removed it). */
const gcs_object *
group_view_find(const group_view *v, const char *oname)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		if (strcmp(v->leases[i].name, oname) == 0)
			return &v->leases[i].obj;
	return NULL;
}

/* The head as V saw it is the group head of generation GEN and
 * metageneration METAGEN. */
bool
group_head_is(const group_view *v, int64_t gen, int64_t metagen)
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

bool
group_same_kind(const gcs_object *o, const api_acquire_req *req)
{
	return same_kind(o, req->mode, req_limit(req));
}

/* The live lease of V acquired first, other than the one named SKIP
 * (may be NULL); NULL when none. */
const gcs_object *
group_earliest_live(const group_view *v, const char *skip)
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
int
group_view_holders(const group_view *v, const char *name, const char *skip,
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

	if (held == NULL) {
		/* A view cut short, no live lease in what it read: the
		 * leases past the cut may be live. */
		memset(out, 0, sizeof(*out));
		api_copy(out->name, sizeof(out->name), req->name);
		err->retry_after = 1;
		return api_fail(err, API_LOCKED,
		    "the lock has more lease objects than one look reads, "
		    "and counts as held until they expire or are released");
	}
	lease_read(req->name, held, false, out);
	err->retry_after = retry_after_lock(out);
	if (!mismatch && req->mode != API_MODE_SHARED && req_limit(req) > 1)
		return api_fail(err, API_LOCKED,
		    "all %d leases are taken (the first by %.160s) until "
		    "one is released or expires",
		    req_limit(req), out->owner);
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

/* Whether V shows a live lease other than OWN made within the last two
 * seconds on the store's clock: perhaps an acquire still in flight,
 * which a refusal of its own removes at once. */
static bool
any_in_flight(const group_view *v, const char *own)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		const gcs_object *o = &v->leases[i].obj;
		if (!lease_expired(o) && o->metageneration == 1 &&
		    o->now_ms > 0 && o->now_ms - o->created_ms <= 2000 &&
		    (own == NULL || strcmp(v->leases[i].name, own) != 0))
			return true;
	}
	return false;
}

/* A refusal showing V's live leases (HELD the one on top) but the
 * refused one's own, OWN (NULL: none).  When some were made a moment
 * ago, they may be acquires in flight, counted until judged, so a burst
 * of acquires can refuse one while a slot is about to be free again:
 * Retry-After is 1 s then, not the first lease's expiry. */
int
group_refuse_view(const api_acquire_req *req, const group_view *v,
    const gcs_object *held, const char *own, bool mismatch, api_lock *out,
    api_err *err)
{
	int rc = group_refuse(req, held, mismatch, out, err);

	if (rc == API_LOCKED && !mismatch && any_in_flight(v, own))
		err->retry_after = 1;

	if (group_view_holders(v, req->name, own, out) < 0) {
		api_lock_clear(out);
		return api_fail(err, API_INTERNAL, "out of memory");
	}
	return rc;
}

/*
 * Judge V for REQ, leaving out REQ's own lease OWN (an object name, or
 * NULL): 0 when a lease of REQ fits, else 1 with *HELD the live lease to
 * show (NULL when a truncated view showed none) and *MISMATCH whether
 * the holders use another mode or limit.  A truncated view is full.
 */
int
group_judge(const group_view *v, const api_acquire_req *req, const char *own,
    const gcs_object **held, bool *mismatch)
{
	int limit = req_limit(req), live = 0;
	bool group = req->mode == API_MODE_SHARED || limit > 1;
	size_t i;

	*mismatch = false;
	*held = group_earliest_live(v, own);
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
	if (v->truncated) /* leases unread: full, even with none seen */
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
int
group_patch_to_head(api_service *svc, const char *name, const gcs_object *cur,
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

int
group_clear_head(api_service *svc, const char *name, int64_t gen,
    int64_t metagen, gcs_object *out, gcs_err *ge)
{
	static const char *const keys[] = { LEASE_KEY_ID, LEASE_KEY_CLIENT,
		LEASE_KEY_OWNER, LEASE_KEY_HOLDER, LEASE_KEY_PURPOSE,
		LEASE_KEY_TTL, LEASE_KEY_EXPECTED, LEASE_KEY_LABELS,
		LEASE_KEY_CLAIMS, LEASE_KEY_REFRESH, LEASE_KEY_PREV_END,
		LEASE_KEY_MODE, LEASE_KEY_LIMIT };
	json_t *p = json_pack("{s:s}", LEASE_KEY_KIND, LEASE_KIND_GROUP);
	size_t i;
	int rc;

	for (i = 0; p != NULL && i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_object_set_new(p, keys[i], json_null()) != 0) {
			json_decref(p);
			p = NULL;
		}
	if (p == NULL)
		return gcs_fail(ge, GCS_NOMEM, "out of memory");
	rc = gcs_patch(svc->store, name, gen, metagen, p, out, ge);
	json_decref(p);
	return rc;
}

int
group_drop(api_service *svc, const char *name, const gcs_object *o, gcs_err *ge)
{
	gcs_object head;
	int rc;

	if (strchr(name, LEASE_GROUP_SEP) != NULL)
		return gcs_remove(svc->store, name, o->generation,
		    o->metageneration, ge);
	rc = group_clear_head(svc, name, o->generation, o->metageneration,
	    &head, ge);
	if (rc == GCS_OK)
		gcs_object_clear(&head);
	return rc;
}

void
group_drop_quietly(api_service *svc, const char *name, const gcs_object *o)
{
	gcs_err ge;

	(void)group_drop(svc, name, o, &ge);
}

/* Remove object NAME at O's generations, for cleaning up; failures are
 * left for the next one (an expired lease counts for nothing). */
void
group_remove_quietly(api_service *svc, const char *name, const gcs_object *o)
{
	gcs_err ge;

	(void)gcs_remove(svc->store, name, o->generation, o->metageneration,
	    &ge);
}

/* Remove up to GROUP_SWEEP_MAX leases V saw expired: a crashed holder's
 * object would otherwise stay in every listing.  Safe: an expired lease
 * counts for nothing, and its holder's refresh would be lost anyway. */
void
group_sweep_expired(api_service *svc, const group_view *v)
{
	size_t i;
	int n = 0;

	for (i = 0; i < v->n && n < GROUP_SWEEP_MAX; i++)
		if (lease_expired(&v->leases[i].obj) &&
		    !group_entry_is_head(&v->leases[i])) {
			group_remove_quietly(svc, v->leases[i].name,
			    &v->leases[i].obj);
			n++;
		}
}
