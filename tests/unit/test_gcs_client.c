/*
 * test_gcs_client.c: the gs:// client against build/tools/fake_gcs: the
 * exact requests it sends, how it reads the answers, retries and the
 * ambiguities they leave, connection reuse, and gcs_referee_check's
 * question to the store.  Token sources are in
 * test_gcs_token.c; the store contract over gs:// in test_gcs_contract.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/clock.h"
#include "fake_gcs_proc.h"
#include "gcs/gcs.h"
#include "gcs/gcs_client.h"
#include "gcs/gcs_http.h"
#include "gcs/gcs_multi.h"

#define BUCKET "bkt"
#define PREFIX "locks/"

static fake_gcs fake;

static int
group_setup(void **state)
{
	(void)state;
	return fake_gcs_start_group(&fake, NULL);
}

static int
group_teardown(void **state)
{
	(void)state;
	fake_gcs_stop(&fake);
	return 0;
}

/* A store on the fake (emulator mode, no auth) with a short retry policy
 * so that the tests stay fast. */
static gcs_store *
open_store(const char *prefix)
{
	static const gcs_retry_policy p = { 1500, 5, 40, 1000 };
	gcs_store *s = fake_gcs_store(&fake, BUCKET, prefix, &p);

	assert_non_null(s);
	return s;
}

static int
test_setup(void **state)
{
	/* Before the reset, which zeroes the connection count. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=gcs&date=1",
	                     NULL),
	    200);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	*state = open_store(PREFIX);
	return 0;
}

static int
test_teardown(void **state)
{
	gcs_store_free(*state);
	return 0;
}

static json_t *
meta2(const char *k1, const char *v1, const char *k2, const char *v2)
{
	json_t *m = json_object();

	json_object_set_new(m, k1, json_string(v1));
	if (k2 != NULL)
		json_object_set_new(m, k2, v2 ? json_string(v2) : json_null());
	return m;
}

/* The last logged request of operation OP (new reference) or NULL. */
static json_t *
last_request(const char *op)
{
	json_t *a = fake_gcs_json(&fake, "/_fake/requests"), *r = NULL;
	size_t i = json_array_size(a);

	while (i-- > 0) {
		json_t *e = json_array_get(a, i);
		if (strcmp(json_string_value(json_object_get(e, "op")), op) ==
		    0) {
			r = json_incref(e);
			break;
		}
	}
	json_decref(a);
	return r;
}

static const char *
jstr(const json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));
	return s ? s : "";
}

static void
fault(const char *op, const char *kind, int count)
{
	char q[128];

	snprintf(q, sizeof(q), "/_fake/fault?op=%s&kind=%s&count=%d", op, kind,
	    count);
	assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
}

static void
insert_ok(gcs_store *s, const char *name, gcs_object *o)
{
	json_t *m = meta2("lease_id", "L1", "owner", "alice");
	gcs_err err;

	assert_int_equal(gcs_insert(s, name, m, o, &err), GCS_OK);
	json_decref(m);
}

/* ---- request shapes ---- */

static void
test_insert_request(void **state)
{
	gcs_store *s = *state;
	gcs_object o;
	json_t *r, *md;
	const char *body, *ct, *b, *js;
	char boundary[128], delim[140];
	json_error_t je;

	insert_ok(s, "prod/deploy", &o);
	assert_true(o.generation > 0);
	assert_int_equal(o.metageneration, 1);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lease_id")),
	    "L1");
	assert_true(o.now_ms > 0);
	r = last_request("insert");
	assert_non_null(r);
	assert_string_equal(jstr(r, "method"), "POST");
	assert_string_equal(jstr(r, "uri"),
	    "/upload/storage/v1/b/bkt/o?"
	    "uploadType=multipart&ifGenerationMatch=0&fields=generation,"
	    "metageneration,timeCreated,updated");
	assert_null(json_object_get(r, "authorization")); /* emulator */
	ct = jstr(r, "content_type");
	assert_true(strncmp(ct, "multipart/related; boundary=", 28) == 0);
	snprintf(boundary, sizeof(boundary), "%s", ct + 28);
	assert_true(strlen(boundary) >= 16);
	snprintf(delim, sizeof(delim), "--%s\r\n", boundary);
	body = jstr(r, "body");
	/* Exactly two parts, the JSON resource first, then the closing
	 * delimiter. */
	assert_true(strncmp(body, delim, strlen(delim)) == 0);
	b = body + strlen(delim);
	assert_true(strncmp(b,
	                "Content-Type: application/json; charset=UTF-8"
	                "\r\n\r\n",
	                49) == 0);
	js = b + 49;
	md = json_loadb(js, strcspn(js, "\r"), 0, &je);
	assert_non_null(md);
	assert_string_equal(jstr(md, "name"), "locks/prod/deploy");
	assert_string_equal(jstr(md, "cacheControl"), "no-store");
	assert_string_equal(jstr(json_object_get(md, "metadata"), "owner"),
	    "alice");
	json_decref(md);
	snprintf(delim, sizeof(delim), "\r\n--%s--\r\n", boundary);
	assert_string_equal(body + strlen(body) - strlen(delim), delim);
	json_decref(r);
	gcs_object_clear(&o);
	assert_int_equal(fake_gcs_count(&fake, "insert"), 1);
}

/* The resource JSON of an insert is written by hand: every character a
 * metadata value or key may hold arrives as sent, nulls are left out, and
 * the object the insert returns carries the same map. */
static void
test_insert_metadata_escaping(void **state)
{
	gcs_store *s = *state;
	const char *vals[] = { "quote\" backslash\\ slash/",
		"ctl\x01\x1f\b\f\n\r\t end",
		"utf-8 \xc3\xa9 \xe2\x82\xac "
		"\xf0\x9f\x98\x80",
		"{\"k\":[1,2]}", "", NULL };
	json_t *m = json_object(), *want = json_object(), *r, *body;
	gcs_object a, b;
	gcs_err err;
	char key[32];
	int i;

	for (i = 0; vals[i] != NULL; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		json_object_set_new(m, key, json_string(vals[i]));
		json_object_set_new(want, key, json_string(vals[i]));
	}
	json_object_set_new(m, "q\"uoted\\key\n", json_string("v"));
	json_object_set_new(want, "q\"uoted\\key\n", json_string("v"));
	json_object_set_new(m, "gone", json_null());
	assert_int_equal(gcs_insert(s, "esc", m, &a, &err), GCS_OK);
	assert_true(json_equal(a.metadata, want));
	assert_int_equal(gcs_get(s, "esc", &b, &err), GCS_OK);
	assert_true(json_equal(b.metadata, want));
	/* the metadata part is one compact JSON line (the fake parsed it) */
	r = last_request("insert");
	body = json_loads(strstr(jstr(r, "body"), "\r\n\r\n") + 4,
	    JSON_DISABLE_EOF_CHECK, NULL);
	assert_non_null(body);
	assert_string_equal(jstr(body, "name"), "locks/esc");
	assert_string_equal(jstr(body, "contentType"),
	    "application/octet-stream");
	assert_true(json_equal(json_object_get(body, "metadata"), want));
	json_decref(body);
	json_decref(r);
	/* the returned map is the store's own: changing ours leaves it */
	json_object_set_new(m, "k0", json_string("changed"));
	assert_string_equal(jstr(a.metadata, "k0"), vals[0]);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
	json_decref(m);
	json_decref(want);
}

static void
test_get_request_and_answer(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b;
	gcs_err err;
	json_t *r;

	insert_ok(s, "a/b/c", &a);
	assert_int_equal(gcs_get(s, "a/b/c", &b, &err), GCS_OK);
	r = last_request("get");
	assert_string_equal(jstr(r, "method"), "GET");
	/* The whole object name is percent-encoded, '/' included. */
	assert_string_equal(jstr(r, "uri"),
	    "/storage/v1/b/bkt/o/"
	    "locks%2Fa%2Fb%2Fc?fields=name,generation,metageneration,"
	    "timeCreated,updated,metadata");
	json_decref(r);
	assert_true(b.generation == a.generation);
	assert_int_equal(b.metageneration, 1);
	/* the insert's answer said the same */
	assert_int_equal(a.metageneration, 1);
	assert_true(a.created_ms == b.created_ms);
	assert_true(a.updated_ms == b.updated_ms);
	assert_true(b.created_ms > 0 && b.updated_ms == b.created_ms);
	/* now_ms comes from the Date header: whole seconds, and not before
	 * the second the object was made in. */
	assert_int_equal(b.now_ms % 1000, 0);
	assert_true(b.now_ms >= b.updated_ms - b.updated_ms % 1000);
	assert_string_equal(json_string_value(
	                        json_object_get(b.metadata, "owner")),
	    "alice");
	gcs_object_clear(&b);
	assert_int_equal(gcs_get(s, "a/b/x", &b, &err), GCS_NOT_FOUND);
	assert_int_equal(err.http_status, 404);
	assert_int_equal(err.attempts, 1);
	gcs_object_clear(&a);
}

static void
test_storage_clock_from_date(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b;
	gcs_err err;

	/* The fake's clock runs an hour ahead: now_ms and updated follow it,
	 * not the local clock. */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/config?clock_offset_ms=3600000", NULL),
	    200);
	insert_ok(s, "skew", &a);
	assert_int_equal(gcs_get(s, "skew", &b, &err), GCS_OK);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?clock_offset_ms=0",
	                     NULL),
	    200);
	assert_true(b.now_ms > gcs_clock_real(NULL) + 3500000);
	assert_true(b.updated_ms > gcs_clock_real(NULL) + 3500000);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
}

