/*
 * test_store_file.c: the store contract over file://, then what only the
 * file store promises: safe name mapping, durability across reopen,
 * recovery from a writer stopped before and after its commit point, a live
 * store finishing a dead writer's batch, kill -9 of a writing process,
 * two stores (and two processes) sharing one directory, strictly
 * increasing generations (also when the clock goes back), group commit
 * (fewer syncs than writes: counts, never timings), checkpoints, tombstone
 * recycling and spare files, and a store without them (--file-no-prealloc).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gcs/gcs_client.h"
#include "gcs/store_file.h"
#include "store_contract.h"
#include "tmpdir.h"

#define T_PATH          1024
#define T_BASE          256
#define T_NAME          (GCS_NAME_MAX + 1)
#define T_GROUP_THREADS 64
#define T_GROUP_OPS     8    /* insert+remove cycles per thread */
#define T_BIG_OBJECTS   1024 /* for the list and checkpoint tests */
#define T_BIG_META      8000 /* near GCS_META_BYTES_MAX: big records */
#define T_FORK_ROUNDS   40
#define T_FORK_TRIES    20000 /* bound on inserts retried on one name */
#define T_PIPE_WAIT_MS  60000 /* bound on waiting for a child's report */
#define T_RACE_THREADS  8

static char base[T_BASE]; /* mkdtemp'd root of every test directory */
static pid_t child_pid;   /* a forked writer still to be reaped */

/* Teardown of the tests that fork: a child left by a failed assertion is
 * stopped by its pid. */
static int
reap_child(void **state)
{
	(void)state;
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
		child_pid = 0;
	}
	return 0;
}

/* Everything under PATH, gone. */
static void
rm_rf(const char *path)
{
	tmpdir_remove(path);
}

/* A fresh empty directory under base, in BUF. */
static const char *
fresh_dir(char *buf)
{
	snprintf(buf, T_PATH, "%s/dXXXXXX", base);
	assert_non_null(mkdtemp(buf));
	return buf;
}

static gcs_store *
open_ok(const char *dir)
{
	gcs_err err;
	gcs_store *s = gcs_file_new(dir, &err);

	if (s == NULL)
		fail_msg("open %s: %s", dir, err.msg);
	return s;
}

static json_t *
meta1(const char *k, const char *v)
{
	json_t *m = json_object();

	json_object_set_new(m, k, json_string(v));
	return m;
}

static int64_t
insert_ok(gcs_store *s, const char *name, const char *val)
{
	json_t *m = meta1("v", val);
	gcs_object o;
	gcs_err err;
	int64_t g;

	if (gcs_insert(s, name, m, &o, &err) != GCS_OK)
		fail_msg("insert %s: %s", name, err.msg);
	g = o.generation;
	gcs_object_clear(&o);
	json_decref(m);
	return g;
}

/* Status of get NAME; on GCS_OK fills gen/metagen and checks "v". */
static int
get_v(gcs_store *s, const char *name, int64_t *gen, int64_t *mg,
    const char *want_v)
{
	gcs_object o;
	gcs_err err;
	int rc = gcs_get(s, name, &o, &err);

	if (rc == GCS_OK) {
		if (gen)
			*gen = o.generation;
		if (mg)
			*mg = o.metageneration;
		if (want_v != NULL)
			assert_string_equal(json_string_value(
			                        json_object_get(o.metadata,
			                            "v")),
			    want_v);
		gcs_object_clear(&o);
	}
	return rc;
}

