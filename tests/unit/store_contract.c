/*
 * store_contract.c: the store contract suite (see store_contract.h).
 *
 * Each test asserts outcomes a broken store would get wrong: the status of
 * every call, generation and metageneration values, metadata contents and
 * list order.  No test asserts on elapsed time.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store_contract.h"
#include "group_contract.h"

#define CT_NAME_BUF       (GCS_NAME_MAX + 1)
#define CT_PREFIX_BUF     48
#define CT_THREADS        8  /* concurrent writers on one name */
#define CT_LIST_NAMES     9  /* objects made by the list test */
#define CT_PAGE_LOOPS     64 /* bound on pages fetched by one listing */
#define CT_CLOCK_SLACK_MS (10 * 60 * 1000) /* store clock vs ours */
#define CT_UPDATE_GAP_NS  20000000L        /* 20 ms: lets a ms clock move */

static store_contract_open_fn ct_open;
static store_contract_close_fn ct_close;
static void *ct_ctx;
static unsigned ct_seq;

typedef struct ct_state {
	gcs_store *s;
	char prefix[CT_PREFIX_BUF]; /* unique per test, ends with '/' */
} ct_state;

static int
ct_setup(void **state)
{
	ct_state *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return -1;
	st->s = ct_open(ct_ctx);
	if (st->s == NULL) {
		free(st);
		return -1;
	}
	snprintf(st->prefix, sizeof(st->prefix), "ct%ldx%u/", (long)getpid(),
	    ++ct_seq);
	*state = st;
	return 0;
}

static int
ct_teardown(void **state)
{
	ct_state *st = *state;

	if (st != NULL) {
		ct_close(st->s, ct_ctx);
		free(st);
	}
	return 0;
}

/* BUF = the test's prefix + SUFFIX. */
static const char *
ct_name(const ct_state *st, char *buf, const char *suffix)
{
	int n = snprintf(buf, CT_NAME_BUF, "%s%s", st->prefix, suffix);

	assert_true(n > 0 && n < CT_NAME_BUF);
	return buf;
}

static json_t *
ct_meta(const char *k1, const char *v1, const char *k2, const char *v2)
{
	json_t *m = json_object();

	assert_non_null(m);
	if (k1 != NULL)
		assert_int_equal(json_object_set_new(m, k1, json_string(v1)),
		    0);
	if (k2 != NULL)
		assert_int_equal(json_object_set_new(m, k2, json_string(v2)),
		    0);
	return m;
}

static void
ct_assert_str(const json_t *meta, const char *key, const char *want)
{
	json_t *v = json_object_get(meta, key);

	assert_non_null(v);
	assert_true(json_is_string(v));
	assert_string_equal(json_string_value(v), want);
}

static void
ct_sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Insert NAME with META and check the answer of a fresh object. */
static void
ct_insert_ok(gcs_store *s, const char *name, const json_t *meta,
    gcs_object *out)
{
	gcs_err err;
	int rc = gcs_insert(s, name, meta, out, &err);

	if (rc != GCS_OK)
		fail_msg("insert %s: %s (%s)", name, gcs_status_str(rc),
		    err.msg);
	assert_true(out->generation > 0);
	assert_int_equal(out->metageneration, 1);
	assert_non_null(out->metadata);
}

/* ---- insert and get ---- */

