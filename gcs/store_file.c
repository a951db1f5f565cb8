/*
 * store_file.c: file://DIR, the durable local store.
 *
 * Layout of DIR:
 *   NAME-ENCODED   one file per name: "CRC LEN " + the object as JSON, or
 *                  a tombstone {"name", "deleted", "deleted_ms"}
 *   .lock          flock(2)ed while writing (the cross-process referee)
 *   .wal           the commit log: header, then one record per batch
 *   .spare.*       spare files (empty tombstones) for new names
 *   .spares/       where the spare maker creates them
 *   .tmp.wal       a new log being written by a checkpoint
 * Object files never start with '.', so nothing else can be mistaken for
 * an object.  A name is encoded byte by byte: [A-Za-z0-9._-] stay, every
 * other byte (and a leading '.') becomes %XX, so '/' never makes a
 * subdirectory and no name can be "." or "..".  An encoding longer than
 * FILE_FNAME_MAX becomes "~" + SHA-256 hex of the name; the file holds the
 * real name in every case.
 *
 * Writes (insert, patch, remove) are group-committed.  Callers queue their
 * op and block; one committer thread takes the whole queue as a batch and,
 * holding an exclusive flock on .lock:
 *   1. catches up with the log (another process may have written since;
 *      see wal_catch_up),
 *   2. checks each op's preconditions against the object's state (from
 *      its file, or remembered while no other writer wrote; ops on one
 *      name within the batch see each other's results, in queue order),
 *   3. appends ONE record (the final state of every name the batch
 *      changed, plus the generation counter) to .wal and fdatasyncs it:
 *      this is the commit point, one sync for the whole batch,
 *   4. rewrites each changed object file in place (a release writes a
 *      tombstone),
 *   5. releases the flock and wakes the callers.
 * Nothing is visible to readers before its record is durable (step 4
 * follows step 3).  Object files are not synced one by one: after a crash
 * the log is replayed (final state per name) before any store serves from
 * DIR, which repairs any file whose rewrite was lost or torn.  A record is
 * dropped only by a checkpoint, which first makes every file durable
 * (syncfs + directory fsync) and then replaces .wal by a fresh one that
 * carries the counter.  A torn record (killed mid-append) fails its CRC and
 * is cut off (overwritten with zeros); its batch was never acknowledged.
 *
 * The log is written full of zeros when it is made (FILE_WAL_PREZERO
 * bytes), and records overwrite the zeros: an fdatasync after an append
 * that does not change the file's size flushes the record alone, not the
 * inode as well, which halves the commit's latency on ext4 (measured: 230
 * -> 100 us per sync).  A record header of zeros, or the end of the file,
 * ends the log; a writer learns that another wrote after it by finding a
 * non-zero header where its own log ended.
 *
 * gcs_settings.file_no_prealloc (--file-no-prealloc) turns both off: a new
 * log is its header alone (records extend the file) and no spare maker
 * runs (a new name's file is created on the write path; tombstones are
 * still recycled).  On a tmpfs neither saves anything.
 *
 * Why in place and not temp file + rename: on ext4 every rename and unlink
 * frees an inode and every temp file allocates one, and allocating right
 * after many frees scans the recently deleted inodes (perf showed it at
 * 60% of the time, ~400 us per new file).  A name's file is kept across
 * release and re-acquire; a new name gets a spare file made in advance by
 * the spare maker thread (renamed into place under the flock); tombstones
 * older than FILE_TOMB_KEEP_MS become spares.
 *
 * Cross-process: every write happens under the flock, and a writer that
 * finds records it did not write re-applies the newest one (its writer may
 * have died between steps 3 and 4); all older records were applied by a
 * writer that held the flock after them.  Reads (get, list) take no lock:
 * a read that overlaps a rewrite fails the CRC and is retried.
 *
 * Generations: max(counter + 1, store clock in ms * 1000), where counter is
 * the largest generation ever issued in DIR (kept in the log and its
 * header), so they look like GCS's microsecond generations and strictly
 * increase per DIR across delete, re-create, restart, two processes and a
 * clock that goes backwards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gcs_client.h"
#include "store_file_int.h"

/* The reason is before the place, so that a long DIR, if anything, is
 * what a full detail loses. */
int
file_fail(const file_store *fs, gcs_err *err, const char *file, const char *why,
    const char *fmt, ...)
{
	char what[GCS_ERRMSG_MAX];
	va_list ap;

	if (err == NULL)
		return GCS_UNAVAILABLE;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	gcs_fail(err, GCS_UNAVAILABLE, "the local store could not %s", what);
	snprintf(err->detail, sizeof(err->detail),
	    "the local store could not %s: %s (%s%s%s)", what, why, fs->dir,
	    file != NULL ? "/" : "", file != NULL ? file : "");
	return GCS_UNAVAILABLE;
}