/* Without a Date the client has no storage time: GCS_NOW_UNKNOWN on
 * every answer, never the gateway's own clock, which may run ahead and
 * take a live lease for expired (issue 18 §4). */
static void
test_no_date_no_time(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b, c;
	gcs_page pg;
	gcs_err err;
	json_t *m = meta2("ttl", "60", NULL, NULL);

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?date=0", NULL),
	    200);
	insert_ok(s, "nodate", &a);
	assert_int_equal(gcs_get(s, "nodate", &b, &err), GCS_OK);
	assert_int_equal(gcs_patch(s, "nodate", a.generation, 1, m, &c, &err),
	    GCS_OK);
	assert_int_equal(gcs_list(s, "", 10, NULL, &pg, &err), GCS_OK);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?date=1", NULL),
	    200);
	assert_true(a.now_ms == GCS_NOW_UNKNOWN);
	assert_true(b.now_ms == GCS_NOW_UNKNOWN);
	assert_true(c.now_ms == GCS_NOW_UNKNOWN);
	assert_true(pg.now_ms == GCS_NOW_UNKNOWN);
	assert_int_equal(pg.n, 1);
	assert_true(pg.items[0].obj.now_ms == GCS_NOW_UNKNOWN);
	gcs_page_clear(&pg);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
	gcs_object_clear(&c);
	json_decref(m);
}

/* Google's emulator (the fake's emulator dialect): a delete answered 200,
 * 13-digit generations, metadata keys nobody wrote, patch answers with
 * acl and owner, errors whose message is JSON text.  A lease's whole
 * life works, and reads show the keys lockgate wrote. */
static void
test_emulator_lease_cycle(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b, c;
	gcs_err err;
	json_t *m = meta2("ttl", "60", NULL, NULL), *r;

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=emulator",
	                     NULL),
	    200);
	fake_gcs_http(&fake, "POST", "/storage/v1/b?project=test", NULL,
	    "{\"name\":\"" BUCKET "\"}", NULL, NULL); /* 409 when made */
	insert_ok(s, "emu", &a);
	assert_true(
	    a.generation >= 1000000000000LL && a.generation <= 9999999999999LL);
	assert_int_equal(gcs_get(s, "emu", &b, &err), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(b.metadata, "lease_id")),
	    "L1");
	gcs_object_clear(&b);
	assert_int_equal(gcs_patch(s, "emu", a.generation, 1, m, &c, &err),
	    GCS_OK);
	assert_int_equal(c.metageneration, 2);
	r = last_request("patch");
	assert_int_equal(json_integer_value(json_object_get(r, "status")), 200);
	json_decref(r);
	assert_int_equal(gcs_remove(s, "emu", a.generation, 1, &err),
	    GCS_PRECONDITION);
	assert_non_null(strstr(err.msg, "HTTP 412 (At least one of the"));
	assert_int_equal(gcs_remove(s, "emu", a.generation, 2, &err), GCS_OK);
	r = last_request("delete");
	assert_int_equal(json_integer_value(json_object_get(r, "status")), 200);
	json_decref(r);
	assert_int_equal(gcs_get(s, "emu", &b, &err), GCS_NOT_FOUND);
	gcs_object_clear(&a);
	gcs_object_clear(&c);
	json_decref(m);
}

/* The emulator ignores maxResults and pageToken: every match in one
 * page.  The client still hands out at most MAX per page, and goes on
 * from the last one it handed out (startOffset), never with a pageToken
 * the store would ignore. */
static void
test_emulator_list_pages(void **state)
{
	static const char *names[] = { "l/a", "l/b", "l/c", "l/d", "l/e" };
	gcs_store *s = *state;
	gcs_object o;
	gcs_page pg;
	gcs_err err;
	json_t *r;
	char *token = NULL;
	size_t i, seen = 0;
	int pages = 0;

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=emulator",
	                     NULL),
	    200);
	fake_gcs_http(&fake, "POST", "/storage/v1/b?project=test", NULL,
	    "{\"name\":\"" BUCKET "\"}", NULL, NULL);
	for (i = 0; i < 5; i++) {
		insert_ok(s, names[i], &o);
		gcs_object_clear(&o);
	}
	do {
		assert_int_equal(gcs_list(s, "l/", 2, token, &pg, &err),
		    GCS_OK);
		free(token);
		assert_true(pg.n <= 2);
		for (i = 0; i < pg.n; i++)
			assert_string_equal(pg.items[i].name, names[seen++]);
		token = pg.next_token;
		pg.next_token = NULL;
		gcs_page_clear(&pg);
		pages++;
		r = last_request("list");
		assert_null(strstr(jstr(r, "uri"), "pageToken"));
		if (pages > 1)
			assert_non_null(strstr(jstr(r, "uri"), "startOffset="));
		json_decref(r);
	} while (token != NULL && pages < 10);
	assert_int_equal(seen, 5);
	assert_int_equal(pages, 3);
}

static void
test_patch_request(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b;
	gcs_err err;
	json_t *m = meta2("ttl", "60", "owner", NULL), *r, *body;
	char want[256];

	insert_ok(s, "p", &a);
	assert_int_equal(gcs_patch(s, "p", a.generation, a.metageneration, m,
	                     &b, &err),
	    GCS_OK);
	r = last_request("patch");
	assert_string_equal(jstr(r, "method"), "PATCH");
	snprintf(want, sizeof(want),
	    "/storage/v1/b/bkt/o/locks%%2Fp?"
	    "ifGenerationMatch=%lld&ifMetagenerationMatch=1&fields=name,"
	    "generation,metageneration,timeCreated,updated,metadata",
	    (long long)a.generation);
	assert_string_equal(jstr(r, "uri"), want);
	assert_true(
	    strncmp(jstr(r, "content_type"), "application/json", 16) == 0);
	body = json_loads(jstr(r, "body"), 0, NULL);
	assert_non_null(body);
	assert_true(json_is_null(
	    json_object_get(json_object_get(body, "metadata"), "owner")));
	json_decref(body);
	json_decref(r);
	assert_int_equal(b.generation, a.generation);
	assert_int_equal(b.metageneration, 2);
	assert_true(b.updated_ms >= a.updated_ms);
	assert_string_equal(json_string_value(
	                        json_object_get(b.metadata, "ttl")),
	    "60");
	assert_null(json_object_get(b.metadata, "owner")); /* null deleted */
	gcs_object_clear(&b);
	/* Stale metageneration: 412, not retried. */
	assert_int_equal(gcs_patch(s, "p", a.generation, 1, m, &b, &err),
	    GCS_PRECONDITION);
	assert_int_equal(err.http_status, 412);
	assert_int_equal(err.attempts, 1);
	json_decref(m);
	gcs_object_clear(&a);
}