static void
test_insert_get_roundtrip(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object ins, got;
	gcs_err err;
	json_t *m =
	    ct_meta("lease_id", "L-1", "purpose", "deploy \"prod\" \xc3\xa9");
	int64_t real = gcs_clock_real(NULL);

	json_object_set_new(m, "empty", json_string(""));
	ct_name(st, name, "a/b.c_d-e");
	ct_insert_ok(st->s, name, m, &ins);
	assert_int_equal(ins.created_ms, ins.updated_ms);
	assert_true(ins.created_ms > real - CT_CLOCK_SLACK_MS);
	assert_true(ins.created_ms < real + CT_CLOCK_SLACK_MS);
	assert_true(json_equal(ins.metadata, m));

	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.generation, ins.generation);
	assert_int_equal(got.metageneration, 1);
	assert_int_equal(got.created_ms, ins.created_ms);
	assert_int_equal(got.updated_ms, ins.updated_ms);
	assert_true(got.now_ms > real - CT_CLOCK_SLACK_MS);
	assert_true(got.now_ms < real + CT_CLOCK_SLACK_MS);
	assert_true(json_is_object(got.metadata));
	assert_int_equal(json_object_size(got.metadata), 3);
	ct_assert_str(got.metadata, "lease_id", "L-1");
	ct_assert_str(got.metadata, "purpose", "deploy \"prod\" \xc3\xa9");
	ct_assert_str(got.metadata, "empty", "");

	/* The store copied the metadata: changing ours changes nothing. */
	json_object_set_new(m, "lease_id", json_string("changed"));
	gcs_object_clear(&got);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	ct_assert_str(got.metadata, "lease_id", "L-1");

	json_decref(m);
	gcs_object_clear(&ins);
	gcs_object_clear(&got);
}

static void
test_insert_empty_metadata(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object ins, got;
	gcs_err err;
	json_t *m = json_object();

	ct_insert_ok(st->s, ct_name(st, name, "empty"), m, &ins);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_true(json_is_object(got.metadata));
	assert_int_equal(json_object_size(got.metadata), 0);
	json_decref(m);
	gcs_object_clear(&ins);
	gcs_object_clear(&got);
}

static void
test_insert_twice_412(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object first, second, got;
	gcs_err err;
	json_t *m1 = ct_meta("lease_id", "first", NULL, NULL);
	json_t *m2 = ct_meta("lease_id", "second", NULL, NULL);

	ct_insert_ok(st->s, ct_name(st, name, "twice"), m1, &first);
	assert_int_equal(gcs_insert(st->s, name, m2, &second, &err),
	    GCS_PRECONDITION);
	assert_int_equal(err.status, GCS_PRECONDITION);
	assert_null(second.metadata);

	/* The loser changed nothing. */
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.generation, first.generation);
	assert_int_equal(got.metageneration, 1);
	ct_assert_str(got.metadata, "lease_id", "first");

	json_decref(m1);
	json_decref(m2);
	gcs_object_clear(&first);
	gcs_object_clear(&got);
}

static void
test_get_absent_404(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object got;
	gcs_err err;

	assert_int_equal(gcs_get(st->s, ct_name(st, name, "never"), &got, &err),
	    GCS_NOT_FOUND);
	assert_int_equal(err.status, GCS_NOT_FOUND);
	assert_null(got.metadata);
}

static void
test_distinct_names_distinct_objects(void **state)
{
	ct_state *st = *state;
	char n1[CT_NAME_BUF], n2[CT_NAME_BUF];
	gcs_object a, b, got;
	gcs_err err;
	json_t *ma = ct_meta("who", "a", NULL, NULL);
	json_t *mb = ct_meta("who", "b", NULL, NULL);

	/* Names that a careless file mapping would fold together. */
	ct_insert_ok(st->s, ct_name(st, n1, "x/y"), ma, &a);
	ct_insert_ok(st->s, ct_name(st, n2, "x_y"), mb, &b);
	assert_true(a.generation != b.generation);
	assert_int_equal(gcs_get(st->s, n1, &got, &err), GCS_OK);
	ct_assert_str(got.metadata, "who", "a");
	gcs_object_clear(&got);
	assert_int_equal(gcs_get(st->s, n2, &got, &err), GCS_OK);
	ct_assert_str(got.metadata, "who", "b");
	gcs_object_clear(&got);

	json_decref(ma);
	json_decref(mb);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
}

/* ---- patch ---- */