/* ---- the contract ---- */

static int
file_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	file_op op = { .kind = OP_INSERT, .name = name, .meta = metadata };

	return file_submit((file_store *)s, &op, out, err);
}

static int
file_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err)
{
	file_op op = { .kind = OP_PATCH,
		.name = name,
		.meta = metadata,
		.gen = gen,
		.metagen = metagen };

	return file_submit((file_store *)s, &op, out, err);
}

static int
file_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	file_op op = { .kind = OP_REMOVE,
		.name = name,
		.gen = gen,
		.metagen = metagen };

	return file_submit((file_store *)s, &op, NULL, err);
}

static int
file_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	file_store *fs = (file_store *)s;
	char fname[FILE_FNAME_BUF];
	json_t *e;
	int rc;

	if (file_name_encode(name, fname) != 0)
		return gcs_fail(err, GCS_INVALID, "bad name");
	rc = file_obj_read(fs, name, fname, &e, err);
	if (rc != GCS_OK)
		return rc;
	if (strcmp(json_string_value(json_object_get(e, "name")), name) != 0) {
		/* Read through a file that was a tombstone when opened and
		 * was recycled since: the object was absent then. */
		json_decref(e);
		return gcs_fail(err, GCS_NOT_FOUND, "no such object");
	}
	file_entry_to_object(e, fs->clock(fs->clock_ctx), out);
	json_decref(e);
	return GCS_OK;
}

typedef struct file_cand {
	char *name;
	char fname[FILE_FNAME_BUF];
} file_cand;

static int
cand_cmp(const void *a, const void *b)
{
	return strcmp(((const file_cand *)a)->name,
	    ((const file_cand *)b)->name);
}

/* The lock name of directory entry DNAME into NAME (GCS_NAME_MAX + 1
 * bytes): 0, or -1 when DNAME is no object file that get() would find. */
static int
cand_name(file_store *fs, const char *dname, char *name)
{
	char fname[FILE_FNAME_BUF];
	json_t *e;
	int kind = file_name_decode(dname, name);

	if (kind < 0)
		return -1;
	/* Only canonical encodings: get() of the name finds this file. */
	if (kind == 0 &&
	    (file_name_encode(name, fname) != 0 || strcmp(fname, dname) != 0))
		return -1;
	if (kind == 1) {
		/* Hashed long name: the file knows its name. */
		if (file_obj_read(fs, NULL, dname, &e, NULL) != GCS_OK)
			return -1;
		snprintf(name, GCS_NAME_MAX + 1, "%s",
		    json_string_value(json_object_get(e, "name")));
		json_decref(e);
	}
	return 0;
}

/* The candidates of a listing: the objects of D under PREFIX, after
 * PAGE_TOKEN when there is one, appended to *C (*N of *CAP), unsorted.
 * 0, or -1 when out of memory (*C then holds what was collected). */
static int
cands_collect(file_store *fs, DIR *d, const char *prefix,
    const char *page_token, file_cand **c, size_t *n, size_t *cap)
{
	char name[GCS_NAME_MAX + 1];
	size_t plen = strlen(prefix);
	struct dirent *de;
	file_cand *nc;

	while ((de = readdir(d)) != NULL) {
		if (cand_name(fs, de->d_name, name) != 0)
			continue;
		if (strncmp(name, prefix, plen) != 0 ||
		    (page_token != NULL && strcmp(name, page_token) <= 0))
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 256;
			nc = realloc(*c, *cap * sizeof(**c));
			if (nc == NULL)
				return -1;
			*c = nc;
		}
		(*c)[*n].name = strdup(name);
		if ((*c)[*n].name == NULL)
			return -1;
		snprintf((*c)[*n].fname, sizeof((*c)[*n].fname), "%s",
		    de->d_name);
		(*n)++;
	}
	return 0;
}

/* Up to MAX of the N sorted candidates C into OUT (the names it takes
 * are NULL in C then), and the next page's token when more remain.  0, or
 * -1 when out of memory. */
static int
page_fill(file_store *fs, file_cand *c, size_t n, int max, gcs_page *out)
{
	gcs_entry *it;
	json_t *e;
	size_t i;

	out->items = calloc((size_t)max, sizeof(*out->items));
	if (out->items == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		if (out->n == (size_t)max) {
			out->next_token = strdup(out->items[out->n - 1].name);
			return out->next_token == NULL ? -1 : 0;
		}
		/* Gone since readdir (or recycled): skip it, the page stays
		 * full. */
		if (file_obj_read(fs, c[i].name, c[i].fname, &e, NULL) !=
		    GCS_OK)
			continue;
		if (strcmp(json_string_value(json_object_get(e, "name")),
		        c[i].name) != 0) {
			json_decref(e);
			continue;
		}
		it = &out->items[out->n];
		it->name = c[i].name;
		c[i].name = NULL;
		file_entry_to_object(e, out->now_ms, &it->obj);
		json_decref(e);
		out->n++;
	}
	return 0;
}