static void
test_delete_request(void **state)
{
	gcs_store *s = *state;
	gcs_object a;
	gcs_err err;
	json_t *r;
	char want[200];

	insert_ok(s, "d", &a);
	assert_int_equal(gcs_remove(s, "d", a.generation, 2, &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_remove(s, "d", a.generation + 1, 1, &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_remove(s, "d", a.generation, 1, &err), GCS_OK);
	r = last_request("delete");
	assert_string_equal(jstr(r, "method"), "DELETE");
	snprintf(want, sizeof(want),
	    "/storage/v1/b/bkt/o/locks%%2Fd?"
	    "ifGenerationMatch=%lld&ifMetagenerationMatch=1",
	    (long long)a.generation);
	assert_string_equal(jstr(r, "uri"), want);
	assert_int_equal(json_integer_value(json_object_get(r, "status")), 204);
	json_decref(r);
	assert_int_equal(gcs_remove(s, "d", a.generation, 1, &err),
	    GCS_NOT_FOUND);
	assert_int_equal(err.attempts, 1);
	gcs_object_clear(&a);
}

static void
test_list_paging_and_prefix(void **state)
{
	gcs_store *s = *state, *other;
	const char *names[] = { "j/a", "j/b", "j/c", "j/d", "j/e" };
	gcs_object o;
	gcs_page pg;
	gcs_err err;
	char *tok = NULL;
	json_t *r;
	int i, pages = 0, seen = 0;

	for (i = 0; i < 5; i++) {
		insert_ok(s, names[i], &o);
		gcs_object_clear(&o);
	}
	/* An object outside the store's prefix is never listed. */
	other = open_store("elsewhere/");
	insert_ok(other, "j/zz", &o);
	gcs_object_clear(&o);
	gcs_store_free(other);
	do {
		assert_int_equal(gcs_list(s, "j/", 2, tok, &pg, &err), GCS_OK);
		free(tok);
		tok = pg.next_token ? strdup(pg.next_token) : NULL;
		for (i = 0; i < (int)pg.n; i++) {
			assert_string_equal(pg.items[i].name, names[seen]);
			assert_true(pg.items[i].obj.generation > 0);
			assert_string_equal(json_string_value(
			                        json_object_get(pg.items[i]
			                                            .obj
			                                            .metadata,
			                            "lease_id")),
			    "L1");
			seen++;
		}
		assert_true(pg.now_ms > 0);
		gcs_page_clear(&pg);
		pages++;
	} while (tok != NULL && pages < 10);
	assert_int_equal(seen, 5);
	assert_int_equal(pages, 3);
	r = last_request("list");
	assert_non_null(strstr(jstr(r, "uri"),
	    "?prefix=locks%2Fj%2F&"
	    "maxResults=2&pageToken="));
	assert_non_null(strstr(jstr(r, "uri"),
	    "&fields=items(name,generation,"
	    "metageneration,timeCreated,updated,metadata),nextPageToken"));
	json_decref(r);
	/* An empty page: the answer has no "items" at all. */
	assert_int_equal(gcs_list(s, "nothing/", 10, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, 0);
	assert_null(pg.next_token);
	gcs_page_clear(&pg);
}

/* Answers larger than the receive buffer arrive whole: an object whose
 * metadata (near GCS's 8 KiB cap) is several times GCS_HTTP_BUF_SMALL, and
 * a list page of 40 of them (over 250 KiB, many times
 * GCS_HTTP_BUF_LARGE). */
static void
test_large_answers(void **state)
{
	enum { OBJS = 40, VAL = 2000, KEYS = 3 };
	gcs_store *s = *state;
	char name[32], key[8], *val = malloc(VAL + 1);
	gcs_object o, got;
	gcs_page pg;
	gcs_err err;
	json_t *m;
	int i, k;

	assert_non_null(val);
	for (i = 0; i < VAL; i++)
		val[i] = (char)('a' + i % 26);
	val[VAL] = '\0';
	m = json_object();
	for (k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "k%d", k);
		json_object_set_new(m, key, json_string(val));
	}
	for (i = 0; i < OBJS; i++) {
		snprintf(name, sizeof(name), "big/%02d", i);
		assert_int_equal(gcs_insert(s, name, m, &o, &err), GCS_OK);
		gcs_object_clear(&o);
	}
	assert_int_equal(gcs_get(s, "big/07", &got, &err), GCS_OK);
	assert_true(json_equal(got.metadata, m));
	gcs_object_clear(&got);
	assert_int_equal(gcs_list(s, "big/", OBJS, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, OBJS);
	for (i = 0; i < OBJS; i++) {
		snprintf(name, sizeof(name), "big/%02d", i);
		assert_string_equal(pg.items[i].name, name);
		assert_true(json_equal(pg.items[i].obj.metadata, m));
	}
	assert_null(pg.next_token);
	gcs_page_clear(&pg);
	/* and the small buffer again after the large one */
	assert_int_equal(gcs_get(s, "big/39", &got, &err), GCS_OK);
	assert_true(json_equal(got.metadata, m));
	gcs_object_clear(&got);
	json_decref(m);
	free(val);
}

static void
test_check_reaches_bucket_or_names_missing(void **state)
{
	gcs_store *s = *state;
	gcs_err err;
	json_t *r;
	gcs_store *missing;

	assert_int_equal(gcs_check(s, &err), GCS_OK);
	r = last_request("list");
	assert_string_equal(jstr(r, "uri"),
	    "/storage/v1/b/bkt/o?prefix="
	    "locks%2F&maxResults=1&fields=nextPageToken");
	json_decref(r);
	missing = gcs_gs_new("missing-bkt", "", &err);
	assert_non_null(missing);
	assert_int_equal(gcs_check(missing, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "bucket 'missing-bkt' not found"));
	gcs_store_free(missing);
}

/* A 404 to an insert or a list names no object: the bucket is missing.
 * That is the storage unavailable (503 + Retry-After upstream) with a
 * message that names the bucket, not "no such object" (which the api
 * layer would take for a free lock, or answer 500).  To a get, patch or
 * delete a 404 still means no such object. */
static void
test_missing_bucket(void **state)
{
	gcs_store *missing;
	gcs_object o;
	gcs_page pg;
	gcs_err err;
	json_t *m = meta2("lease_id", "L", NULL, NULL);
	long before;

	(void)state;
	missing = gcs_gs_new("missing-bkt", PREFIX, &err);
	assert_non_null(missing);
	before = fake_gcs_count(&fake, "insert");
	assert_int_equal(gcs_insert(missing, "a", m, &o, &err),
	    GCS_UNAVAILABLE);
	assert_int_equal(err.http_status, 404);
	assert_int_equal(err.attempts, 1); /* not retried */
	assert_int_equal(fake_gcs_count(&fake, "insert"), before + 1);
	assert_string_equal(err.msg,
	    "Cloud Storage bucket 'missing-bkt' not found (check --store)");
	assert_int_equal(gcs_list(missing, "", 10, NULL, &pg, &err),
	    GCS_UNAVAILABLE);
	assert_int_equal(err.http_status, 404);
	assert_non_null(strstr(err.msg, "bucket 'missing-bkt' not found"));
	assert_int_equal(gcs_get(missing, "a", &o, &err), GCS_NOT_FOUND);
	assert_int_equal(gcs_patch(missing, "a", 1, 1, m, &o, &err),
	    GCS_NOT_FOUND);
	assert_int_equal(gcs_remove(missing, "a", 1, 1, &err), GCS_NOT_FOUND);
	assert_null(strstr(err.msg, "check --store"));
	gcs_store_free(missing);
	json_decref(m);
}

static void
test_bad_bucket_and_prefix(void **state)
{
	gcs_err err;
	const char *bad_buckets[] = { "ab", "UPPER", "-dash", "a..b", "a/b",
		"bkt-", NULL };
	const char *bad_prefixes[] = { "/abs", "a//b", "../x", "a b", "a?b",
		NULL };
	int i;

	(void)state;
	for (i = 0; bad_buckets[i] != NULL; i++) {
		assert_null(gcs_gs_new(bad_buckets[i], "", &err));
		assert_int_equal(err.status, GCS_INVALID);
	}
	for (i = 0; bad_prefixes[i] != NULL; i++) {
		assert_null(gcs_gs_new("bkt", bad_prefixes[i], &err));
		assert_int_equal(err.status, GCS_INVALID);
	}
	/* gcs_open splits gs://BUCKET/PREFIX. */
	setenv("STORAGE_EMULATOR_HOST", fake.url, 1);
	{
		gcs_store *s = gcs_open("gs://my-bucket.example/a/p/", &err);
		assert_non_null(s);
		assert_string_equal(s->ops->scheme, "gs");
		assert_string_equal(gcs_gs_endpoint(s), fake.url);
		assert_int_equal(gcs_gs_authenticated(s), 0);
		gcs_store_free(s);
	}
}

/* The endpoint, from STORAGE_EMULATOR_HOST, with or without a scheme,
 * '/'s at the end, and the JSON API's root ("/storage/v1", as Go's
 * WithEndpoint takes it): lockgate adds the root itself, once. */
static void
test_endpoint_forms(void **state)
{
	static const struct {
		const char *fmt;  /* %s: "127.0.0.1:PORT" */
		const char *want; /* %s as well; NULL: refused */
	} cases[] = {
		{ "%s", "http://%s" },
		{ "http://%s/", "http://%s" },
		{ "http://%s/storage/v1", "http://%s" },
		{ "%s/storage/v1/", "http://%s" },
		{ "http://%s/gcs/storage/v1//", "http://%s/gcs" },
		{ "http://%s/storage/v10", "http://%s/storage/v10" },
		{ "http://%s/my/storage/v1x", "http://%s/my/storage/v1x" },
		{ "https://storage/v1", "https://storage/v1" }, /* a host */
		{ "http://", NULL },
		{ "http:///storage/v1", NULL },
		{ "ftp://%s", NULL },
	};
	char v[128], want[128];
	gcs_object a, b;
	gcs_store *s;
	gcs_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(v, sizeof(v), cases[i].fmt, fake.hostport);
		setenv("STORAGE_EMULATOR_HOST", v, 1);
		s = gcs_gs_new(BUCKET, PREFIX, &err);
		if (cases[i].want == NULL) {
			assert_null(s);
			assert_int_equal(err.status, GCS_INVALID);
			assert_non_null(strstr(err.msg, "not an http(s) URL"));
			continue;
		}
		assert_non_null(s);
		snprintf(want, sizeof(want), cases[i].want, fake.hostport);
		assert_string_equal(gcs_gs_endpoint(s), want);
		gcs_store_free(s);
	}
	/* A lease's round trip through the root given twice. */
	snprintf(v, sizeof(v), "http://%s/storage/v1/", fake.hostport);
	setenv("STORAGE_EMULATOR_HOST", v, 1);
	s = gcs_gs_new(BUCKET, PREFIX, &err);
	assert_non_null(s);
	insert_ok(s, "root", &a);
	assert_int_equal(gcs_get(s, "root", &b, &err), GCS_OK);
	assert_int_equal(b.generation, a.generation);
	assert_int_equal(gcs_remove(s, "root", a.generation, a.metageneration,
	                     &err),
	    GCS_OK);
	assert_int_equal(fake_gcs_count(&fake, "insert"), 1);
	assert_int_equal(fake_gcs_count(&fake, "get"), 1);
	assert_int_equal(fake_gcs_count(&fake, "delete"), 1);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
	gcs_store_free(s);
	setenv("STORAGE_EMULATOR_HOST", fake.hostport, 1);
}

/* ---- retries ---- */

static void
test_retry_503_then_ok(void **state)
{
	gcs_store *s = *state;
	gcs_object a, b;
	gcs_err err;
	gcs_stats st0, st1;

	insert_ok(s, "r", &a);
	gcs_stats_get(&st0);
	fault("get", "503", 2);
	assert_int_equal(gcs_get(s, "r", &b, &err), GCS_OK);
	assert_int_equal(err.attempts, 3);
	gcs_stats_get(&st1);
	assert_true(st1.retries - st0.retries == 2);
	assert_int_equal(fake_gcs_count(&fake, "get"), 3);
	gcs_object_clear(&b);
	/* Every retryable status, on every operation. */
	fault("patch", "500", 1);
	fault("patch", "408", 1);
	assert_int_equal(gcs_patch(s, "r", a.generation, 1,
	                     json_object_get(a.metadata, "nope") ? NULL
	                                                         : a.metadata,
	                     &b, &err),
	    GCS_OK);
	assert_int_equal(err.attempts, 3);
	fault("list", "429", 1);
	{
		gcs_page pg;
		assert_int_equal(gcs_list(s, "", 5, NULL, &pg, &err), GCS_OK);
		assert_int_equal(err.attempts, 2);
		assert_int_equal(pg.n, 1);
		gcs_page_clear(&pg);
	}
	fault("delete", "502", 1);
	assert_int_equal(gcs_remove(s, "r", b.generation, b.metageneration,
	                     &err),
	    GCS_OK);
	assert_int_equal(err.attempts, 2);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
}

static void
test_not_retried(void **state)
{
	gcs_store *s = *state;
	gcs_object b;
	gcs_err err;
	static const struct {
		const char *kind;
		gcs_status want;
	} cases[] = {
		{ "400", GCS_INVALID },
		{ "401", GCS_DENIED },
		{ "403", GCS_DENIED },
		{ "404", GCS_NOT_FOUND },
		/* A get carries no precondition: a 412 to it is no answer
		 * about the object (test_unexpected_statuses). */
		{ "412", GCS_UNAVAILABLE },
	};
	size_t i;
	long before;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		before = fake_gcs_count(&fake, "get");
		fault("get", cases[i].kind, 1);
		assert_int_equal(gcs_get(s, "x", &b, &err), cases[i].want);
		assert_int_equal(err.attempts, 1);
		assert_int_equal(err.http_status,
		    (int)strtol(cases[i].kind, NULL, 10));
		assert_int_equal(fake_gcs_count(&fake, "get"), before + 1);
	}
}

static void
test_429_outlives_retries_is_busy(void **state)
{
	gcs_store *s = *state;
	gcs_object o;
	gcs_err err;
	json_t *m = meta2("lease_id", "L", NULL, NULL);

	fault("insert", "429", -1);
	assert_int_equal(gcs_insert(s, "hot", m, &o, &err), GCS_BUSY);
	assert_true(err.attempts > 1);
	assert_int_equal(err.http_status, 429);
	assert_non_null(strstr(err.msg,
	    "insert of hot: HTTP 429 "
	    "(rateLimitExceeded: "));
	assert_int_equal(fake_gcs_count(&fake, "insert"), err.attempts);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/clear-faults", NULL), 200);
	fault("get", "503", -1);
	assert_int_equal(gcs_get(s, "hot", &o, &err), GCS_UNAVAILABLE);
	assert_true(err.attempts > 1);
	json_decref(m);
}

/* A group lease's object is "LOCK#LEASE_ID"; a store message reaches the
 * log and the 503 answers of every caller of the lock, so it names the
 * object "LOCK#…" (gcs_name_shown), never with the lease_id. */
#define SECRET "SECRETKEY0123456789abcdef"

static void
test_messages_hide_lease_id(void **state)
{
	gcs_store *s = *state;
	gcs_object o, out;
	gcs_err err;
	json_t *m = meta2("lease_id", SECRET, NULL, NULL);

	insert_ok(s, "sem/x#" SECRET, &o);
	fault("patch", "503", -1);
	assert_int_equal(gcs_patch(s, "sem/x#" SECRET, o.generation, 1, m, &out,
	                     &err),
	    GCS_UNAVAILABLE);
	if (strstr(err.msg, "SECRETKEY") != NULL ||
	    strstr(err.msg, "patch of sem/x#…: HTTP 503") == NULL)
		fail_msg("message: %s", err.msg);
	json_decref(m);
	gcs_object_clear(&o);
}

static void
test_reset_before_apply_is_retried(void **state)
{
	gcs_store *s = *state;
	gcs_object o;
	gcs_err err;
	json_t *m = meta2("lease_id", "L", NULL, NULL);

	fault("insert", "reset", 1);
	assert_int_equal(gcs_insert(s, "rs", m, &o, &err), GCS_OK);
	assert_int_equal(err.attempts, 2);
	assert_int_equal(fake_gcs_count(&fake, "insert"), 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 1);
	gcs_object_clear(&o);
	json_decref(m);
}

/* The first try is applied and its answer lost: the retry sees its own
 * write.  The store reports it faithfully, with attempts > 1, so that the
 * api layer can resolve it (read back and compare lease_id; a 404 after a
 * retried delete means released). */
static void
test_dropped_answers_leave_attempts(void **state)
{
	gcs_store *s = *state;
	gcs_object o, g;
	gcs_err err;
	json_t *m = meta2("lease_id", "mine", NULL, NULL);

	fault("insert", "drop", 1);
	assert_int_equal(gcs_insert(s, "amb", m, &o, &err), GCS_PRECONDITION);
	assert_int_equal(err.attempts, 2);
	assert_int_equal(gcs_get(s, "amb", &g, &err), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(g.metadata, "lease_id")),
	    "mine");
	fault("delete", "drop", 1);
	assert_int_equal(gcs_remove(s, "amb", g.generation, g.metageneration,
	                     &err),
	    GCS_NOT_FOUND);
	assert_int_equal(err.attempts, 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	/* A dropped patch: the retry's precondition no longer holds. */
	gcs_object_clear(&g);
	insert_ok(s, "amb2", &g);
	fault("patch", "drop", 1);
	assert_int_equal(gcs_patch(s, "amb2", g.generation, 1, m, &o, &err),
	    GCS_PRECONDITION);
	assert_int_equal(err.attempts, 2);
	gcs_object_clear(&g);
	json_decref(m);
}

static void
test_try_timeout_is_retried(void **state)
{
	gcs_store *s = *state;
	gcs_retry_policy p = { 3000, 5, 20, 300 };
	gcs_object o;
	gcs_err err;

	gcs_gs_set_retry(s, &p);
	insert_ok(s, "slow", &o);
	gcs_object_clear(&o);
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=get&kind=latency&ms=1000&count=1",
	                     NULL),
	    200);
	assert_int_equal(gcs_get(s, "slow", &o, &err), GCS_OK);
	assert_int_equal(err.attempts, 2);
	gcs_object_clear(&o);
}