static int
count_entries(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

/* ---- the contract ---- */

static gcs_store *
contract_open(void *ctx)
{
	char dir[T_PATH];

	(void)ctx;
	return gcs_file_new(fresh_dir(dir), NULL);
}

static void
contract_close(gcs_store *s, void *ctx)
{
	(void)ctx;
	gcs_store_free(s); /* the directories go with base at the end */
}

/* ---- names ---- */

static void
test_names_stay_inside(void **state)
{
	static const char *const names[] = {
		"..",
		".",
		".hidden",
		"a/../../etc/passwd",
		"%41",
		"A",
		"x/y",
		"x%2Fy",
		"a b\t\n",
		"caf\xc3\xa9",
		"-",
		"~tilde",
	};
	char dir[T_PATH], big[T_NAME];
	size_t i, k;
	gcs_store *s;
	gcs_page pg;
	gcs_err err;
	DIR *d;
	struct dirent *de;

	json_t *m = json_object();
	gcs_object o;

	(void)state;
	s = open_ok(fresh_dir(dir));
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		insert_ok(s, names[i], names[i]);
	/* Not UTF-8: refused, as GCS refuses it. */
	assert_int_equal(gcs_insert(s, "\xff\x01", m, &o, &err), GCS_INVALID);
	json_decref(m);
	/* 256 bytes, most of them '/': the encoding is longer than a file
	 * name may be, so it is hashed; two such names stay distinct. */
	for (k = 0; k < GCS_NAME_MAX; k++)
		big[k] = k % 2 ? '/' : 'q';
	big[GCS_NAME_MAX] = '\0';
	insert_ok(s, big, "big1");
	big[0] = 'r';
	insert_ok(s, big, "big2");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(get_v(s, names[i], NULL, NULL, names[i]),
		    GCS_OK);
	assert_int_equal(get_v(s, big, NULL, NULL, "big2"), GCS_OK);
	big[0] = 'q';
	assert_int_equal(get_v(s, big, NULL, NULL, "big1"), GCS_OK);

	/* Every object is a plain file directly in DIR, none hidden. */
	d = opendir(dir);
	assert_non_null(d);
	k = 0;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		char p[T_PATH * 2];

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (de->d_name[0] == '.')
			continue; /* the store's own files, spares */
		assert_int_equal(lstat(p, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		k++;
	}
	closedir(d);
	assert_int_equal(k, sizeof(names) / sizeof(names[0]) + 2);

	/* list returns the real names, in byte order. */
	assert_int_equal(gcs_list(s, "", 1000, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, k);
	for (i = 1; i < pg.n; i++)
		assert_true(strcmp(pg.items[i - 1].name, pg.items[i].name) < 0);
	gcs_page_clear(&pg);
	assert_int_equal(gcs_list(s, "q/", 10, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, 1);
	assert_string_equal(pg.items[0].name, big);
	gcs_page_clear(&pg);
	gcs_store_free(s);
}

static void
test_foreign_files_ignored(void **state)
{
	char dir[T_PATH], p[T_PATH * 2];
	gcs_store *s;
	gcs_page pg;
	gcs_object o;
	gcs_err err;
	FILE *f;

	(void)state;
	s = open_ok(fresh_dir(dir));
	insert_ok(s, "real", "r");
	snprintf(p, sizeof(p), "%s/sub", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/%%zz", dir);
	f = fopen(p, "w");
	fclose(f);
	snprintf(p, sizeof(p), "%s/%%41", dir); /* non-canonical "A" */
	f = fopen(p, "w");
	fclose(f);
	snprintf(p, sizeof(p), "%s/broken", dir);
	f = fopen(p, "w");
	fputs("{not json", f);
	fclose(f);
	assert_int_equal(gcs_list(s, "", 1000, NULL, &pg, &err), GCS_OK);
	/* "sub" is a directory: reading it fails, so it is skipped too. */
	assert_int_equal(pg.n, 1);
	assert_string_equal(pg.items[0].name, "real");
	gcs_page_clear(&pg);
	/* A corrupt object is an error of the store, never a crash. */
	assert_int_equal(gcs_get(s, "broken", &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(gcs_get(s, "A", &o, &err), GCS_NOT_FOUND);
	gcs_store_free(s);
}

/* A store's messages reach the 503 answers of every caller of a lock, and
 * its details the server's log: a group lease's object ("LOCK#LEASE_ID")
 * is named "LOCK#…" in both, and no message prints the data directory
 * (the host's), an object file or the system's error text, which the
 * detail has for the operator.  WANT is in the message; WHY (NULL: no
 * detail) and the directory are in the detail. */
#define T_SECRET "SECRETKEY0123456789abcdef"

static void
assert_msg_hides(const gcs_err *err, const char *dir, const char *want,
    const char *why)
{
	const char *detail = gcs_err_detail(err);

	assert_int_equal(err->status, GCS_UNAVAILABLE);
	if (strstr(err->msg, "SECRETKEY") != NULL ||
	    strstr(err->msg, dir) != NULL || strstr(err->msg, want) == NULL ||
	    (why != NULL && strstr(err->msg, why) != NULL))
		fail_msg("message: %s", err->msg);
	if (strstr(detail, "SECRETKEY") != NULL ||
	    strstr(detail, want) == NULL ||
	    (why != NULL &&
	        (strstr(detail, why) == NULL || strstr(detail, dir) == NULL)))
		fail_msg("detail: %s", detail);
}

static void
test_messages_hide_lease_and_dir(void **state)
{
	char dir[T_PATH], p[T_PATH * 2];
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "1");
	FILE *f;

	(void)state;
	s = open_ok(fresh_dir(dir));
	snprintf(p, sizeof(p), "%s/sem%%2Fx%%23" T_SECRET, dir);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("{not json", f);
	fclose(f);
	assert_int_equal(gcs_get(s, "sem/x#" T_SECRET, &o, &err),
	    GCS_UNAVAILABLE);
	assert_msg_hides(&err, dir, "object sem/x#… is corrupt", NULL);
	assert_int_equal(gcs_insert(s, "sem/x#" T_SECRET, m, &o, &err),
	    GCS_UNAVAILABLE);
	assert_msg_hides(&err, dir, "object sem/x#… is corrupt", NULL);
	/* Unreadable: a directory where the object file would be. */
	snprintf(p, sizeof(p), "%s/sem%%2Fy%%23" T_SECRET, dir);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(gcs_insert(s, "sem/y#" T_SECRET, m, &o, &err),
	    GCS_UNAVAILABLE);
	assert_msg_hides(&err, dir, "could not read object sem/y#…",
	    strerror(EISDIR));
	json_decref(m);
	gcs_store_free(s);
}

/* The store's log fails under a running store (another hand put a
 * directory in its place; as root, which the tests may be, no mode bits
 * would stop a write): writes fail, callers are told which step failed,
 * the operator where and why; once the log is back, writes go on. */
static void
test_log_failure_hides_dir(void **state)
{
	char dir[T_PATH], wal[T_PATH + 8], moved[T_PATH + 16];
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "1");

	(void)state;
	s = open_ok(fresh_dir(dir));
	insert_ok(s, "before", "1");
	snprintf(wal, sizeof(wal), "%s/.wal", dir);
	snprintf(moved, sizeof(moved), "%s/wal.moved", dir);
	assert_int_equal(rename(wal, moved), 0);
	assert_int_equal(mkdir(wal, 0700), 0);
	assert_int_equal(gcs_insert(s, "during", m, &o, &err), GCS_UNAVAILABLE);
	assert_msg_hides(&err, dir, "the local store could not open its log",
	    strerror(EISDIR));
	assert_non_null(strstr(gcs_err_detail(&err), "/.wal)"));
	assert_int_equal(rmdir(wal), 0);
	assert_int_equal(rename(moved, wal), 0);
	insert_ok(s, "after", "1");
	json_decref(m);
	gcs_store_free(s);
}

/* ---- open ---- */

static void
test_open_errors_and_relative(void **state)
{
	char dir[T_PATH], p[T_PATH * 2], cwd[T_PATH];
	gcs_store *s;
	gcs_err err;
	struct stat st;
	FILE *f;

	(void)state;
	fresh_dir(dir);
	snprintf(p, sizeof(p), "%s/plain", dir);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	assert_null(gcs_file_new(p, &err));
	assert_int_equal(err.status, GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "not a directory"));
	snprintf(p, sizeof(p), "%s/plain/below", dir);
	assert_null(gcs_file_new(p, &err));
	assert_non_null(strstr(err.msg, "cannot create"));
	assert_null(gcs_file_new("", &err));
	assert_int_equal(err.status, GCS_INVALID);
	assert_null(gcs_file_new("/proc/lockgate-no/x", &err));
	assert_non_null(strstr(err.msg, "/proc/lockgate-no"));

	/* Relative to the working directory, created with mode 0700, and
	 * reachable through gcs_open. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	s = gcs_open("file://rel/data", &err);
	assert_int_equal(chdir(cwd), 0);
	assert_non_null(s);
	snprintf(p, sizeof(p), "%s/rel/data", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	insert_ok(s, "x", "1");
	gcs_store_free(s);
	s = open_ok(p);
	assert_int_equal(get_v(s, "x", NULL, NULL, "1"), GCS_OK);
	assert_int_equal(gcs_check(s, &err), GCS_OK);
	gcs_store_free(s);
}

/* ---- durability and generations ---- */

static void
test_reopen_keeps_state(void **state)
{
	char dir[T_PATH];
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "patched");
	int64_t g1, g2, gen, mg;

	(void)state;
	s = open_ok(fresh_dir(dir));
	g1 = insert_ok(s, "keep", "k");
	assert_int_equal(gcs_patch(s, "keep", g1, 1, m, &o, &err), GCS_OK);
	gcs_object_clear(&o);
	g2 = insert_ok(s, "gone", "g");
	assert_int_equal(gcs_remove(s, "gone", g2, 1, &err), GCS_OK);
	gcs_store_free(s);

	s = open_ok(dir);
	assert_int_equal(get_v(s, "keep", &gen, &mg, "patched"), GCS_OK);
	assert_int_equal(gen, g1);
	assert_int_equal(mg, 2);
	assert_int_equal(get_v(s, "gone", NULL, NULL, NULL), GCS_NOT_FOUND);
	/* Re-created after a restart: a larger generation. */
	assert_true(insert_ok(s, "gone", "again") > g2);
	assert_int_equal(count_entries(dir, ".tmp."), 0);
	gcs_store_free(s);
	json_decref(m);
}

static int64_t
clock_2001(void *ctx)
{
	(void)ctx;
	return 1000000000000LL; /* 2001-09-09 */
}

static void
test_generation_survives_clock_going_back(void **state)
{
	char dir[T_PATH];
	gcs_store *s;
	gcs_err err;
	gcs_object o;
	int64_t g, prev;
	int i;

	(void)state;
	s = open_ok(fresh_dir(dir));
	prev = insert_ok(s, "n", "now");
	/* Generations look like GCS's: microseconds of the store clock. */
	assert_true(prev >= gcs_clock_real(NULL) * 1000 - 60000000LL);
	assert_int_equal(gcs_remove(s, "n", prev, 1, &err), GCS_OK);
	gcs_store_free(s);

	s = gcs_file_new_clock(dir, clock_2001, NULL, &err);
	assert_non_null(s);
	for (i = 0; i < 5; i++) {
		g = insert_ok(s, "n", "past");
		assert_true(g > prev);
		assert_int_equal(gcs_get(s, "n", &o, &err), GCS_OK);
		assert_int_equal(o.created_ms, clock_2001(NULL));
		assert_int_equal(o.now_ms, clock_2001(NULL));
		gcs_object_clear(&o);
		assert_int_equal(gcs_remove(s, "n", g, 1, &err), GCS_OK);
		prev = g;
	}
	gcs_store_free(s);
}

/* ---- crash recovery ---- */

static void
test_crash_before_commit_keeps_old_state(void **state)
{
	char dir[T_PATH];
	gcs_store *s, *s2;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "new");
	int64_t g, gen, mg;

	(void)state;
	s = open_ok(fresh_dir(dir));
	g = insert_ok(s, "x", "old");
	gcs_file_set_crash_point(s, GCS_FILE_CRASH_BEFORE_COMMIT);
	assert_int_equal(gcs_patch(s, "x", g, 1, m, &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(get_v(s, "x", NULL, NULL, "old"), GCS_OK);
	assert_int_equal(gcs_insert(s, "y", m, &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(gcs_check(s, &err), GCS_UNAVAILABLE);

	s2 = open_ok(dir);
	assert_int_equal(count_entries(dir, ".tmp."), 0);
	assert_int_equal(get_v(s2, "x", &gen, &mg, "old"), GCS_OK);
	assert_int_equal(gen, g);
	assert_int_equal(mg, 1);
	assert_int_equal(get_v(s2, "y", NULL, NULL, NULL), GCS_NOT_FOUND);
	/* The torn record is gone: later writes survive another reopen. */
	assert_int_equal(gcs_patch(s2, "x", g, 1, m, &o, &err), GCS_OK);
	gcs_object_clear(&o);
	gcs_store_free(s2);
	s2 = open_ok(dir);
	assert_int_equal(get_v(s2, "x", NULL, &mg, "new"), GCS_OK);
	assert_int_equal(mg, 2);
	gcs_store_free(s2);
	gcs_store_free(s);
	json_decref(m);
}

static void
test_crash_after_commit_is_recovered(void **state)
{
	char dir[T_PATH];
	gcs_store *s, *s2;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "committed");
	int64_t g, gen;

	(void)state;
	s = open_ok(fresh_dir(dir));
	g = insert_ok(s, "x", "old");
	gcs_file_set_crash_point(s, GCS_FILE_CRASH_AFTER_COMMIT);
	assert_int_equal(gcs_remove(s, "x", g, 1, &err), GCS_UNAVAILABLE);
	/* Killed half way through rewriting the file: readers see a torn
	 * file as an error, never as a state. */
	assert_int_equal(get_v(s, "x", NULL, NULL, NULL), GCS_UNAVAILABLE);

	s2 = open_ok(dir);
	assert_int_equal(get_v(s2, "x", NULL, NULL, NULL), GCS_NOT_FOUND);
	assert_int_equal(count_entries(dir, ".tmp."), 0);
	gcs_store_free(s);

	/* Same for an insert, and the recovered generation is respected. */
	gcs_file_set_crash_point(s2, GCS_FILE_CRASH_AFTER_COMMIT);
	assert_int_equal(gcs_insert(s2, "z", m, &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(get_v(s2, "z", NULL, NULL, NULL), GCS_UNAVAILABLE);
	s = open_ok(dir);
	assert_int_equal(get_v(s, "z", &gen, NULL, "committed"), GCS_OK);
	assert_true(gen > g);
	assert_true(insert_ok(s, "w", "after") > gen);
	gcs_store_free(s);
	gcs_store_free(s2);
	json_decref(m);
}

static void
test_live_store_finishes_dead_writer(void **state)
{
	char dir[T_PATH];
	gcs_store *a, *b, *c;
	gcs_object o;
	gcs_err err;
	json_t *m = meta1("v", "from-a");

	(void)state;
	fresh_dir(dir);
	a = open_ok(dir);
	b = open_ok(dir);
	/* A commits then "dies" before renaming: B's next write applies
	 * A's record before its own. */
	gcs_file_set_crash_point(a, GCS_FILE_CRASH_AFTER_COMMIT);
	assert_int_equal(gcs_insert(a, "x", m, &o, &err), GCS_UNAVAILABLE);
	assert_int_equal(get_v(b, "x", NULL, NULL, NULL), GCS_UNAVAILABLE);
	insert_ok(b, "other", "b");
	assert_int_equal(get_v(b, "x", NULL, NULL, "from-a"), GCS_OK);
	/* B cannot insert over A's committed object. */
	assert_int_equal(gcs_insert(b, "x", m, &o, &err), GCS_PRECONDITION);
	gcs_store_free(a);

	/* A torn record of a dead writer does not hide B's later writes. */
	a = open_ok(dir);
	gcs_file_set_crash_point(a, GCS_FILE_CRASH_BEFORE_COMMIT);
	assert_int_equal(gcs_insert(a, "torn", m, &o, &err), GCS_UNAVAILABLE);
	insert_ok(b, "later", "b");
	c = open_ok(dir);
	assert_int_equal(get_v(c, "later", NULL, NULL, "b"), GCS_OK);
	assert_int_equal(get_v(c, "torn", NULL, NULL, NULL), GCS_NOT_FOUND);
	assert_int_equal(get_v(c, "x", NULL, NULL, "from-a"), GCS_OK);
	gcs_store_free(c);
	gcs_store_free(b);
	gcs_store_free(a);
	json_decref(m);
}

/* The log is made full of zeros and records overwrite them, so that a
 * commit's sync does not also write the file's size: writes leave its size
 * alone.  A torn record longer than the next one is cut, and an escaped
 * name and metadata (quotes, backslashes, control characters, UTF-8)
 * survive the log and a replay byte for byte. */
static void
test_log_written_in_place(void **state)
{
	static const char odd[] = "q\"b\\s\x01\x1f\n\t\xc3\xa9/\xe2\x82\xac";
	char dir[T_PATH], wal[T_PATH + 8], big[T_BIG_META];
	struct stat st0, st1;
	gcs_store *a, *b, *c;
	gcs_object o;
	gcs_err err;
	json_t *m;
	int64_t g;
	int i;

	(void)state;
	a = open_ok(fresh_dir(dir));
	snprintf(wal, sizeof(wal), "%s/.wal", dir);
	assert_int_equal(stat(wal, &st0), 0);
	assert_true(st0.st_size > 1024 * 1024);
	for (i = 0; i < 200; i++) {
		g = insert_ok(a, "n", "v");
		assert_int_equal(gcs_remove(a, "n", g, 1, &err), GCS_OK);
	}
	assert_int_equal(stat(wal, &st1), 0);
	assert_int_equal(st1.st_size, st0.st_size);

	/* A long torn record, then a short committed one by another store. */
	b = open_ok(dir);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	m = meta1("v", big);
	gcs_file_set_crash_point(a, GCS_FILE_CRASH_BEFORE_COMMIT);
	assert_int_equal(gcs_insert(a, "torn", m, &o, &err), GCS_UNAVAILABLE);
	json_decref(m);
	insert_ok(b, "short", "s");
	m = meta1(odd, odd);
	assert_int_equal(gcs_insert(b, odd, m, &o, &err), GCS_OK);
	gcs_object_clear(&o);
	json_decref(m);
	gcs_store_free(b);
	gcs_store_free(a);

	c = open_ok(dir);
	assert_int_equal(get_v(c, "short", NULL, NULL, "s"), GCS_OK);
	assert_int_equal(get_v(c, "torn", NULL, NULL, NULL), GCS_NOT_FOUND);
	assert_int_equal(gcs_get(c, odd, &o, &err), GCS_OK);
	assert_string_equal(json_string_value(json_object_get(o.metadata, odd)),
	    odd);
	gcs_object_clear(&o);
	gcs_store_free(c);
}

/* --file-no-prealloc: the log is its header alone and grows by records; no
 * spare file is made, a new name's file is created; the state survives
 * reopening, with prealloc off and on, in either order. */
static void
test_no_prealloc(void **state)
{
	gcs_settings off = { .file_no_prealloc = true }, on = { 0 };
	char dir[T_PATH], wal[T_PATH + 8];
	gcs_file_stats fst;
	struct stat st0, st1;
	gcs_store *s;
	int64_t g, mg;
	int i;

	(void)state;
	gcs_configure(&off);
	s = open_ok(fresh_dir(dir));
	snprintf(wal, sizeof(wal), "%s/.wal", dir);
	assert_int_equal(stat(wal, &st0), 0);
	assert_int_equal(st0.st_size, 16); /* the header: magic, counter */
	for (i = 0; i < 3; i++)
		insert_ok(s, i == 0 ? "a" : i == 1 ? "b/c" : "d", "1");
	assert_int_equal(stat(wal, &st1), 0);
	assert_true(st1.st_size > st0.st_size);
	gcs_file_stats_get(s, &fst);
	assert_int_equal(fst.spares_used, 0);
	assert_int_equal(fst.files_created, 3);
	assert_int_equal(count_entries(dir, ".spare."), 0);
	gcs_store_free(s);

	s = open_ok(dir); /* still off: replayed, then a header-only log */
	assert_int_equal(get_v(s, "b/c", &g, &mg, "1"), GCS_OK);
	assert_int_equal(stat(wal, &st1), 0);
	assert_int_equal(st1.st_size, 16);
	gcs_store_free(s);

	gcs_configure(&on); /* the default again: a log of zeros ahead */
	s = open_ok(dir);
	assert_int_equal(get_v(s, "b/c", NULL, NULL, "1"), GCS_OK);
	assert_true(insert_ok(s, "e", "2") > g);
	assert_int_equal(stat(wal, &st1), 0);
	assert_true(st1.st_size > 1024 * 1024);
	gcs_store_free(s);
}

static int64_t
clock_var(void *ctx)
{
	return *(const int64_t *)ctx;
}

static void
test_tombstones_recycled_when_old(void **state)
{
	char dir[T_PATH], p[T_PATH * 2];
	int64_t now = gcs_clock_real(NULL), g;
	gcs_file_stats fst, fst2;
	gcs_store *s;
	gcs_page pg;
	gcs_err err;
	struct stat st;

	(void)state;
	s = gcs_file_new_clock(fresh_dir(dir), clock_var, &now, &err);
	assert_non_null(s);
	g = insert_ok(s, "t", "1");
	assert_int_equal(gcs_remove(s, "t", g, 1, &err), GCS_OK);
	gcs_store_free(s);
	snprintf(p, sizeof(p), "%s/t", dir);
	/* Released: a tombstone file, invisible to get and list. */
	assert_int_equal(stat(p, &st), 0);
	now += GCS_FILE_TOMB_KEEP_MS / 2;
	s = gcs_file_new_clock(dir, clock_var, &now, &err);
	assert_non_null(s);
	assert_int_equal(get_v(s, "t", NULL, NULL, NULL), GCS_NOT_FOUND);
	assert_int_equal(gcs_list(s, "", 10, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, 0);
	gcs_page_clear(&pg);
	gcs_store_free(s);
	assert_int_equal(stat(p, &st), 0); /* young: kept for reuse */
	now += GCS_FILE_TOMB_KEEP_MS;
	s = gcs_file_new_clock(dir, clock_var, &now, &err);
	assert_non_null(s);
	assert_int_equal(stat(p, &st), -1); /* old: recycled at open */
	gcs_file_stats_get(s, &fst);
	assert_true(fst.recycled >= 1);
	/* A new file takes a ready spare (at least the recycled one)
	 * instead of creating one. */
	assert_true(insert_ok(s, "t", "2") > g);
	gcs_file_stats_get(s, &fst2);
	assert_int_equal(fst2.spares_used - fst.spares_used, 1);
	assert_int_equal(fst2.files_created, fst.files_created);
	assert_int_equal(get_v(s, "t", NULL, NULL, "2"), GCS_OK);
	gcs_store_free(s);
}

/* ---- two stores, two processes ---- */

typedef struct racer {
	gcs_store *s;
	const char *name;
	pthread_barrier_t *go;
	int rc;
	int64_t gen;
} racer;

static void *
race_insert(void *arg)
{
	racer *r = arg;
	json_t *m = json_object();
	gcs_object o;
	gcs_err err;

	pthread_barrier_wait(r->go);
	r->rc = gcs_insert(r->s, r->name, m, &o, &err);
	r->gen = o.generation;
	gcs_object_clear(&o);
	json_decref(m);
	return NULL;
}

/* The committer keeps object files open; a tombstone recycled while the
 * store runs becomes the next new name's file, and the released name must
 * then get a file of its own, not write through its old handle. */
static void
test_recycled_file_not_written_through_old_handle(void **state)
{
	char dir[T_PATH];
	int64_t now = gcs_clock_real(NULL), g;
	gcs_file_stats fst;
	gcs_store *s, *a, *b;
	gcs_err err;

	(void)state;
	s = gcs_file_new_clock(fresh_dir(dir), clock_var, &now, &err);
	assert_non_null(s);
	g = insert_ok(s, "t", "1");
	assert_int_equal(gcs_remove(s, "t", g, 1, &err), GCS_OK);
	now += 10 * GCS_FILE_TOMB_KEEP_MS;
	insert_ok(s, "x", "x"); /* commits, then recycles t's file */
	gcs_file_stats_get(s, &fst);
	assert_true(fst.recycled >= 1);
	insert_ok(s, "u", "u"); /* the newest spare: t's old file */
	insert_ok(s, "t", "3");
	assert_int_equal(get_v(s, "u", NULL, NULL, "u"), GCS_OK);
	assert_int_equal(get_v(s, "t", NULL, NULL, "3"), GCS_OK);
	gcs_store_free(s);
	s = open_ok(dir);
	assert_int_equal(get_v(s, "u", NULL, NULL, "u"), GCS_OK);
	assert_int_equal(get_v(s, "t", NULL, NULL, "3"), GCS_OK);
	assert_int_equal(get_v(s, "x", NULL, NULL, "x"), GCS_OK);
	gcs_store_free(s);

	/* The same across two stores: B releases and recycles the file A
	 * has open; A must notice B's writes and let go of it. */
	a = gcs_file_new_clock(fresh_dir(dir), clock_var, &now, &err);
	b = gcs_file_new_clock(dir, clock_var, &now, &err);
	assert_non_null(a);
	assert_non_null(b);
	g = insert_ok(a, "t", "1");
	assert_int_equal(gcs_remove(b, "t", g, 1, &err), GCS_OK);
	now += 10 * GCS_FILE_TOMB_KEEP_MS;
	insert_ok(b, "x", "x");
	insert_ok(b, "u", "u");
	insert_ok(a, "t", "3");
	assert_int_equal(get_v(a, "u", NULL, NULL, "u"), GCS_OK);
	assert_int_equal(get_v(b, "t", NULL, NULL, "3"), GCS_OK);
	gcs_store_free(b);
	gcs_store_free(a);
}

static void
test_two_stores_one_winner(void **state)
{
	char dir[T_PATH];
	gcs_store *st[2];
	racer r[2 * T_RACE_THREADS];
	pthread_t th[2 * T_RACE_THREADS];
	pthread_barrier_t go;
	gcs_err err;
	int64_t prev = 0, winner_gen;
	int round, i, wins;

	(void)state;
	fresh_dir(dir);
	st[0] = open_ok(dir);
	st[1] = open_ok(dir);
	for (round = 0; round < 5; round++) {
		assert_int_equal(pthread_barrier_init(&go, NULL,
		                     2 * T_RACE_THREADS),
		    0);
		for (i = 0; i < 2 * T_RACE_THREADS; i++) {
			r[i] = (racer){ .s = st[i % 2],
				.name = "contended",
				.go = &go };
			assert_int_equal(pthread_create(&th[i], NULL,
			                     race_insert, &r[i]),
			    0);
		}
		wins = 0;
		winner_gen = 0;
		for (i = 0; i < 2 * T_RACE_THREADS; i++) {
			pthread_join(th[i], NULL);
			if (r[i].rc == GCS_OK) {
				wins++;
				winner_gen = r[i].gen;
			} else {
				assert_int_equal(r[i].rc, GCS_PRECONDITION);
			}
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(wins, 1);
		assert_true(winner_gen > prev);
		prev = winner_gen;
		/* Release through the other store. */
		assert_int_equal(gcs_remove(st[round % 2], "contended",
		                     winner_gen, 1, &err),
		    GCS_OK);
	}
	gcs_store_free(st[0]);
	gcs_store_free(st[1]);
}

/* In a child: insert r<i> for every round, write one byte per round
 * (1 = won) to FD, then insert+remove "shared" and write the generations. */
static void
fork_child(const char *dir, int fd)
{
	char name[32];
	gcs_store *s = gcs_file_new(dir, NULL);
	json_t *m = json_object();
	gcs_object o;
	gcs_err err;
	unsigned char won;
	int i;

	if (s == NULL)
		_exit(2);
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		won = gcs_insert(s, name, m, &o, &err) == GCS_OK;
		gcs_object_clear(&o);
		if (write(fd, &won, 1) != 1)
			_exit(3);
	}
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		int64_t g = 0;
		int tries = 0;

		while (gcs_insert(s, "shared", m, &o, &err) != GCS_OK)
			if (++tries > T_FORK_TRIES)
				_exit(9);
		g = o.generation;
		gcs_object_clear(&o);
		if (gcs_remove(s, "shared", g, 1, &err) != GCS_OK ||
		    write(fd, &g, sizeof(g)) != sizeof(g))
			_exit(4);
	}
	gcs_store_free(s);
	json_decref(m);
	_exit(0);
}

/* read() of exactly N bytes from a child's pipe, waiting at most
 * T_PIPE_WAIT_MS: N, 0 at end of file, -1 on timeout or error. */
static ssize_t
read_child(int fd, void *buf, size_t n)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		if (poll(&p, 1, T_PIPE_WAIT_MS) != 1)
			return -1;
		r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void
test_two_processes(void **state)
{
	char dir[T_PATH], name[32];
	int64_t gens[2 * T_FORK_ROUNDS], g;
	unsigned char won;
	gcs_store *s;
	json_t *m = json_object();
	gcs_object o;
	gcs_err err;
	int fds[2], status, i, child_wins = 0, mine = 0, wins;
	pid_t pid;

	(void)state;
	fresh_dir(dir);
	assert_int_equal(pipe(fds), 0);
	/* Fork before this process has a store (and its thread). */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		fork_child(dir, fds[1]);
	}
	child_pid = pid;
	close(fds[1]);
	s = open_ok(dir);
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		wins = gcs_insert(s, name, m, &o, &err) == GCS_OK;
		gcs_object_clear(&o);
		mine += wins;
	}
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		int tries = 0;

		while (gcs_insert(s, "shared", m, &o, &err) != GCS_OK) {
			assert_int_equal(err.status, GCS_PRECONDITION);
			assert_true(++tries <= T_FORK_TRIES);
		}
		gens[i] = o.generation;
		gcs_object_clear(&o);
		assert_int_equal(gcs_remove(s, "shared", gens[i], 1, &err),
		    GCS_OK);
		/* Our own generations increase. */
		if (i > 0)
			assert_true(gens[i] > gens[i - 1]);
	}
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		assert_int_equal(read_child(fds[0], &won, 1), 1);
		child_wins += won;
	}
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		assert_int_equal(read_child(fds[0], &g, sizeof(g)), sizeof(g));
		gens[T_FORK_ROUNDS + i] = g;
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	child_pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* Every r<i> was won by exactly one of the two processes. */
	assert_int_equal(mine + child_wins, T_FORK_ROUNDS);
	for (i = 0; i < T_FORK_ROUNDS; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		assert_int_equal(get_v(s, name, NULL, NULL, NULL), GCS_OK);
	}
	/* No generation of "shared" was issued twice across processes. */
	qsort(gens, 2 * T_FORK_ROUNDS, sizeof(gens[0]), cmp_i64);
	for (i = 1; i < 2 * T_FORK_ROUNDS; i++)
		assert_true(gens[i] > gens[i - 1]);
	gcs_store_free(s);
	json_decref(m);
}

/* ---- kill -9 ---- */

#define T_KILL_THREADS 8
#define T_KILL_NAMES   4096 /* per thread, more than a round can reach */

/* What a child reports after each acknowledged write. */
typedef struct kill_report {
	int32_t thread, index;
	int32_t op; /* 1 insert acknowledged, 2 remove acknowledged */
	int32_t pad;
	int64_t gen;
} kill_report;

typedef struct kill_worker {
	gcs_store *s;
	int fd, thread;
} kill_worker;

static void *
kill_worker_main(void *arg)
{
	kill_worker *w = arg;
	char name[32];
	json_t *m = meta1("v", "k");
	int64_t prev = 0;
	gcs_object o;
	gcs_err err;
	kill_report r;
	int i;

	for (i = 0; i < T_KILL_NAMES; i++) {
		int64_t g;

		snprintf(name, sizeof(name), "t%d/%d", w->thread, i);
		if (gcs_insert(w->s, name, m, &o, &err) != GCS_OK)
			_exit(5);
		g = o.generation;
		gcs_object_clear(&o);
		r = (kill_report){ w->thread, i, 1, 0, g };
		if (write(w->fd, &r, sizeof(r)) != sizeof(r))
			_exit(6);
		if (i > 0) {
			snprintf(name, sizeof(name), "t%d/%d", w->thread,
			    i - 1);
			if (gcs_remove(w->s, name, prev, 1, &err) != GCS_OK)
				_exit(7);
			r = (kill_report){ w->thread, i - 1, 2, 0, prev };
			if (write(w->fd, &r, sizeof(r)) != sizeof(r))
				_exit(6);
		}
		prev = g;
	}
	json_decref(m);
	return NULL;
}

static void
kill_child(const char *dir, int fd)
{
	pthread_t th[T_KILL_THREADS];
	kill_worker w[T_KILL_THREADS];
	gcs_store *s = gcs_file_new(dir, NULL);
	int i;

	if (s == NULL)
		_exit(2);
	for (i = 0; i < T_KILL_THREADS; i++) {
		w[i] = (kill_worker){ s, fd, i };
		if (pthread_create(&th[i], NULL, kill_worker_main, &w[i]) != 0)
			_exit(3);
	}
	for (i = 0; i < T_KILL_THREADS; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

/* Per thread of the child: what the store acknowledged. */
typedef struct kill_seen {
	int last_ins, last_del; /* highest acknowledged index, -1 none */
	int64_t gen[T_KILL_NAMES];
} kill_seen;

static void
kill_note(kill_seen *seen, const kill_report *r, int64_t *max_gen)
{
	kill_seen *k;

	assert_true(r->thread >= 0 && r->thread < T_KILL_THREADS);
	assert_true(r->index >= 0 && r->index < T_KILL_NAMES);
	k = &seen[r->thread];
	if (r->op == 1) {
		assert_int_equal(r->index, k->last_ins + 1);
		k->last_ins = r->index;
		k->gen[r->index] = r->gen;
		if (r->gen > *max_gen)
			*max_gen = r->gen;
	} else {
		assert_int_equal(r->op, 2);
		assert_int_equal(r->index, k->last_del + 1);
		k->last_del = r->index;
	}
}

/* Kill -9 a child that writes from 8 threads, at three different points;
 * reopen; every acknowledged write must be there, and only the one write
 * per thread that was in flight may have gone either way. */
static void
test_kill9_loses_nothing(void **state)
{
	static kill_seen seen[T_KILL_THREADS];
	static const int kill_after[] = { 40, 400, 1500 };
	char dir[T_PATH], sub[T_PATH + 16], name[32];
	int64_t max_gen, gen;
	kill_report r;
	gcs_store *s;
	int round, fds[2], status, t, i, rc, got;
	pid_t pid;

	(void)state;
	fresh_dir(dir);
	for (round = 0; round < 3; round++) {
		snprintf(sub, sizeof(sub), "%s/r%d", dir, round);
		memset(seen, 0, sizeof(seen));
		for (t = 0; t < T_KILL_THREADS; t++)
			seen[t].last_ins = seen[t].last_del = -1;
		max_gen = 0;
		assert_int_equal(pipe(fds), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			kill_child(sub, fds[1]);
		}
		child_pid = pid;
		close(fds[1]);
		for (got = 0; got < kill_after[round]; got++) {
			assert_int_equal(read_child(fds[0], &r, sizeof(r)),
			    sizeof(r));
			kill_note(seen, &r, &max_gen);
		}
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		child_pid = 0;
		assert_true(WIFSIGNALED(status));
		/* Reports written before the kill are still in the pipe. */
		while (read_child(fds[0], &r, sizeof(r)) == sizeof(r))
			kill_note(seen, &r, &max_gen);
		close(fds[0]);

		s = open_ok(sub);
		for (t = 0; t < T_KILL_THREADS; t++) {
			kill_seen *k = &seen[t];

			for (i = 0; i <= k->last_ins + 2 && i < T_KILL_NAMES;
			     i++) {
				snprintf(name, sizeof(name), "t%d/%d", t, i);
				rc = get_v(s, name, &gen, NULL, NULL);
				if (i <= k->last_del) {
					assert_int_equal(rc, GCS_NOT_FOUND);
				} else if (i == k->last_ins + 1) {
					/* The insert in flight: either way. */
					assert_true(rc == GCS_OK ||
					    rc == GCS_NOT_FOUND);
				} else if (i > k->last_ins) {
					assert_int_equal(rc, GCS_NOT_FOUND);
				} else if (i == k->last_del + 1 &&
				    i < k->last_ins) {
					/* The remove in flight: either way. */
					assert_true(rc == GCS_NOT_FOUND ||
					    (rc == GCS_OK && gen == k->gen[i]));
				} else {
					assert_int_equal(rc, GCS_OK);
					assert_int_equal(gen, k->gen[i]);
				}
			}
		}
		/* Tokens keep growing after the crash. */
		assert_true(insert_ok(s, "after", "x") > max_gen);
		gcs_store_free(s);
	}
}

/* ---- group commit, checkpoints, big directories ---- */

typedef struct cycler {
	gcs_store *s;
	int id, cycles, failures;
	size_t meta_bytes;
} cycler;

static void *
cycle_main(void *arg)
{
	cycler *c = arg;
	char name[32], *pad;
	json_t *m;
	gcs_object o;
	gcs_err err;
	int i;

	pad = calloc(1, c->meta_bytes + 1);
	memset(pad, 'p', c->meta_bytes);
	m = meta1("pad", pad);
	for (i = 0; i < c->cycles; i++) {
		snprintf(name, sizeof(name), "c/%d/%d", c->id, i);
		if (gcs_insert(c->s, name, m, &o, &err) != GCS_OK) {
			c->failures++;
			continue;
		}
		if (c->meta_bytes == 0 &&
		    gcs_remove(c->s, name, o.generation, 1, &err) != GCS_OK)
			c->failures++;
		gcs_object_clear(&o);
	}
	json_decref(m);
	free(pad);
	return NULL;
}

static void
run_cyclers(gcs_store *s, int threads, int cycles, size_t meta_bytes)
{
	pthread_t th[T_GROUP_THREADS];
	cycler c[T_GROUP_THREADS];
	int i;

	assert_true(threads <= T_GROUP_THREADS);
	for (i = 0; i < threads; i++) {
		c[i] = (cycler){ .s = s,
			.id = i,
			.cycles = cycles,
			.meta_bytes = meta_bytes };
		assert_int_equal(pthread_create(&th[i], NULL, cycle_main,
		                     &c[i]),
		    0);
	}
	for (i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].failures, 0);
	}
}

static void
test_group_commit_batches(void **state)
{
	char dir[T_PATH];
	gcs_store *s;
	gcs_file_stats a, b;

	(void)state;
	s = open_ok(fresh_dir(dir));
	gcs_file_stats_get(s, &a);
	run_cyclers(s, T_GROUP_THREADS, T_GROUP_OPS, 0);
	gcs_file_stats_get(s, &b);
	assert_int_equal(b.ops - a.ops, 2 * T_GROUP_THREADS * T_GROUP_OPS);
	/* 64 callers at once: far fewer syncs than durable writes, but at
	 * least one per batch. */
	assert_true(b.syncs - a.syncs >= b.batches - a.batches);
	assert_true((b.syncs - a.syncs) * 4 < b.ops - a.ops);
	assert_true(b.batches - a.batches < b.ops - a.ops);
	print_message("group commit: %llu ops, %llu batches, %llu syncs\n",
	    (unsigned long long)(b.ops - a.ops),
	    (unsigned long long)(b.batches - a.batches),
	    (unsigned long long)(b.syncs - a.syncs));
	gcs_store_free(s);
}

static void
test_checkpoint_and_big_list(void **state)
{
	char dir[T_PATH], prev[T_NAME] = "";
	gcs_store *s;
	gcs_file_stats st;
	gcs_page pg;
	gcs_err err;
	char *token = NULL;
	size_t total = 0, i;
	int pages = 0;

	(void)state;
	s = open_ok(fresh_dir(dir));
	/* 1024 objects of ~8 KB metadata from 64 threads: batches of up to
	 * 64 near-maximal objects, ~8 MB of log, over the 4 MiB checkpoint
	 * threshold. */
	run_cyclers(s, T_GROUP_THREADS, T_BIG_OBJECTS / T_GROUP_THREADS,
	    T_BIG_META);
	gcs_file_stats_get(s, &st);
	assert_true(st.checkpoints >= 2); /* one at open, one or more after */
	gcs_store_free(s);

	s = open_ok(dir);
	do {
		assert_int_equal(gcs_list(s, "c/", 300, token, &pg, &err),
		    GCS_OK);
		assert_true(++pages <= T_BIG_OBJECTS / 300 + 2);
		for (i = 0; i < pg.n; i++) {
			assert_true(strcmp(prev, pg.items[i].name) < 0);
			snprintf(prev, sizeof(prev), "%s", pg.items[i].name);
			assert_int_equal(strlen(json_string_value(
			                     json_object_get(pg.items[i]
			                                         .obj.metadata,
			                         "pad"))),
			    T_BIG_META);
		}
		total += pg.n;
		free(token);
		token = pg.next_token ? strdup(pg.next_token) : NULL;
		gcs_page_clear(&pg);
	} while (token != NULL);
	assert_int_equal(total, T_BIG_OBJECTS);
	gcs_store_free(s);
}

static void
test_metadata_limit(void **state)
{
	char dir[T_PATH], *pad;
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *m;
	int64_t g, mg;

	(void)state;
	s = open_ok(fresh_dir(dir));
	pad = calloc(1, GCS_META_BYTES_MAX + 1);
	memset(pad, 'x', GCS_META_BYTES_MAX);
	m = meta1("pad", pad);
	assert_int_equal(gcs_insert(s, "big", m, &o, &err), GCS_INVALID);
	assert_int_equal(get_v(s, "big", NULL, NULL, NULL), GCS_NOT_FOUND);
	json_decref(m);
	/* A patch that would grow it past the limit changes nothing. */
	pad[GCS_META_BYTES_MAX / 2] = '\0';
	g = insert_ok(s, "grow", pad);
	m = meta1("b", pad);
	assert_int_equal(gcs_patch(s, "grow", g, 1, m, &o, &err), GCS_INVALID);
	assert_int_equal(get_v(s, "grow", NULL, &mg, pad), GCS_OK);
	assert_int_equal(mg, 1);
	json_decref(m);
	free(pad);
	gcs_store_free(s);
}

/* A log whose counter floor no store could have written (INT64_MAX, the
 * fuzzer's find): refused as corrupt, never a wrapped, out-of-order
 * token.  One at the limit opens and refuses new objects instead. */
static void
test_generation_counter_limit(void **state)
{
	static const char magic[8] = { 'L', 'G', 'W', 'A', 'L', '0', '0', '1' };
	char dir[T_PATH], path[T_PATH + 16];
	unsigned char hdr[16];
	int64_t floors[2] = { INT64_MAX, GCS_GEN_MAX };
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	json_t *m;
	FILE *f;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		fresh_dir(dir);
		snprintf(path, sizeof(path), "%s/.wal", dir);
		memcpy(hdr, magic, 8);
		memcpy(hdr + 8, &floors[i], 8);
		f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(hdr, 1, sizeof(hdr), f), sizeof(hdr));
		fclose(f);
		s = gcs_file_new(dir, &err);
		if (i == 0) {
			/* Start-up: the operator reads the detail. */
			assert_null(s);
			assert_msg_hides(&err, dir,
			    "the local store could not open its log",
			    "corrupt");
			continue;
		}
		assert_non_null(s);
		m = meta1("k", "v");
		assert_int_equal(gcs_insert(s, "n", m, &o, &err),
		    GCS_UNAVAILABLE);
		assert_msg_hides(&err, dir, "could not create an object",
		    "generation counter is exhausted");
		json_decref(m);
		gcs_store_free(s);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_stay_inside),
		cmocka_unit_test(test_foreign_files_ignored),
		cmocka_unit_test(test_messages_hide_lease_and_dir),
		cmocka_unit_test(test_log_failure_hides_dir),
		cmocka_unit_test(test_open_errors_and_relative),
		cmocka_unit_test(test_reopen_keeps_state),
		cmocka_unit_test(test_generation_survives_clock_going_back),
		cmocka_unit_test(test_crash_before_commit_keeps_old_state),
		cmocka_unit_test(test_crash_after_commit_is_recovered),
		cmocka_unit_test(test_live_store_finishes_dead_writer),
		cmocka_unit_test(test_log_written_in_place),
		cmocka_unit_test(test_tombstones_recycled_when_old),
		cmocka_unit_test(test_no_prealloc),
		cmocka_unit_test(
		    test_recycled_file_not_written_through_old_handle),
		cmocka_unit_test(test_two_stores_one_winner),
		cmocka_unit_test_teardown(test_two_processes, reap_child),
		cmocka_unit_test_teardown(test_kill9_loses_nothing, reap_child),
		cmocka_unit_test(test_group_commit_batches),
		cmocka_unit_test(test_checkpoint_and_big_list),
		cmocka_unit_test(test_metadata_limit),
		cmocka_unit_test(test_generation_counter_limit),
	};
	int failed;

	snprintf(base, sizeof(base), "%s/lockgate-fstest-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(base) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	failed = store_contract_run("store_file_contract", contract_open,
	    contract_close, NULL);
	failed += cmocka_run_group_tests_name("store_file", tests, NULL, NULL);
	rm_rf(base);
	return failed;
}