static int
file_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	file_store *fs = (file_store *)s;
	file_cand *c = NULL;
	size_t n = 0, cap = 0, i;
	DIR *d;
	int rc = GCS_OK;

	if (page_token == NULL) /* our tokens are names too */
		page_token = after;
	d = file_dir_stream(fs);
	if (d == NULL)
		return file_fail(fs, err, NULL, strerror(errno),
		    "read its directory");
	out->now_ms = fs->clock(fs->clock_ctx);
	if (cands_collect(fs, d, prefix, page_token, &c, &n, &cap) != 0)
		goto nomem;
	if (n > 0)
		qsort(c, n, sizeof(*c), cand_cmp);
	if (page_fill(fs, c, n, max, out) != 0)
		goto nomem;
	goto out;
nomem:
	gcs_page_clear(out);
	rc = gcs_fail(err, GCS_NOMEM, "out of memory");
out:
	for (i = 0; i < n; i++)
		free(c[i].name);
	free(c);
	closedir(d);
	return rc;
}

static int
file_check(gcs_store *s, gcs_err *err)
{
	file_store *fs = (file_store *)s;
	int dead;

	pthread_mutex_lock(&fs->mu);
	dead = fs->dead;
	pthread_mutex_unlock(&fs->mu);
	if (dead)
		return gcs_fail(err, GCS_UNAVAILABLE, "the store has stopped");
	if (faccessat(fs->dirfd, ".", W_OK, 0) != 0)
		return file_fail(fs, err, NULL, strerror(errno),
		    "write to its directory");
	return GCS_OK;
}

static void
file_free(gcs_store *s)
{
	file_store *fs = (file_store *)s;
	size_t i;

	if (fs->started) {
		pthread_mutex_lock(&fs->mu);
		fs->stop = 1;
		pthread_cond_signal(&fs->work);
		pthread_mutex_unlock(&fs->mu);
		pthread_join(fs->committer, NULL);
	}
	if (fs->spare_started) {
		pthread_mutex_lock(&fs->spare_mu);
		fs->spare_stop = 1;
		pthread_cond_signal(&fs->spare_cv);
		pthread_mutex_unlock(&fs->spare_mu);
		pthread_join(fs->spare_maker, NULL);
	}
	for (i = 0; fs->fds != NULL && i < FILE_FD_SLOTS; i++)
		if (fs->fds[i].fd >= 0)
			close(fs->fds[i].fd);
	free(fs->fds);
	/* The spare files stay for the next store to adopt. */
	while (fs->nspares > 0)
		free(fs->spares[--fs->nspares]);
	free(fs->spares);
	if (fs->walfd >= 0)
		close(fs->walfd);
	if (fs->lockfd >= 0)
		close(fs->lockfd);
	if (fs->dirfd >= 0)
		close(fs->dirfd);
	json_decref(fs->tombs);
	json_decref(fs->cache);
	pthread_mutex_destroy(&fs->mu);
	pthread_cond_destroy(&fs->work);
	pthread_mutex_destroy(&fs->spare_mu);
	pthread_cond_destroy(&fs->spare_cv);
	free(fs->dir);
	free(fs);
}

static const gcs_store_ops file_ops = {
	.scheme = "file",
	.insert = file_insert,
	.get = file_get,
	.patch = file_patch,
	.remove = file_remove,
	.list = file_list,
	.check = file_check,
	.free = file_free,
};

/* mkdir -p DIR, the last component with FILE_DIR_MODE. */
static int
mkdirs(const char *dir, gcs_err *err)
{
	char path[FILE_PATH_BUF];
	size_t i, n = strlen(dir);

	if (n == 0 || n >= sizeof(path))
		return gcs_fail(err, GCS_INVALID,
		    "store directory name length %zu", n);
	memcpy(path, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, FILE_DIR_MODE) != 0 && errno != EEXIST)
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "cannot create store directory %s: %s", path,
			    strerror(errno));
		path[i] = i < n ? '/' : '\0';
	}
	return GCS_OK;
}

/* A new store's memory for DIR, its locks and its spare id; NULL when out
 * of memory (ERR filled). */