/* Slow 429s (100 ms each) inside a 350 ms budget: a retry is only started
 * while a useful try still fits (GCS_TRY_MIN_MS), so the call ends on the
 * storage's own answer, busy with HTTP 429, and never on a try cut short
 * by the budget (a transport error, which would read as unavailable and
 * could leave a write applied with its answer lost). */
static void
test_no_retry_without_time_for_it(void **state)
{
	gcs_store *s = *state;
	gcs_retry_policy p = { 350, 1, 1, 1000 };
	gcs_object o;
	gcs_err err;
	json_t *m = meta2("lease_id", "L", NULL, NULL);

	gcs_gs_set_retry(s, &p);
	assert_int_equal(
	    fake_gcs_ctl(&fake,
	        "/_fake/fault?op=insert&kind=429&count=-1&delay=100", NULL),
	    200);
	assert_int_equal(gcs_insert(s, "slow429", m, &o, &err), GCS_BUSY);
	assert_int_equal(err.http_status, 429);
	assert_true(err.attempts >= 1);
	assert_int_equal(fake_gcs_count(&fake, "insert"), err.attempts);
	json_decref(m);
}

/* A stopping process: a call begun after the give-up time is not sent at
 * all, and a call retrying through an outage stops at it, long before its
 * own retry budget would run out. */