static void
test_patch_preconditions(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], absent[CT_NAME_BUF];
	gcs_object ins, out, got;
	gcs_err err;
	json_t *m = ct_meta("lease_id", "L", "ttl", "30");
	json_t *p = ct_meta("ttl", "60", NULL, NULL);

	ct_insert_ok(st->s, ct_name(st, name, "p"), m, &ins);

	assert_int_equal(gcs_patch(st->s, name, ins.generation + 1, 1, p, &out,
	                     &err),
	    GCS_PRECONDITION);
	assert_int_equal(err.status, GCS_PRECONDITION);
	assert_int_equal(gcs_patch(st->s, name, ins.generation, 2, p, &out,
	                     &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_patch(st->s, ct_name(st, absent, "nope"),
	                     ins.generation, 1, p, &out, &err),
	    GCS_NOT_FOUND);
	assert_int_equal(err.status, GCS_NOT_FOUND);

	/* None of the failed patches changed anything. */
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.metageneration, 1);
	ct_assert_str(got.metadata, "ttl", "30");

	json_decref(m);
	json_decref(p);
	gcs_object_clear(&ins);
	gcs_object_clear(&got);
}

static void
test_patch_merges_and_bumps(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object ins, out, out2, got;
	gcs_err err;
	json_t *m = ct_meta("lease_id", "L", "ttl", "30");
	json_t *p = ct_meta("ttl", "60", "holder", "ci-7");
	json_t *del = json_object();

	json_object_set_new(m, "gone", json_string("soon"));
	json_object_set_new(del, "gone", json_null());
	json_object_set_new(del, "never_there", json_null());
	ct_insert_ok(st->s, ct_name(st, name, "merge"), m, &ins);
	ct_sleep_ns(CT_UPDATE_GAP_NS);

	assert_int_equal(gcs_patch(st->s, name, ins.generation, 1, p, &out,
	                     &err),
	    GCS_OK);
	assert_int_equal(out.generation, ins.generation);
	assert_int_equal(out.metageneration, 2);
	assert_int_equal(out.created_ms, ins.created_ms);
	assert_true(out.updated_ms > ins.updated_ms);
	assert_int_equal(json_object_size(out.metadata), 4);
	ct_assert_str(out.metadata, "lease_id", "L");
	ct_assert_str(out.metadata, "ttl", "60");
	ct_assert_str(out.metadata, "holder", "ci-7");
	ct_assert_str(out.metadata, "gone", "soon");

	/* The old metageneration no longer matches. */
	assert_int_equal(gcs_patch(st->s, name, ins.generation, 1, p, &out2,
	                     &err),
	    GCS_PRECONDITION);

	/* A null deletes a key; a null for an absent key is harmless. */
	assert_int_equal(gcs_patch(st->s, name, ins.generation, 2, del, &out2,
	                     &err),
	    GCS_OK);
	assert_int_equal(out2.metageneration, 3);
	assert_null(json_object_get(out2.metadata, "gone"));
	assert_null(json_object_get(out2.metadata, "never_there"));
	assert_int_equal(json_object_size(out2.metadata), 3);
	assert_true(out2.updated_ms >= out.updated_ms);

	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.generation, ins.generation);
	assert_int_equal(got.metageneration, 3);
	assert_int_equal(got.updated_ms, out2.updated_ms);
	assert_true(json_equal(got.metadata, out2.metadata));

	json_decref(m);
	json_decref(p);
	json_decref(del);
	gcs_object_clear(&ins);
	gcs_object_clear(&out);
	gcs_object_clear(&out2);
	gcs_object_clear(&got);
}

/* ---- messages ---- */

/* A failing call on a group lease's object ("LOCK#LEASE_ID") says so
 * without the lease_id: a store's message reaches the log and the answers
 * of every caller of the lock, the lease_id only its holder. */
#define CT_SECRET "SECRETKEY0123456789abcdef"

static void
ct_assert_hidden(const gcs_err *err, int want)
{
	assert_int_equal(err->status, want);
	if (strstr(err->msg, "SECRETKEY") != NULL)
		fail_msg("a lease_id in a store message: %s", err->msg);
}

