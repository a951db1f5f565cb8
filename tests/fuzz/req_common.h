/*
 * req_common.h: one request's parameters taken as server/routes.c takes
 * them (params_prepare with the route's allowed list, then its typed
 * getters), and an acquire that passes them run against an in-memory
 * store, so that what a caller may send reaches lease_metadata,
 * api_acquire_check, api_lock_json and format=env.  Used by
 * the params (query string) and body (JSON body) harnesses.
 */
#ifndef LOCKGATE_FUZZ_REQ_COMMON_H
#define LOCKGATE_FUZZ_REQ_COMMON_H

#include <stdint.h>

#include <jansson.h>

#include "api/api.h"
#include "server/format_env.h"
#include "server/params.h"

#include "fuzz.h"

#define REQ_QUERY_MAX 16

/* A decoded query string, as libmicrohttpd hands it over. */
typedef struct req_query {
	const char *key[REQ_QUERY_MAX];
	const char *val[REQ_QUERY_MAX]; /* NULL for a bare "?key" */
	int n;
} req_query;

static const char *
req_query_get(void *ctx, const char *key)
{
	req_query *q = ctx;
	int i;

	for (i = 0; i < q->n; i++)
		if (strcmp(q->key[i], key) == 0)
			return q->val[i] ? q->val[i] : "";
	return NULL;
}

static void
req_query_each(void *ctx, params_visit_fn fn, void *arg)
{
	req_query *q = ctx;
	int i;

	for (i = 0; i < q->n; i++)
		if (fn(arg, q->key[i], q->val[i]) != 0)
			return;
}

static const char *const req_acquire[] = { "ttl", "wait", "holder", "purpose",
	"expected_duration", "labels", "lease_id", "limit", "format", NULL };
static const char *const req_refresh[] = { "lease_id", "ttl", "format", NULL };
static const char *const req_list[] = { "prefix", "page_size", "page_token",
	"include_expired", "format", NULL };
static const char *const req_force[] = { "fencing_token", "format", NULL };

static api_service *req_svc;

/* The lease of an acquire that got this far, through every writer of
 * its answer: none may fail on what the edge let in. */
static void
req_grant(api_acquire_req *q)
{
	api_lock l;
	api_lease_req rel;
	api_err err;
	json_t *j;
	char *env;

	if (req_svc == NULL) {
		req_svc = api_new(gcs_mem_new(NULL, NULL), NULL, NULL);
		FUZZ_CHECK(req_svc != NULL);
	}
	memset(&err, 0, sizeof(err));
	memset(&l, 0, sizeof(l));
	api_acquire_prepare(q);
	if (api_acquire_check(q, &err) != API_OK) {
		FUZZ_CHECK(err.code == API_BAD_REQUEST);
		return;
	}
	FUZZ_CHECK(api_acquire(req_svc, q, &l, &err) == API_OK);
	j = api_lock_json(&l, true);
	FUZZ_CHECK(j != NULL);
	FUZZ_CHECK(strcmp(json_string_value(json_object_get(j, "holder")),
	               q->holder) == 0);
	env = srv_env_format(j);
	FUZZ_CHECK(env != NULL);
	free(env);
	json_decref(j);
	memset(&rel, 0, sizeof(rel));
	api_copy(rel.name, sizeof(rel.name), q->name);
	api_copy(rel.owner, sizeof(rel.owner), q->owner);
	api_copy(rel.lease_id, sizeof(rel.lease_id), l.lease_id);
	FUZZ_CHECK(api_release(req_svc, &rel, &err) == API_OK);
	api_lock_clear(&l);
}

/* Route ROUTE (0..3) over query Q and BODY. */
static void
req_run(int route, req_query *q, const char *body, size_t blen)
{
	static const char *const *const allowed[] = { req_acquire, req_refresh,
		req_list, req_force };
	srv_params p = { 0 };
	api_acquire_req aq;
	api_lease_req lq;
	api_list_req ls;
	api_err err;
	long ttl, wait, exp, size, tok, limit;
	bool inc;

	memset(&err, 0, sizeof(err));
	p.query = req_query_get;
	p.each = req_query_each;
	p.ctx = q;
	if (params_prepare(&p, body, blen, allowed[route & 3], &err) != 0) {
		FUZZ_CHECK(err.code == API_BAD_REQUEST);
		goto out;
	}
	switch (route & 3) {
	case 0:
		memset(&aq, 0, sizeof(aq));
		snprintf(aq.name, sizeof(aq.name), "fuzz/lock");
		snprintf(aq.owner, sizeof(aq.owner), "fuzz-owner");
		if (params_int(&p, "ttl", API_TTL_MIN, API_TTL_MAX,
		        API_TTL_DEFAULT, &ttl, &err) ||
		    params_int(&p, "wait", 0, API_WAIT_MAX_DEFAULT, 0, &wait,
		        &err) ||
		    params_int(&p, "expected_duration", 0, API_EXPECTED_MAX, 0,
		        &exp, &err) ||
		    params_str(&p, "holder", aq.holder, sizeof(aq.holder),
		        &err) < 0 ||
		    params_str(&p, "purpose", aq.purpose, sizeof(aq.purpose),
		        &err) < 0 ||
		    params_str(&p, "lease_id", aq.key, sizeof(aq.key), &err) <
		        0 ||
		    params_labels(&p, &aq.labels, &err) ||
		    params_int(&p, "limit", 1, API_LIMIT_MAX, 1, &limit,
		        &err)) {
			json_decref(aq.labels);
			break;
		}
		FUZZ_CHECK(ttl >= API_TTL_MIN && ttl <= API_TTL_MAX);
		FUZZ_CHECK(limit >= 1 && limit <= API_LIMIT_MAX);
		aq.limit = (int)limit; /* > 1: a semaphore's lease */
		FUZZ_CHECK(api_text_clean(aq.holder, strlen(aq.holder)));
		FUZZ_CHECK(api_text_clean(aq.purpose, strlen(aq.purpose)));
		if (aq.labels != NULL) {
			char why[128];
			FUZZ_CHECK(
			    api_labels_valid(aq.labels, why, sizeof(why)));
		}
		if (aq.key[0] == '\0' || api_lease_id_valid(aq.key)) {
			aq.ttl = (int)ttl;
			aq.wait = (int)wait;
			aq.expected_duration = (int)exp;
			req_grant(&aq);
		}
		json_decref(aq.labels);
		break;
	case 1:
		memset(&lq, 0, sizeof(lq));
		if (params_str(&p, "lease_id", lq.lease_id, sizeof(lq.lease_id),
		        &err) < 0 ||
		    params_int(&p, "ttl", API_TTL_MIN, API_TTL_MAX, 0, &ttl,
		        &err))
			break;
		(void)api_lease_id_valid(lq.lease_id);
		break;
	case 2:
		memset(&ls, 0, sizeof(ls));
		if (params_str(&p, "prefix", ls.prefix, sizeof(ls.prefix),
		        &err) < 0 ||
		    params_str(&p, "page_token", ls.page_token,
		        sizeof(ls.page_token), &err) < 0 ||
		    params_int(&p, "page_size", 1, API_PAGE_SIZE_MAX,
		        API_PAGE_SIZE_DEFAULT, &size, &err) ||
		    params_bool(&p, "include_expired", false, &inc, &err))
			break;
		FUZZ_CHECK(size >= 1 && size <= API_PAGE_SIZE_MAX);
		break;
	case 3:
		if (params_int(&p, "fencing_token", 1, INT64_MAX, 0, &tok,
		        &err))
			break;
		FUZZ_CHECK(tok >= 0);
		break;
	}
out:
	params_clear(&p);
}

#endif