static void
test_give_up_at_shutdown(void **state)
{
	gcs_store *s = *state;
	gcs_retry_policy p = { 10000, 50, 200, 5000 };
	gcs_object o;
	gcs_err err;
	int64_t t0, took;

	gcs_gs_set_retry(s, &p);
	insert_ok(s, "gu", &o);
	gcs_object_clear(&o);
	gcs_give_up_at(util_mono_ms() - 1);
	assert_int_equal(gcs_get(s, "gu", &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(err.attempts, 0);
	assert_non_null(strstr(err.msg, "shutting down"));
	assert_int_equal(fake_gcs_count(&fake, "get"), 0);
	fault("get", "503", -1);
	t0 = util_mono_ms();
	gcs_give_up_at(t0 + 300);
	assert_int_equal(gcs_get(s, "gu", &o, &err), GCS_UNAVAILABLE);
	took = util_mono_ms() - t0;
	gcs_give_up_at(0);
	assert_true(err.attempts >= 1);
	assert_int_equal(fake_gcs_count(&fake, "get"), err.attempts);
	/* The budget is 10 s; the give-up time cut it to 300 ms (the
	 * bound leaves room for a slow machine, not for the full budget). */
	assert_true(took < 5000);
	/* Lifted: calls go through again. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/clear-faults", NULL), 200);
	assert_int_equal(gcs_get(s, "gu", &o, &err), GCS_OK);
	gcs_object_clear(&o);
}

static void
test_unreachable(void **state)
{
	gcs_store *s;
	fake_gcs dead;
	gcs_object o;
	gcs_err err;

	(void)state;
	assert_int_equal(fake_gcs_start(&dead, NULL), 0);
	fake_gcs_stop(&dead); /* its port is now closed */
	setenv("STORAGE_EMULATOR_HOST", dead.hostport, 1);
	s = gcs_gs_new(BUCKET, PREFIX, &err);
	assert_non_null(s);
	{
		gcs_retry_policy p = { 300, 5, 20, 100 };
		gcs_gs_set_retry(s, &p);
	}
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	/* Retried, yet never reached the store: no connection was made, so
	 * no answer later can be the echo of one of these tries. */
	{
		const char *p = strstr(err.msg, "unreachable after ");
		assert_non_null(p);
		assert_true(
		    strtol(p + strlen("unreachable after "), NULL, 10) > 1);
	}
	assert_int_equal(err.attempts, 0);
	assert_int_equal(err.http_status, 0);
	assert_int_equal(gcs_get(s, "sem/x#" SECRET, &o, &err),
	    GCS_UNAVAILABLE);
	if (strstr(err.msg, "SECRETKEY") != NULL ||
	    strstr(err.msg, "get of sem/x#… unreachable after ") == NULL)
		fail_msg("message: %s", err.msg);
	gcs_store_free(s);
}

static void
test_keepalive_one_connection(void **state)
{
	gcs_store *s = *state;
	gcs_object o;
	gcs_err err;
	int i;

	insert_ok(s, "ka", &o);
	gcs_object_clear(&o);
	for (i = 0; i < 20; i++) {
		assert_int_equal(gcs_get(s, "ka", &o, &err), GCS_OK);
		gcs_object_clear(&o);
	}
	/* 21 requests from one thread, one TCP connection (the control
	 * requests of this test use their own). */
	assert_int_equal(fake_gcs_count(&fake, "get"), 20);
	assert_true(fake_gcs_count(&fake, "connections") <= 1 + 3);
}

/* One pooled handle serves every method in turn: nothing of a request
 * (method, body, content type) leaks into the next one, and the
 * connection is kept throughout. */
static void
test_keepalive_mixed_methods(void **state)
{
	gcs_store *s = *state;
	gcs_object o, p;
	json_t *m = meta2("refresh_seq", "1", NULL, NULL), *r;
	gcs_err err;
	int i;

	/* No connection kept from an earlier test. */
	assert_int_equal(gcs_multi_stop(5000), 0);
	for (i = 0; i < 10; i++) {
		insert_ok(s, "mix", &o);
		assert_int_equal(gcs_get(s, "mix", &p, &err), GCS_OK);
		gcs_object_clear(&p);
		assert_int_equal(gcs_patch(s, "mix", o.generation, 1, m, &p,
		                     &err),
		    GCS_OK);
		assert_int_equal(p.metageneration, 2);
		assert_int_equal(gcs_remove(s, "mix", o.generation, 2, &err),
		    GCS_OK);
		gcs_object_clear(&o);
		gcs_object_clear(&p);
	}
	json_decref(m);
	/* the store's one connection and this control request's own (the
	 * reset in test_setup zeroed the count) */
	assert_int_equal(fake_gcs_count(&fake, "connections"), 1 + 1);
	assert_int_equal(fake_gcs_count(&fake, "insert"), 10);
	assert_int_equal(fake_gcs_count(&fake, "get"), 10);
	assert_int_equal(fake_gcs_count(&fake, "patch"), 10);
	assert_int_equal(fake_gcs_count(&fake, "delete"), 10);
	r = last_request("get"); /* after a POST on the same handle */
	assert_string_equal(jstr(r, "method"), "GET");
	assert_string_equal(jstr(r, "body"), "");
	assert_string_equal(jstr(r, "content_type"), "");
	json_decref(r);
	r = last_request("delete"); /* after a PATCH with a body */
	assert_string_equal(jstr(r, "method"), "DELETE");
	assert_string_equal(jstr(r, "body"), "");
	assert_string_equal(jstr(r, "content_type"), "");
	json_decref(r);
	r = last_request("patch");
	assert_string_equal(jstr(r, "method"), "PATCH");
	assert_string_equal(jstr(r, "content_type"), "application/json");
	assert_string_equal(jstr(r, "body"),
	    "{\"metadata\":{\"refresh_seq\":\"1\"}}");
	json_decref(r);
}

/* Through an HTTP proxy from the environment, a plain http:// request
 * names the whole URL in its request line.  The fake plays the proxy: it
 * sees the absolute URL (and does not know the path). */
static void
test_http_proxy_gets_absolute_url(void **state)
{
	char want[160], proxy[160];
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *a, *r;

	(void)state;
	snprintf(proxy, sizeof(proxy), "http://%s", fake.hostport);
	setenv("http_proxy", proxy, 1);
	s = open_store(PREFIX);
	assert_int_not_equal(gcs_get(s, "via/proxy", &o, &err), GCS_OK);
	unsetenv("http_proxy");
	gcs_store_free(s);
	a = fake_gcs_json(&fake, "/_fake/requests");
	r = json_array_get(a, json_array_size(a) - 1);
	snprintf(want, sizeof(want),
	    "http://%s/storage/v1/b/bkt/o/locks%%2Fvia%%2Fproxy?",
	    fake.hostport);
	if (strncmp(jstr(r, "uri"), want, strlen(want)) != 0)
		fail_msg("request line target '%s', want '%s...'",
		    jstr(r, "uri"), want);
	json_decref(a);
}

/*
 * A list page of large leases can pass the 1 MiB kept of an answer (an
 * entry takes up to twice its 8 KiB of metadata): such a page is asked for
 * again with fewer objects, which always fit, and the shorter page comes
 * with its token.  Before, page_size=1000 over large leases was a 503 on
 * every try.
 */
static void
test_list_page_too_large(void **state)
{
	enum { OBJS = 150, QUOTES = 4000 }; /* ~8 KiB each in the answer */
	gcs_store *s = *state;
	char name[32], *val = malloc(QUOTES + 1);
	gcs_page pg;
	gcs_object o;
	gcs_err err;
	json_t *m;
	long lists;
	int i, seen = 0, pages = 0;

	assert_non_null(val);
	memset(val, '"', QUOTES);
	val[QUOTES] = '\0';
	m = meta2("v", val, NULL, NULL);
	for (i = 0; i < OBJS; i++) {
		snprintf(name, sizeof(name), "fat/%03d", i);
		assert_int_equal(gcs_insert(s, name, m, &o, &err), GCS_OK);
		gcs_object_clear(&o);
	}
	lists = fake_gcs_count(&fake, "list");
	assert_int_equal(gcs_list(s, "fat/", OBJS, NULL, &pg, &err), GCS_OK);
	/* Too large at 150, asked again for what always fits. */
	assert_int_equal(fake_gcs_count(&fake, "list"), lists + 2);
	assert_true(pg.n > 0 && pg.n < OBJS);
	assert_non_null(pg.next_token);
	assert_true(json_equal(pg.items[0].obj.metadata, m));
	for (;;) {
		char tok[GCS_PAGE_TOKEN_MAX + 1];

		seen += (int)pg.n;
		pages++;
		if (pg.next_token == NULL)
			break;
		snprintf(tok, sizeof(tok), "%s", pg.next_token);
		gcs_page_clear(&pg);
		assert_true(pages < OBJS);
		assert_int_equal(gcs_list(s, "fat/", OBJS, tok, &pg, &err),
		    GCS_OK);
	}
	gcs_page_clear(&pg);
	assert_int_equal(seen, OBJS);
	json_decref(m);
	free(val);
}

/* ---- answers no real Cloud Storage gives ---- */

/*
 * A server on 127.0.0.1 that answers the request on its Nth connection
 * with the Nth of its answers (the last one for every later connection),
 * then closes it: for the answers the fake never sends (a header block
 * cut off, impossible generations).  At most CANNED_CONNS connections,
 * each waited for at most CANNED_WAIT_MS.
 */
#define CANNED_CONNS   32
#define CANNED_WAIT_MS 5000

typedef struct canned {
	int fd;
	int port;
	const char *const *answers; /* NULL-terminated, at least one */
	const char *one[2];         /* the answers of canned_start */
	int stop;
	int served;
	pthread_t thread;
} canned;

static void *
canned_main(void *arg)
{
	canned *c = arg;
	char buf[4096];
	struct pollfd p;
	const char *const *a;
	int fd, i, n;

	for (i = 0;
	     i < CANNED_CONNS && !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
	     i++) {
		p.fd = c->fd;
		p.events = POLLIN;
		if (poll(&p, 1, 100) <= 0) {
			i--; /* no client yet: the stop flag bounds this */
			continue;
		}
		if ((fd = accept(c->fd, NULL, NULL)) < 0)
			continue;
		p.fd = fd;
		/* The request: whatever arrives within a moment. */
		while (poll(&p, 1, 50) > 0 && recv(fd, buf, sizeof(buf), 0) > 0)
			;
		/* Counted before the answer goes out: the client may look
		 * at the count as soon as it has read the answer. */
		n = __atomic_add_fetch(&c->served, 1, __ATOMIC_SEQ_CST);
		for (a = c->answers; a[1] != NULL && n > 1; n--)
			a++;
		if (send(fd, *a, strlen(*a), MSG_NOSIGNAL) < 0)
			fail_msg("canned send");
		close(fd);
	}
	return NULL;
}

/* Start C answering ANSWERS in turn; a store on it in *S (short
 * retries). */
static void
canned_start_seq(canned *c, const char *const *answers, gcs_store **s)
{
	static const gcs_retry_policy p = { 300, 5, 20, 200 };
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	char host[64];
	gcs_err err;

	/* Not a memset: ANSWERS may be c->one (canned_start). */
	c->answers = answers;
	c->stop = 0;
	c->served = 0;
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(c->fd >= 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(c->fd, 16), 0);
	assert_int_equal(getsockname(c->fd, (struct sockaddr *)&a, &alen), 0);
	c->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&c->thread, NULL, canned_main, c), 0);
	snprintf(host, sizeof(host), "127.0.0.1:%d", c->port);
	setenv("STORAGE_EMULATOR_HOST", host, 1);
	*s = gcs_gs_new(BUCKET, PREFIX, &err);
	assert_non_null(*s);
	gcs_gs_set_retry(*s, &p);
}