static void
test_failures_hide_lease_id(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], absent[CT_NAME_BUF];
	gcs_object ins, out;
	gcs_err err;
	json_t *m = ct_meta("lease_id", CT_SECRET, NULL, NULL);

	ct_insert_ok(st->s, ct_name(st, name, "sem/x#" CT_SECRET), m, &ins);
	ct_name(st, absent, "sem/y#" CT_SECRET);
	assert_int_equal(gcs_insert(st->s, name, m, &out, &err),
	    GCS_PRECONDITION);
	ct_assert_hidden(&err, GCS_PRECONDITION);
	assert_int_equal(gcs_patch(st->s, name, ins.generation + 1, 1, m, &out,
	                     &err),
	    GCS_PRECONDITION);
	ct_assert_hidden(&err, GCS_PRECONDITION);
	assert_int_equal(gcs_remove(st->s, name, ins.generation, 2, &err),
	    GCS_PRECONDITION);
	ct_assert_hidden(&err, GCS_PRECONDITION);
	assert_int_equal(gcs_get(st->s, absent, &out, &err), GCS_NOT_FOUND);
	ct_assert_hidden(&err, GCS_NOT_FOUND);
	assert_int_equal(gcs_patch(st->s, absent, 1, 1, m, &out, &err),
	    GCS_NOT_FOUND);
	ct_assert_hidden(&err, GCS_NOT_FOUND);
	assert_int_equal(gcs_remove(st->s, absent, 1, 1, &err), GCS_NOT_FOUND);
	ct_assert_hidden(&err, GCS_NOT_FOUND);
	json_decref(m);
	gcs_object_clear(&ins);
}

/* ---- remove ---- */

static void
test_remove_preconditions(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], absent[CT_NAME_BUF];
	gcs_object ins, out, got;
	gcs_err err;
	json_t *m = ct_meta("lease_id", "L", NULL, NULL);

	ct_insert_ok(st->s, ct_name(st, name, "r"), m, &ins);
	assert_int_equal(gcs_remove(st->s, ct_name(st, absent, "nope"), 1, 1,
	                     &err),
	    GCS_NOT_FOUND);
	assert_int_equal(err.status, GCS_NOT_FOUND);
	assert_int_equal(gcs_remove(st->s, name, ins.generation + 1, 1, &err),
	    GCS_PRECONDITION);
	assert_int_equal(err.status, GCS_PRECONDITION);
	assert_int_equal(gcs_remove(st->s, name, ins.generation, 2, &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	gcs_object_clear(&got);

	/* After a patch the delete needs the new metageneration. */
	assert_int_equal(gcs_patch(st->s, name, ins.generation, 1, m, &out,
	                     &err),
	    GCS_OK);
	assert_int_equal(gcs_remove(st->s, name, ins.generation, 1, &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_remove(st->s, name, ins.generation, 2, &err),
	    GCS_OK);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_NOT_FOUND);
	assert_int_equal(gcs_remove(st->s, name, ins.generation, 2, &err),
	    GCS_NOT_FOUND);

	json_decref(m);
	gcs_object_clear(&ins);
	gcs_object_clear(&out);
}

static void
test_recreate_new_generation(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF];
	gcs_object a, b, got;
	gcs_err err;
	json_t *ma = ct_meta("lease_id", "A", NULL, NULL);
	json_t *mb = ct_meta("lease_id", "B", NULL, NULL);

	ct_insert_ok(st->s, ct_name(st, name, "again"), ma, &a);
	assert_int_equal(gcs_remove(st->s, name, a.generation, 1, &err),
	    GCS_OK);
	ct_insert_ok(st->s, name, mb, &b);
	assert_true(b.generation > a.generation);
	assert_int_equal(b.metageneration, 1);

	/* ABA: the old holder's (generation, metageneration) must not match
	 * the re-created object even though metageneration is 1 again. */
	assert_int_equal(gcs_remove(st->s, name, a.generation, 1, &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_patch(st->s, name, a.generation, 1, ma, &got,
	                     &err),
	    GCS_PRECONDITION);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.generation, b.generation);
	ct_assert_str(got.metadata, "lease_id", "B");

	json_decref(ma);
	json_decref(mb);
	gcs_object_clear(&a);
	gcs_object_clear(&b);
	gcs_object_clear(&got);
}

/* ---- list ---- */

/* In byte order, the order list must return.  Names chosen so that an
 * order over an encoded form ('/' as %2F) or over path components differs
 * from byte order. */