static file_store *
store_alloc(const char *dir, gcs_clock_fn clock, void *clock_ctx, gcs_err *err)
{
	file_store *fs = calloc(1, sizeof(*fs));
	pthread_condattr_t ca;
	size_t i;

	if (fs == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		return NULL;
	}
	fs->base.ops = &file_ops;
	fs->dirfd = fs->lockfd = fs->walfd = -1;
	fs->clock = clock ? clock : gcs_clock_real;
	fs->clock_ctx = clock_ctx;
	fs->prealloc = !gcs_settings_get()->file_no_prealloc;
	pthread_mutex_init(&fs->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&fs->spare_mu, NULL);
	pthread_cond_init(&fs->spare_cv, NULL);
	if (getrandom(&fs->spare_id, sizeof(fs->spare_id), 0) !=
	    (ssize_t)sizeof(fs->spare_id))
		fs->spare_id = (uint64_t)gcs_clock_real(NULL) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)fs;
	fs->dir = strdup(dir);
	fs->cache = json_object();
	fs->tombs = json_object();
	fs->spares = calloc(FILE_SPARES_MAX, sizeof(*fs->spares));
	fs->fds = malloc(FILE_FD_SLOTS * sizeof(*fs->fds));
	for (i = 0; fs->fds != NULL && i < FILE_FD_SLOTS; i++)
		fs->fds[i].fd = -1;
	if (fs->dir == NULL || fs->cache == NULL || fs->tombs == NULL ||
	    fs->spares == NULL || fs->fds == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		file_free(&fs->base);
		return NULL;
	}
	return fs;
}

/* FS's directory DIR made, opened, and recovered under its flock.
 * GCS_OK, or the failure with ERR filled. */
static int
store_open_dir(file_store *fs, const char *dir, gcs_err *err)
{
	int rc = mkdirs(dir, err);

	if (rc != GCS_OK)
		return rc;
	fs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->dirfd < 0)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    errno == ENOTDIR ? "store path %s is not a directory"
		                     : "cannot open store directory %s: %s",
		    dir, strerror(errno));
	fs->lockfd = openat(fs->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC,
	    FILE_MODE);
	if (fs->lockfd < 0)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "store directory %s is not writable: %s", dir,
		    strerror(errno));
	if (flock(fs->lockfd, LOCK_EX) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "cannot lock %s/" LOCK_NAME ": %s", dir, strerror(errno));
	rc = file_recover(fs, err);
	flock(fs->lockfd, LOCK_UN);
	return rc;
}

/* Open-time set-up in protocol order: memory, the directory with its
 * flock and recovery, then the committer and (with prealloc) spare-maker
 * threads. */
gcs_store *
gcs_file_new_clock(const char *dir, gcs_clock_fn clock, void *clock_ctx,
    gcs_err *err)
{
	file_store *fs;
	gcs_err e = { 0 };

	if (err == NULL)
		err = &e;
	if (dir == NULL || dir[0] == '\0') {
		gcs_fail(err, GCS_INVALID, "no store directory");
		return NULL;
	}
	if ((fs = store_alloc(dir, clock, clock_ctx, err)) == NULL)
		return NULL;
	if (store_open_dir(fs, dir, err) != GCS_OK)
		goto fail;
	if (pthread_create(&fs->committer, NULL, file_committer_main, fs) !=
	    0) {
		gcs_fail(err, GCS_UNAVAILABLE, "cannot start the committer");
		goto fail;
	}
	fs->started = 1;
	if (!fs->prealloc)
		return &fs->base;
	if (pthread_create(&fs->spare_maker, NULL, file_spare_main, fs) != 0) {
		gcs_fail(err, GCS_UNAVAILABLE, "cannot start the spare maker");
		goto fail;
	}
	fs->spare_started = 1;
	return &fs->base;
fail:
	file_free(&fs->base);
	return NULL;
}

gcs_store *
gcs_file_new(const char *dir, gcs_err *err)
{
	return gcs_file_new_clock(dir, NULL, NULL, err);
}

void
gcs_file_set_crash_point(gcs_store *s, gcs_file_crash point)
{
	file_store *fs = (file_store *)s;

	if (s == NULL || s->ops != &file_ops)
		return;
	pthread_mutex_lock(&fs->mu);
	fs->crash = point;
	pthread_mutex_unlock(&fs->mu);
}

void
gcs_file_stats_get(gcs_store *s, gcs_file_stats *out)
{
	file_store *fs = (file_store *)s;

	memset(out, 0, sizeof(*out));
	if (s == NULL || s->ops != &file_ops)
		return;
	out->ops = __atomic_load_n(&fs->n_ops, __ATOMIC_RELAXED);
	out->batches = __atomic_load_n(&fs->n_batches, __ATOMIC_RELAXED);
	out->syncs = __atomic_load_n(&fs->n_syncs, __ATOMIC_RELAXED);
	out->checkpoints =
	    __atomic_load_n(&fs->n_checkpoints, __ATOMIC_RELAXED);
	out->files_created = __atomic_load_n(&fs->n_created, __ATOMIC_RELAXED);
	out->spares_used =
	    __atomic_load_n(&fs->n_spares_used, __ATOMIC_RELAXED);
	out->recycled = __atomic_load_n(&fs->n_recycled, __ATOMIC_RELAXED);
}