/* Start C answering ANSWER to every request; a store on it in *S. */
static void
canned_start(canned *c, const char *answer, gcs_store **s)
{
	c->one[0] = answer;
	c->one[1] = NULL;
	canned_start_seq(c, c->one, s);
}

static void
canned_stop(canned *c, gcs_store *s)
{
	gcs_store_free(s);
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(c->thread, NULL);
	close(c->fd);
	setenv("STORAGE_EMULATOR_HOST", fake.hostport, 1);
}

/* gcs_get of "x" into *O (cleared first) from a store on a canned server
 * answering ANSWER. */
static int
canned_get(const char *answer, gcs_object *o, gcs_err *err)
{
	canned c;
	gcs_store *s;
	int rc;

	canned_start(&c, answer, &s);
	memset(o, 0, sizeof(*o));
	rc = gcs_get(s, "x", o, err);
	canned_stop(&c, s);
	return rc;
}

#define OBJ_ANSWER(gen, metagen) \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
	"Connection: close\r\n\r\n" \
	"{\"name\":\"locks/x\",\"generation\":" gen \
	",\"metageneration\":" metagen \
	",\"timeCreated\":\"2026-11-25T00:00:00.000Z\"," \
	"\"updated\":\"2026-11-25T00:00:00.000Z\",\"metadata\":{}}"

/* A generation or metageneration that is not 1..GCS_GEN_MAX makes the
 * answer malformed: a refresh computes metageneration + 1, which at
 * INT64_MAX overflowed, and a 0 or negative one cannot be written
 * against. */
static void
test_impossible_generations(void **state)
{
	static const char *bad[] = {
		OBJ_ANSWER("\"1\"", "\"9223372036854775807\""),
		OBJ_ANSWER("\"9223372036854775807\"", "\"1\""),
		OBJ_ANSWER("\"1\"", "\"0\""),
		OBJ_ANSWER("\"1\"", "-5"),
		OBJ_ANSWER("\"0\"", "\"1\""),
		OBJ_ANSWER("\"1\"", "\"-1\""),
		OBJ_ANSWER("\"1\"", "\"+1\""),
		OBJ_ANSWER("\"1\"", "\" 1\""),
		NULL,
	};
	gcs_object o;
	gcs_err err;
	int i;

	(void)state;
	for (i = 0; bad[i] != NULL; i++) {
		if (canned_get(bad[i], &o, &err) != GCS_UNAVAILABLE)
			fail_msg("answer %d taken: metageneration %lld", i,
			    (long long)o.metageneration);
		gcs_object_clear(&o);
	}
	/* The largest allowed, to show the server and the check work. */
	assert_int_equal(canned_get(OBJ_ANSWER("\"4611686018427387903\"", "7"),
	                     &o, &err),
	    GCS_OK);
	assert_int_equal(o.generation, GCS_GEN_MAX);
	assert_int_equal(o.metageneration, 7);
	gcs_object_clear(&o);
}

/* A delete answered with ANSWER is not taken as done: unavailable. */
static void
delete_not_done(const char *answer)
{
	canned c;
	gcs_store *s;
	gcs_err err;

	canned_start(&c, answer, &s);
	if (gcs_remove(s, "x", 5, 1, &err) == GCS_OK)
		fail_msg("delete taken as done on '%s'", answer);
	assert_int_equal(err.status, GCS_UNAVAILABLE);
	assert_true(__atomic_load_n(&c.served, __ATOMIC_SEQ_CST) >= 1);
	canned_stop(&c, s);
}

/* A chunked body, one ended by the connection's close and one whose
 * headers fold a line (obsolete, but whole) are whole answers; a body
 * shorter than its Content-Length, a malformed chunk, or a chunked
 * framing whose body is not chunked are none (unavailable after the
 * retries), never a short object. */
static void
test_answer_framings(void **state)
{
#define OBJ_JSON \
	"{\"name\":\"locks/x\",\"generation\":\"5\",\"metageneration\":\"2\"," \
	"\"updated\":\"2026-11-25T00:00:00.000Z\",\"metadata\":{}}"
	static const char *good[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		"Connection: close\r\n\r\n"
		"10\r\n{\"name\":\"locks/x\r\n"
		"5b;ext=1\r\n\",\"generation\":\"5\",\"metageneration\":\"2\","
		"\"updated\":\"2026-11-25T00:00:00.000Z\",\"metadata\":{}}\r\n"
		"0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n" OBJ_JSON,
		"HTTP/1.1 200 OK\r\nContent-Length: 107\r\n"
		" folded\r\n\r\n" OBJ_JSON,
		NULL,
	};
	static const char *bad[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" OBJ_JSON,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"zz\r\n" OBJ_JSON "\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		"Content-Length: 107\r\n\r\n" OBJ_JSON,
		NULL,
	};
	gcs_object o;
	gcs_err err;
	int i;

	(void)state;
	for (i = 0; good[i] != NULL; i++) {
		if (canned_get(good[i], &o, &err) != GCS_OK)
			fail_msg("answer %d refused: %s", i, err.msg);
		assert_int_equal(o.generation, 5);
		assert_int_equal(o.metageneration, 2);
		gcs_object_clear(&o);
	}
	for (i = 0; bad[i] != NULL; i++) {
		if (canned_get(bad[i], &o, &err) != GCS_UNAVAILABLE)
			fail_msg("answer %d taken: generation %lld", i,
			    (long long)o.generation);
		assert_non_null(strstr(err.msg, "unreachable"));
		gcs_object_clear(&o);
	}
#undef OBJ_JSON
}

/* An answer whose connection closes inside its header block does not
 * say whether the request was applied: libcurl 7.88 reports it as a
 * complete answer with the status of its first line, and a delete was
 * taken as done. */
static void
test_headers_cut_off(void **state)
{
	static const char *cut[] = {
		"HTTP/1.1 204 No Content\r\n",
		"HTTP/1.1 204 No Content\r\nDate: Wed, 25 Nov 2026 08:00:00 "
		"GMT",
		"HTTP/1.1 200 OK\r\nContent-Le",
		NULL,
	};
	canned c;
	gcs_store *s;
	gcs_err err;
	int i;

	(void)state;
	for (i = 0; cut[i] != NULL; i++)
		delete_not_done(cut[i]);
	canned_start(&c, "HTTP/1.1 204 No Content\r\n\r\n", &s);
	assert_int_equal(gcs_remove(s, "x", 5, 1, &err), GCS_OK);
	canned_stop(&c, s);
}

/* Any 2xx is success for every method, as Google's client libraries
 * take it: Google's emulator answers a delete 200 with an empty body,
 * where Cloud Storage answers 204, and every release through it was a
 * 503.  An error object in a 200 is still no list page. */
static void
test_any_2xx_is_success(void **state)
{
	static const char *to_delete[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		NULL,
	};
	canned c;
	gcs_store *s;
	gcs_object o;
	gcs_page pg;
	gcs_err err;
	int i;

	(void)state;
	for (i = 0; to_delete[i] != NULL; i++) {
		canned_start(&c, to_delete[i], &s);
		if (gcs_remove(s, "x", 5, 1, &err) != GCS_OK)
			fail_msg("delete answered '%s' not done: %s",
			    to_delete[i], err.msg);
		canned_stop(&c, s);
	}
	canned_start(&c,
	    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":500,\"message\":\"Backend Error\"}}",
	    &s);
	assert_int_equal(gcs_list(s, "", 10, NULL, &pg, &err), GCS_UNAVAILABLE);
	canned_stop(&c, s);
	canned_start(&c,
	    "HTTP/1.1 203 Non-Authoritative Information\r\n"
	    "Connection: close\r\n\r\n"
	    "{\"name\":\"locks/x\",\"generation\":\"5\","
	    "\"metageneration\":\"1\","
	    "\"updated\":\"2026-11-25T00:00:00.000Z\"}",
	    &s);
	memset(&o, 0, sizeof(o));
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_OK);
	assert_int_equal(o.generation, 5);
	gcs_object_clear(&o);
	canned_stop(&c, s);
}

#define CREATED(status) \
	"HTTP/1.1 " status "\r\nConnection: close\r\n\r\n" \
	"{\"name\":\"locks/x\",\"generation\":\"1795689044265\"," \
	"\"metageneration\":\"1\"," \
	"\"timeCreated\":\"2026-11-25T00:00:00.000Z\"," \
	"\"updated\":\"2026-11-25T00:00:00.000Z\"}"

/* An insert answered 200 (Cloud Storage) or 201 is the create, in one
 * request.  However its answer is written, the new lease is what was
 * sent: escapes where a plain character would do, the emulator's own
 * metadata keys (it ignores fields=), members twice (the last counts,
 * as jansson reads it).  Its generation is the answer's. */