static const char *const ct_list_names[CT_LIST_NAMES] = {
	"a",
	"a-b",
	"a.b",
	"a/1",
	"a/2",
	"a/3/deep",
	"a_b",
	"ab",
	"b/1",
};

static void
ct_make_list_objects(ct_state *st, int64_t *gens)
{
	char name[CT_NAME_BUF];
	gcs_object o;
	size_t i;

	/* Insert in an order unlike the sorted one. */
	for (i = CT_LIST_NAMES; i-- > 0;) {
		json_t *m = ct_meta("name", ct_list_names[i], NULL, NULL);

		ct_insert_ok(st->s, ct_name(st, name, ct_list_names[i]), m, &o);
		gens[i] = o.generation;
		gcs_object_clear(&o);
		json_decref(m);
	}
}

/* List PREFIX (relative to the test prefix) with pages of PAGE and check
 * the result is exactly names FIRST..FIRST+COUNT-1 of ct_list_names. */
static void
ct_list_expect(ct_state *st, const int64_t *gens, const char *prefix, int page,
    size_t first, size_t count)
{
	char full[CT_NAME_BUF];
	char *token = NULL;
	size_t seen = 0, plen = strlen(st->prefix), i;
	int pages = 0;
	gcs_page pg;
	gcs_err err;

	ct_name(st, full, prefix);
	do {
		int rc = gcs_list(st->s, full, page, token, &pg, &err);

		if (rc != GCS_OK)
			fail_msg("list %s: %s (%s)", full, gcs_status_str(rc),
			    err.msg);
		assert_true(++pages <= CT_PAGE_LOOPS);
		assert_true(pg.n <= (size_t)page);
		assert_true(pg.now_ms > 0);
		for (i = 0; i < pg.n; i++) {
			const gcs_entry *e = &pg.items[i];

			assert_true(seen < count);
			assert_true(strlen(e->name) > plen);
			assert_memory_equal(e->name, st->prefix, plen);
			assert_string_equal(e->name + plen,
			    ct_list_names[first + seen]);
			assert_int_equal(e->obj.generation, gens[first + seen]);
			assert_int_equal(e->obj.metageneration, 1);
			assert_true(e->obj.updated_ms > 0);
			ct_assert_str(e->obj.metadata, "name",
			    ct_list_names[first + seen]);
			seen++;
		}
		free(token);
		token = NULL;
		if (pg.next_token != NULL) {
			/* A token only follows a full page. */
			assert_int_equal(pg.n, (size_t)page);
			token = strdup(pg.next_token);
			assert_non_null(token);
		}
		gcs_page_clear(&pg);
	} while (token != NULL);
	assert_int_equal(seen, count);
	/* A store may end with one empty page, never with more. */
	assert_true((size_t)pages <= count / (size_t)page + 1);
}

static void
test_list_paging(void **state)
{
	ct_state *st = *state;
	int64_t gens[CT_LIST_NAMES];
	static const int pages[] = { 1, 2, 1000 };
	size_t i;

	ct_make_list_objects(st, gens);
	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		ct_list_expect(st, gens, "", pages[i], 0, CT_LIST_NAMES);
		/* "a" matches every name starting with a, not only "a/". */
		ct_list_expect(st, gens, "a", pages[i], 0, 8);
		ct_list_expect(st, gens, "a/", pages[i], 3, 3);
		ct_list_expect(st, gens, "a/3/", pages[i], 5, 1);
		ct_list_expect(st, gens, "b", pages[i], 8, 1);
		ct_list_expect(st, gens, "c", pages[i], 0, 0);
		ct_list_expect(st, gens, "a/0", pages[i], 0, 0);
	}
}

/* Listing after a name (which need not exist), then on with the page
 * tokens, gives exactly the names that sort after it, under the prefix,
 * across pages of any size (a page may be short, even empty, while a
 * token says more follow: gs:// counts the name it starts from); a name
 * sorting before the prefix starts at the prefix. */