static void
test_insert_answer_forms(void **state)
{
	static const struct {
		const char *answer;
		int64_t gen;
	} cases[] = {
		{ CREATED("200 OK"), 1795689044265LL },
		{ CREATED("201 Created"), 1795689044265LL },
		{ "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
		  "{\"generation\":\"17\",\"metageneration\":\"1\","
		  "\"updated\":\"2026-11-25T00:00:00.000\\u005a\"}",
		    17 },
		{ "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
		  "{\"gener\\u0061tion\":\"17\",\"metageneration\":\"1\","
		  "\"updated\":\"2026-11-25T00:00:00.000Z\"}",
		    17 },
		{ "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
		  "{\"name\":\"locks/x\",\"generation\":\"17\","
		  "\"metageneration\":\"1\",\"updated\":"
		  "\"2026-11-25T00:00:00.000Z\",\"metadata\":{\"lease_id\":"
		  "\"L1\",\"x_emulator_upload\":\"a\\\"b\"}}",
		    17 },
		{ "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
		  "{\"generation\":\"3\",\"generation\":\"17\","
		  "\"metageneration\":\"1\",\"updated\":"
		  "\"2026-11-25T00:00:00.000Z\"}",
		    17 },
	};
	json_t *m = meta2("lease_id", "L1", "owner", "alice");
	canned c;
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		canned_start(&c, cases[i].answer, &s);
		if (gcs_insert(s, "x", m, &o, &err) != GCS_OK)
			fail_msg("insert answer %zu refused: %s", i, err.msg);
		assert_true(o.generation == cases[i].gen);
		assert_int_equal(o.updated_ms, 1795564800000LL);
		assert_true(json_equal(o.metadata, m));
		gcs_object_clear(&o);
		assert_int_equal(__atomic_load_n(&c.served, __ATOMIC_SEQ_CST),
		    1);
		canned_stop(&c, s);
	}
	json_decref(m);
}

#define READ_BACK(lease) \
	"HTTP/1.1 200 OK\r\nConnection: close\r\n" \
	"Date: Wed, 25 Nov 2026 00:00:01 GMT\r\n\r\n" \
	"{\"name\":\"locks/x\",\"generation\":\"7\",\"metageneration\":\"1\"," \
	"\"updated\":\"2026-11-25T00:00:00.000Z\",\"metadata\":" \
	"{\"lease_id\":\"" lease "\",\"x_emulator_upload\":\"1\"}}"
#define NOT_FOUND \
	"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n" \
	"{\"error\":{\"code\":404,\"message\":\"No such object.\"}}"

/* RC of an insert of lease L1 on a canned server answering ANSWERS. */
static int
insert_on(const char *const *answers, gcs_object *o, gcs_err *err)
{
	json_t *m = meta2("lease_id", "L1", "gone", NULL);
	canned c;
	gcs_store *s;
	int rc;

	canned_start_seq(&c, answers, &s);
	memset(o, 0, sizeof(*o));
	rc = gcs_insert(s, "x", m, o, err);
	canned_stop(&c, s);
	json_decref(m);
	return rc;
}

/* A 2xx to an insert that does not say what it created (no generation,
 * an empty body) was applied, and ifGenerationMatch=0 made it ours: it
 * is read back, never a 503 for a write that succeeded.  The object read
 * back is ours when it holds what we wrote (keys the store adds are
 * fine); another lease, or none, means someone moved since: 412, as a
 * create that lost would have answered. */
static void
test_insert_2xx_without_generation(void **state)
{
	const char *ours[] = { "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{}",
		READ_BACK("L1"), NULL };
	const char *empty[] = {
		"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
		READ_BACK("L1"), NULL
	};
	const char *theirs[] = { ours[0], READ_BACK("L2"), NULL };
	const char *gone[] = { ours[0], NOT_FOUND, NULL };
	gcs_object o;
	gcs_err err;

	(void)state;
	assert_int_equal(insert_on(ours, &o, &err), GCS_OK);
	assert_int_equal(o.generation, 7);
	assert_int_equal(o.metageneration, 1);
	assert_true(o.now_ms == 1795564801000LL); /* the read's Date */
	gcs_object_clear(&o);
	assert_int_equal(insert_on(empty, &o, &err), GCS_OK);
	assert_int_equal(o.generation, 7);
	gcs_object_clear(&o);
	assert_int_equal(insert_on(theirs, &o, &err), GCS_PRECONDITION);
	assert_int_equal(insert_on(gone, &o, &err), GCS_PRECONDITION);
}

/* RC of a patch of lease L1 against generation GEN on a canned server
 * answering ANSWERS. */
static int
patch_on(const char *const *answers, int64_t gen, gcs_object *o, gcs_err *err)
{
	json_t *m = meta2("lease_id", "L1", NULL, NULL);
	canned c;
	gcs_store *s;
	int rc;

	canned_start_seq(&c, answers, &s);
	memset(o, 0, sizeof(*o));
	rc = gcs_patch(s, "x", gen, 1, m, o, err);
	canned_stop(&c, s);
	json_decref(m);
	return rc;
}

/* A 2xx to a patch without the object is read back the same way: the
 * generation written against, holding what was written. */
static void
test_patch_2xx_without_object(void **state)
{
	const char *ours[] = { "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		READ_BACK("L1"), NULL };
	const char *gone[] = { ours[0], NOT_FOUND, NULL };
	gcs_object o;
	gcs_err err;

	(void)state;
	assert_int_equal(patch_on(ours, 7, &o, &err), GCS_OK);
	assert_int_equal(o.generation, 7);
	gcs_object_clear(&o);
	/* Written against another generation: not ours any more. */
	assert_int_equal(patch_on(ours, 6, &o, &err), GCS_PRECONDITION);
	assert_int_equal(patch_on(gone, 7, &o, &err), GCS_NOT_FOUND);
}

/* Both error shapes give a message a person can act on; the status
 * alone classifies. */
static void
test_error_shapes(void **state)
{
	static const char gcs[] =
	    "HTTP/1.1 412 Precondition Failed\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":412,\"message\":\"At least one of the "
	    "pre-conditions you specified did not hold.\",\"errors\":[{"
	    "\"domain\":\"global\",\"reason\":\"conditionNotMet\",\"message\":"
	    "\"At least one of the pre-conditions you specified did not "
	    "hold.\"}]}}";
	static const char emulator[] =
	    "HTTP/1.1 412 Precondition Failed\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":412,\"message\":\"{\\\"error\\\": "
	    "{\\\"errors\\\": [{\\\"domain\\\": \\\"global\\\", "
	    "\\\"message\\\": \\\"ifGenerationMatch validation failed. "
	    "Expected = 0 vs Actual = 1795689044265.\\\"}]}}\"}}";
	static const char plain[] =
	    "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":503,\"message\":\"Backend\\nError\"}}";
	/* Cloud Storage's own message quotes the object: its lease_id is
	 * cut out, in either spelling. */
	static const char quoting[] =
	    "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":429,\"message\":\"The object "
	    "bkt/locks/sem/x#" SECRET " exceeded the rate limit (locks%2Fsem"
	    "%2Fx%23" SECRET ").\",\"errors\":[{\"reason\":"
	    "\"rateLimitExceeded\",\"message\":\"The object bkt/locks/"
	    "sem/x#" SECRET
	    " exceeded the rate limit (locks%2Fsem%2Fx%23" SECRET ").\"}]}}";
	canned c;
	gcs_store *s;
	gcs_err err;

	(void)state;
	canned_start(&c, gcs, &s);
	assert_int_equal(gcs_remove(s, "x", 5, 1, &err), GCS_PRECONDITION);
	assert_non_null(strstr(err.msg,
	    "HTTP 412 (conditionNotMet: At least one of the pre-conditions"));
	canned_stop(&c, s);
	canned_start(&c, emulator, &s);
	assert_int_equal(gcs_remove(s, "x", 5, 1, &err), GCS_PRECONDITION);
	assert_non_null(strstr(err.msg,
	    "HTTP 412 (ifGenerationMatch validation failed. Expected = 0"));
	canned_stop(&c, s);
	canned_start(&c, plain, &s);
	assert_int_equal(gcs_remove(s, "x", 5, 1, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "HTTP 503 (Backend?Error)"));
	canned_stop(&c, s);
	canned_start(&c, quoting, &s);
	assert_int_equal(gcs_remove(s, "sem/x#" SECRET, 5, 1, &err), GCS_BUSY);
	if (strstr(err.msg, "SECRETKEY") != NULL ||
	    strstr(err.msg,
	        "delete of sem/x#…: HTTP 429 (rateLimitExceeded: "
	        "The object bkt/locks/sem/x#… exceeded the rate "
	        "limit (locks%2Fsem%2Fx%23…).)") == NULL)
		fail_msg("message: %s", err.msg);
	canned_stop(&c, s);
}

/* A status Cloud Storage does not give to a request means something else
 * answers in its place: unavailable (503 to callers), not a bug of ours
 * (500).  A 412 is about the object only where a precondition was sent;
 * a 400 refuses a request we built. */
static void
test_unexpected_statuses(void **state)
{
	static const char *kinds[] = { "301", "304", "405", "410", "413", "412",
		"409", NULL };
	gcs_store *s = *state;
	gcs_object o;
	gcs_err err;
	char q[96];
	int i;

	insert_ok(s, "st", &o);
	gcs_object_clear(&o);
	for (i = 0; kinds[i] != NULL; i++) {
		snprintf(q, sizeof(q), "/_fake/fault?op=get&kind=%s", kinds[i]);
		assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
		if (gcs_get(s, "st", &o, &err) != GCS_UNAVAILABLE)
			fail_msg("get answered %s: status %d", kinds[i],
			    err.status);
	}
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/fault?op=get&kind=400",
	                     NULL),
	    200);
	assert_int_equal(gcs_get(s, "st", &o, &err), GCS_INVALID);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/fault?op=delete&kind=412",
	                     NULL),
	    200);
	assert_int_equal(gcs_remove(s, "st", 1, 1, &err), GCS_PRECONDITION);
}

/* ---- gcs_referee_check: does the store referee locks as Cloud Storage
 * does (gcs/referee.c): refuse what its preconditions forbid, and move a
 * patched object's metageneration by one?  Cloud Storage and Google's
 * emulator do; the firebase dialect (firebase-tools' emulator) and a
 * noprecond fault on one write apply what they should refuse; the
 * fake-gcs-server dialect keeps metageneration 1; a store that fails
 * otherwise cannot be judged.  Whatever the verdict, nothing is left
 * behind. ---- */

/* Every write the check makes, each answered as it must be. */
static void
assert_refuses(gcs_store *s)
{
	gcs_err err;

	assert_int_equal(gcs_referee_check(s, &err), GCS_REFEREE_OK);
	assert_string_equal(err.msg, "");
	assert_int_equal(fake_gcs_count(&fake, "insert"), 2);
	assert_int_equal(fake_gcs_count(&fake, "patch"), 2);
	assert_int_equal(fake_gcs_count(&fake, "delete"), 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
}

static void
test_referee_cloud_storage_refuses(void **state)
{
	assert_refuses(*state);
}

/* Deletes answered 200, 13-digit generations, errors as JSON text. */
static void
test_referee_google_emulator_refuses(void **state)
{
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=emulator",
	                     NULL),
	    200);
	fake_gcs_http(&fake, "POST", "/storage/v1/b?project=test", NULL,
	    "{\"name\":\"" BUCKET "\"}", NULL, NULL); /* 409 when made */
	assert_refuses(*state);
}

/* Applies everything: the second create is the one that says so. */
static void
test_referee_firebase_applies(void **state)
{
	gcs_err err;

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=firebase",
	                     NULL),
	    200);
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_CANNOT);
	assert_non_null(strstr(err.msg,
	    "applied a second insert with ifGenerationMatch=0"));
	assert_non_null(strstr(err.msg, "two callers could hold one lock"));
	assert_int_equal(fake_gcs_count(&fake, "patch"), 0);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
}

/* fsouza/fake-gcs-server reads preconditions, but a patch leaves the
 * metageneration at 1 (and "updated" where it was): the patch that had to
 * be applied is the one that says so. */
static void
test_referee_fake_gcs_server_keeps_metageneration(void **state)
{
	gcs_err err;

	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/config?dialect=fake-gcs-server", NULL),
	    200);
	fake_gcs_http(&fake, "POST", "/storage/v1/b?project=test", NULL,
	    "{\"name\":\"" BUCKET "\"}", NULL, NULL); /* 409 when made */
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_CANNOT);
	if (strstr(err.msg,
	        "gave metageneration 1, not 2, and kept the "
	        "generation") == NULL)
		fail_msg("verdict '%s'", err.msg);
	/* Both preconditions of the wrong patch were read: it was
	 * refused, and the right one applied. */
	assert_int_equal(fake_gcs_count(&fake, "patch"), 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
}

/* One write that applies what it should refuse is enough: N calls of OP
 * with their preconditions unread, and the words the verdict names it
 * by. */
static void
assert_applies_one(gcs_store *s, const char *op, int n, const char *words)
{
	gcs_err err;

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	fault(op, "noprecond", n);
	assert_int_equal(gcs_referee_check(s, &err), GCS_REFEREE_CANNOT);
	if (strstr(err.msg, words) == NULL)
		fail_msg("%s: verdict '%s'", op, err.msg);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
}

static void
test_referee_asks_each_write(void **state)
{
	/* The first create is new either way; the second is the
	 * question. */
	assert_applies_one(*state, "insert", 2, "a second insert");
	assert_applies_one(*state, "patch", 1,
	    "a patch with a wrong ifMetagenerationMatch");
	/* The first delete is the one with the wrong generation. */
	assert_applies_one(*state, "delete", 1,
	    "a delete with a wrong ifGenerationMatch");
}

/* A store that refuses the patch whose preconditions hold could not
 * refresh a lease: a 412 to both patches. */
static void
test_referee_right_patch_refused(void **state)
{
	gcs_err err;

	fault("patch", "412", 2);
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_CANNOT);
	if (strstr(err.msg, "refused a patch whose preconditions held") == NULL)
		fail_msg("verdict '%s'", err.msg);
	assert_int_equal(fake_gcs_count(&fake, "patch"), 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
}

/* A store that fails otherwise cannot be judged: the verdict says which
 * call failed and why, and an object written is deleted. */
static void
test_referee_failures_are_unknown(void **state)
{
	static const gcs_retry_policy p = { 1500, 5, 40, 1000 };
	gcs_store *missing;
	gcs_err err;

	fault("insert", "503", -1);
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_UNKNOWN);
	if (strncmp(err.msg, "the first insert: ", 18) != 0 ||
	    strstr(err.msg, "503") == NULL)
		fail_msg("verdict '%s'", err.msg);
	/* Applied, never answered: the object it may have made is gone. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	fault("insert", "drop", -1);
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_UNKNOWN);
	if (strncmp(err.msg, "the first insert: ", 18) != 0)
		fail_msg("verdict '%s'", err.msg);
	assert_int_equal(fake_gcs_count(&fake, "delete"), 1);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	fault("patch", "500", -1);
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_UNKNOWN);
	if (strncmp(err.msg,
	        "a patch with a wrong ifMetagenerationMatch: ", 44) != 0)
		fail_msg("verdict '%s'", err.msg);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	/* A bucket that is not there: the first insert's 404. */
	missing = fake_gcs_store(&fake, "missing-bkt", PREFIX, &p);
	assert_non_null(missing);
	assert_int_equal(gcs_referee_check(missing, &err), GCS_REFEREE_UNKNOWN);
	assert_non_null(strstr(err.msg, "the first insert: "));
	gcs_store_free(missing);
}

/* A storage that says it does not do a call lockgate needs (501, as
 * firebase-tools' emulator answers a patch under /storage/v1/; 405) is
 * judged, not asked again: it cannot referee locks.  The object made is
 * deleted. */
static void
test_referee_unimplemented_is_cannot(void **state)
{
	static const char *const kinds[] = { "501", "405" };
	gcs_err err;
	size_t i;

	for (i = 0; i < 2; i++) {
		assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL),
		    200);
		fault("patch", kinds[i], -1);
		assert_int_equal(gcs_referee_check(*state, &err),
		    GCS_REFEREE_CANNOT);
		if (strncmp(err.msg,
		        "the storage does not implement a patch "
		        "with a wrong ifMetagenerationMatch (HTTP ",
		        80) != 0 ||
		    strstr(err.msg, kinds[i]) == NULL)
			fail_msg("verdict '%s'", err.msg);
		assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	}
}

/* The object is one no lock can be: under the prefix, named with a '.'
 * first and a '#' (a group's lease, left out of every listing). */
static void
test_referee_object_name(void **state)
{
	json_t *reqs, *e;
	gcs_err err;
	size_t i;
	int seen = 0;

	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_OK);
	reqs = fake_gcs_json(&fake, "/_fake/requests");
	assert_non_null(reqs);
	json_array_foreach(reqs, i, e)
	{
		if (strcmp(jstr(e, "op"), "delete") != 0)
			continue;
		assert_non_null(
		    strstr(jstr(e, "uri"), "/o/locks%2F.lockgate-referee%23"));
		seen++;
	}
	assert_int_equal(seen, 2);
	json_decref(reqs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_insert_request, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_insert_metadata_escaping,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_get_request_and_answer,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_storage_clock_from_date,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_no_date_no_time,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_emulator_lease_cycle,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_emulator_list_pages,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_cloud_storage_refuses, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_google_emulator_refuses, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_referee_firebase_applies,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_referee_asks_each_write,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_fake_gcs_server_keeps_metageneration,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_right_patch_refused, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_failures_are_unknown, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_referee_unimplemented_is_cannot, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_referee_object_name,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_patch_request, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_delete_request, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_list_paging_and_prefix,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_large_answers, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_check_reaches_bucket_or_names_missing, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_missing_bucket, test_setup,
		    test_teardown),
		cmocka_unit_test(test_bad_bucket_and_prefix),
		cmocka_unit_test_setup_teardown(test_endpoint_forms, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_retry_503_then_ok,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_not_retried, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_429_outlives_retries_is_busy, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_reset_before_apply_is_retried, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_dropped_answers_leave_attempts, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_try_timeout_is_retried,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_no_retry_without_time_for_it, test_setup,
		    test_teardown),
		cmocka_unit_test_setup_teardown(test_give_up_at_shutdown,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_messages_hide_lease_id,
		    test_setup, test_teardown),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test_setup_teardown(test_list_page_too_large,
		    test_setup, test_teardown),
		cmocka_unit_test(test_impossible_generations),
		cmocka_unit_test(test_headers_cut_off),
		cmocka_unit_test(test_answer_framings),
		cmocka_unit_test(test_any_2xx_is_success),
		cmocka_unit_test(test_insert_answer_forms),
		cmocka_unit_test(test_insert_2xx_without_generation),
		cmocka_unit_test(test_patch_2xx_without_object),
		cmocka_unit_test(test_error_shapes),
		cmocka_unit_test_setup_teardown(test_unexpected_statuses,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_one_connection,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_mixed_methods,
		    test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(
		    test_http_proxy_gets_absolute_url, test_setup,
		    test_teardown),
	};

	return cmocka_run_group_tests_name("gcs_client", tests, group_setup,
	    group_teardown);
}