static void
test_list_after(void **state)
{
	ct_state *st = *state;
	int64_t gens[CT_LIST_NAMES];
	static const char *const afters[] = { "a", "a/", "a/2", "a/25", "b",
		"zzz" };
	static const size_t firsts[] = { 1, 3, 5, 5, 8, 9 };
	char full[CT_NAME_BUF], after[CT_NAME_BUF], *token = NULL;
	size_t i, j, seen, plen = strlen(st->prefix);
	gcs_page pg;
	gcs_err err;
	int max, rc;

	ct_make_list_objects(st, gens);
	for (i = 0; i < sizeof(afters) / sizeof(afters[0]); i++) {
		for (max = 1; max <= 1000; max = max == 1 ? 2 : max * 500) {
			seen = firsts[i];
			ct_name(st, after, afters[i]);
			ct_name(st, full, "");
			for (j = 0; j < CT_PAGE_LOOPS; j++) {
				size_t k;

				if (j == 0)
					rc = gcs_list_after(st->s, full, max,
					    after, &pg, &err);
				else
					rc = gcs_list(st->s, full, max, token,
					    &pg, &err);
				assert_int_equal(rc, GCS_OK);
				assert_true(pg.n <= (size_t)max);
				for (k = 0; k < pg.n; k++) {
					assert_true(seen < CT_LIST_NAMES);
					assert_string_equal(pg.items[k].name +
					        plen,
					    ct_list_names[seen]);
					assert_int_equal(pg.items[k]
					                     .obj.generation,
					    gens[seen]);
					seen++;
				}
				free(token);
				token = pg.next_token;
				pg.next_token = NULL;
				gcs_page_clear(&pg);
				if (token == NULL)
					break;
			}
			assert_null(token);
			assert_int_equal(seen, CT_LIST_NAMES);
		}
	}
	/* Before the prefix: from its first name. */
	ct_name(st, full, "a/");
	assert_int_equal(gcs_list_after(st->s, full, 1000, "!", &pg, &err),
	    GCS_OK);
	assert_int_equal(pg.n, 3);
	assert_string_equal(pg.items[0].name + plen, "a/1");
	gcs_page_clear(&pg);
}

static void
test_list_skips_removed(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], full[CT_NAME_BUF];
	gcs_object o;
	gcs_page pg;
	gcs_err err;
	json_t *m = json_object();

	ct_insert_ok(st->s, ct_name(st, name, "k/gone"), m, &o);
	assert_int_equal(gcs_remove(st->s, name, o.generation, 1, &err),
	    GCS_OK);
	gcs_object_clear(&o);
	ct_insert_ok(st->s, ct_name(st, name, "k/kept"), m, &o);
	assert_int_equal(gcs_list(st->s, ct_name(st, full, "k/"), 10, NULL, &pg,
	                     &err),
	    GCS_OK);
	assert_int_equal(pg.n, 1);
	assert_string_equal(pg.items[0].name, name);
	assert_int_equal(pg.items[0].obj.generation, o.generation);
	assert_null(pg.next_token);
	gcs_page_clear(&pg);
	gcs_object_clear(&o);
	json_decref(m);
}

/* ---- concurrency ---- */

typedef struct ct_racer {
	gcs_store *s;
	const char *name;
	pthread_barrier_t *go;
	int64_t gen, metagen; /* for patch races */
	int id;
	int rc;
	gcs_object out;
} ct_racer;

static void *
ct_insert_racer(void *arg)
{
	ct_racer *r = arg;
	char id[16];
	json_t *m = json_object();
	gcs_err err;

	snprintf(id, sizeof(id), "%d", r->id);
	json_object_set_new(m, "racer", json_string(id));
	pthread_barrier_wait(r->go);
	r->rc = gcs_insert(r->s, r->name, m, &r->out, &err);
	json_decref(m);
	return NULL;
}

static void *
ct_patch_racer(void *arg)
{
	ct_racer *r = arg;
	char id[16];
	json_t *m = json_object();
	gcs_err err;

	snprintf(id, sizeof(id), "%d", r->id);
	json_object_set_new(m, "racer", json_string(id));
	pthread_barrier_wait(r->go);
	r->rc = gcs_patch(r->s, r->name, r->gen, r->metagen, m, &r->out, &err);
	json_decref(m);
	return NULL;
}

/* Run CT_THREADS copies of FN on NAME; return the index of the one winner
 * after checking every other thread got GCS_PRECONDITION. */
static int
ct_race(ct_state *st, const char *name, void *(*fn)(void *), int64_t gen,
    int64_t metagen, ct_racer *r)
{
	pthread_t th[CT_THREADS];
	pthread_barrier_t go;
	int i, winner = -1, wins = 0;

	assert_int_equal(pthread_barrier_init(&go, NULL, CT_THREADS), 0);
	for (i = 0; i < CT_THREADS; i++) {
		r[i] = (ct_racer){ .s = st->s,
			.name = name,
			.go = &go,
			.gen = gen,
			.metagen = metagen,
			.id = i };
		assert_int_equal(pthread_create(&th[i], NULL, fn, &r[i]), 0);
	}
	for (i = 0; i < CT_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < CT_THREADS; i++) {
		if (r[i].rc == GCS_OK) {
			wins++;
			winner = i;
		} else {
			assert_int_equal(r[i].rc, GCS_PRECONDITION);
		}
	}
	assert_int_equal(wins, 1);
	return winner;
}

static void
test_concurrent_insert_one_wins(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], id[16];
	ct_racer r[CT_THREADS];
	gcs_object got;
	gcs_err err;
	int w, i;

	ct_name(st, name, "race");
	w = ct_race(st, name, ct_insert_racer, 0, 0, r);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.generation, r[w].out.generation);
	snprintf(id, sizeof(id), "%d", w);
	ct_assert_str(got.metadata, "racer", id);
	gcs_object_clear(&got);
	for (i = 0; i < CT_THREADS; i++)
		gcs_object_clear(&r[i].out);
}

static void
test_concurrent_patch_one_wins(void **state)
{
	ct_state *st = *state;
	char name[CT_NAME_BUF], id[16];
	ct_racer r[CT_THREADS];
	gcs_object ins, got;
	gcs_err err;
	json_t *m = json_object();
	int w, i;

	ct_insert_ok(st->s, ct_name(st, name, "prace"), m, &ins);
	w = ct_race(st, name, ct_patch_racer, ins.generation, 1, r);
	assert_int_equal(gcs_get(st->s, name, &got, &err), GCS_OK);
	assert_int_equal(got.metageneration, 2);
	snprintf(id, sizeof(id), "%d", w);
	ct_assert_str(got.metadata, "racer", id);
	gcs_object_clear(&got);
	gcs_object_clear(&ins);
	for (i = 0; i < CT_THREADS; i++)
		gcs_object_clear(&r[i].out);
	json_decref(m);
}

int
store_contract_run(const char *suite_name, store_contract_open_fn open,
    store_contract_close_fn close, void *ctx)
{
	char groups[128];
	int failed;
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_insert_get_roundtrip,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_insert_empty_metadata,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_insert_twice_412, ct_setup,
		    ct_teardown),
		cmocka_unit_test_setup_teardown(test_get_absent_404, ct_setup,
		    ct_teardown),
		cmocka_unit_test_setup_teardown(
		    test_distinct_names_distinct_objects, ct_setup,
		    ct_teardown),
		cmocka_unit_test_setup_teardown(test_patch_preconditions,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_patch_merges_and_bumps,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_remove_preconditions,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_failures_hide_lease_id,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_recreate_new_generation,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_list_after, ct_setup,
		    ct_teardown),
		cmocka_unit_test_setup_teardown(test_list_paging, ct_setup,
		    ct_teardown),
		cmocka_unit_test_setup_teardown(test_list_skips_removed,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_insert_one_wins,
		    ct_setup, ct_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_patch_one_wins,
		    ct_setup, ct_teardown),
	};

	ct_open = open;
	ct_close = close;
	ct_ctx = ctx;
	failed = _cmocka_run_group_tests(suite_name, tests,
	    sizeof(tests) / sizeof(tests[0]), NULL, NULL);
	/* Then semaphores and shared locks over the same store. */
	snprintf(groups, sizeof(groups), "%s_groups", suite_name);
	return failed + group_contract_run(groups, open, close, ctx);
}
