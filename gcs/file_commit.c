/*
 * file_commit.c: the committer thread.  Callers queue their op and block;
 * the committer runs the queue as one batch (steps 1-5 at the top of
 * store_file.c) and wakes them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "rt/rt.h"
#include "store_file_int.h"
#include "util/clock.h"

/* ---- the committer ---- */

static json_t *
entry_new(const char *name, int64_t gen, int64_t metagen, int64_t created,
    int64_t updated, json_t *meta /* steals */)
{
	json_t *e = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "name", name,
	    "generation", (json_int_t)gen, "metageneration",
	    (json_int_t)metagen, "created_ms", (json_int_t)created,
	    "updated_ms", (json_int_t)updated, "metadata", meta);

	return e;
}

/* op_eval for an insert (CUR must be absent): the next generation. */
static void
eval_insert(file_store *fs, file_op *op, const json_t *cur, int64_t now_ms)
{
	json_t *meta;
	int64_t clock_gen;

	if (cur != NULL) {
		op->rc = gcs_fail(&op->err, GCS_PRECONDITION, "object exists");
		return;
	}
	/* The counter never passes GCS_GEN_MAX (file_wal_open and
	 * file_entry_valid refuse more): tokens stay in order or the insert
	 * is refused, never wrapped. */
	if (fs->counter >= GCS_GEN_MAX) {
		op->rc = file_fail(fs, &op->err, WAL_NAME,
		    "its generation counter is exhausted", "create an object");
		return;
	}
	meta = op->clean;
	op->clean = NULL;
	clock_gen = now_ms > GCS_GEN_MAX / 1000 ? GCS_GEN_MAX
	    : now_ms < 0                        ? 0
	                                        : now_ms * 1000;
	fs->counter = fs->counter + 1 > clock_gen ? fs->counter + 1 : clock_gen;
	op->state = entry_new(op->name, fs->counter, 1, now_ms, now_ms, meta);
	if (op->state == NULL) {
		op->rc = gcs_fail(&op->err, GCS_NOMEM, "out of memory");
		return;
	}
	op->ok = 1;
}

/* op_eval for a patch of CUR, whose preconditions held. */
static void
eval_patch(file_op *op, const json_t *cur, int64_t now_ms)
{
	char shown[GCS_NAME_SHOWN_BUF];
	json_t *meta;

	if (op->metagen >= GCS_GEN_MAX) {
		op->rc = gcs_fail(&op->err, GCS_UNAVAILABLE,
		    "the metageneration of %s is exhausted",
		    gcs_name_shown(op->name, shown, sizeof(shown)));
		return;
	}
	meta = gcs_meta_patched(json_object_get(cur, "metadata"), op->meta);
	if (meta == NULL)
		goto nomem;
	if (file_meta_too_big(meta)) {
		json_decref(meta);
		op->rc = gcs_fail(&op->err, GCS_INVALID,
		    "metadata over %d bytes", GCS_META_BYTES_MAX);
		return;
	}
	op->state = entry_new(op->name, op->gen, op->metagen + 1,
	    file_entry_int(cur, "created_ms"), now_ms, meta);
	if (op->state == NULL)
		goto nomem;
	op->ok = 1;
	return;
nomem:
	op->rc = gcs_fail(&op->err, GCS_NOMEM, "out of memory");
}

/* Decide op I of the batch given the state before it, CUR (borrowed,
 * NULL = absent).  Sets op->ok/state or op->rc/err. */
static void
op_eval(file_store *fs, file_op *op, const json_t *cur, int64_t now_ms)
{
	if (op->kind == OP_INSERT) {
		eval_insert(fs, op, cur, now_ms);
		return;
	}
	if (cur == NULL) {
		op->rc = gcs_fail(&op->err, GCS_NOT_FOUND, "no such object");
		return;
	}
	if (file_entry_int(cur, "generation") != op->gen ||
	    file_entry_int(cur, "metageneration") != op->metagen) {
		op->rc =
		    gcs_fail(&op->err, GCS_PRECONDITION, "precondition failed");
		return;
	}
	if (op->kind == OP_REMOVE) {
		op->state = NULL;
		op->ok = 1;
		return;
	}
	eval_patch(op, cur, now_ms);
}

static int
utf8_ok(const char *name)
{
	json_t *j = json_string(name); /* NULL unless valid UTF-8 */

	json_decref(j);
	return j != NULL;
}

/* Every op of the batch fails with ST, MSG and DETAIL (NULL: none). */
static void
batch_fail(file_op **ops, size_t n, gcs_status st, const char *msg,
    const char *detail)
{
	size_t i;

	for (i = 0; i < n; i++) {
		json_decref(ops[i]->state);
		ops[i]->state = NULL;
		ops[i]->ok = 0;
		gcs_object_clear(&ops[i]->out);
		ops[i]->rc = gcs_fail(&ops[i]->err, st, "%s", msg);
		if (detail != NULL)
			snprintf(ops[i]->err.detail, sizeof(ops[i]->err.detail),
			    "%s", detail);
	}
}

/* Append REC to the log and make it durable: the commit point.  With
 * HALF, write only part of it and stop (the crash hook). */
static int
wal_append(file_store *fs, const char *text, size_t tlen, int half,
    gcs_err *err)
{
	unsigned char hdr[FILE_REC_HDR];
	uint32_t len = (uint32_t)tlen, crc;
	int rc = GCS_OK;

	/* Replay would take a longer record for a torn one. */
	if (tlen == 0 || tlen > FILE_REC_BYTES_MAX)
		return gcs_fail(err, GCS_INVALID, "log record of %zu bytes",
		    tlen);
	crc = file_crc32_buf((const unsigned char *)text, len);
	memcpy(hdr, &len, 4);
	memcpy(hdr + 4, &crc, 4);
	if (file_pwrite_all(fs->walfd, hdr, sizeof(hdr), fs->wal_end) != 0 ||
	    file_pwrite_all(fs->walfd, text, half ? len / 2 : len,
	        fs->wal_end + FILE_REC_HDR) != 0) {
		rc = file_fail(fs, err, WAL_NAME, strerror(errno),
		    "append to its log");
		goto out;
	}
	if (half)
		goto out;
	if (fdatasync(fs->walfd) != 0) {
		rc = file_fail(fs, err, WAL_NAME, strerror(errno),
		    "sync its log");
		goto out;
	}
	stat_add(&fs->n_syncs, 1);
	fs->wal_end += FILE_REC_HDR + (off_t)len;
out:
	/* Not committed: zero what was written, so that no reader takes it
	 * for a record (the next append overwrites it anyway). */
	if (rc != GCS_OK && !half &&
	    file_zero_fill(fs->walfd, fs->wal_end,
	        fs->wal_end + FILE_REC_HDR + (off_t)len) == 0 &&
	    fdatasync(fs->walfd) == 0)
		stat_add(&fs->n_syncs, 1);
	return rc;
}

/* Before step 1: take the crash hook's setting, refuse when a crash was
 * simulated, and take the flock.  0 holding the flock; -1 every op failed
 * and the flock is not held. */
static int
batch_begin(file_store *fs, file_op **ops, size_t n, gcs_file_crash *crash)
{
	int dead;

	pthread_mutex_lock(&fs->mu);
	*crash = fs->crash;
	fs->crash = GCS_FILE_CRASH_NONE;
	dead = fs->dead;
	pthread_mutex_unlock(&fs->mu);
	if (dead) {
		batch_fail(ops, n, GCS_UNAVAILABLE, "the store has stopped",
		    NULL);
		return -1;
	}
	if (flock(fs->lockfd, LOCK_EX) != 0) {
		batch_fail(ops, n, GCS_UNAVAILABLE, "cannot lock the store",
		    NULL);
		return -1;
	}
	stat_add(&fs->n_batches, 1);
	stat_add(&fs->n_ops, n);
	return 0;
}

/* What ops[I]'s preconditions are checked against: the newest earlier
 * result on its name in the batch, else what the committer remembers of
 * its file, else the file (then remembered).  *CUR is borrowed, or is
 * *DISK, which the caller drops after the evaluation; NULL is absent.
 * 0, or -1 with the op's rc set when its file cannot be read. */
static int
op_current(file_store *fs, file_op **ops, size_t i, json_t **cur, json_t **disk)
{
	file_op *op = ops[i];
	char shown[GCS_NAME_SHOWN_BUF];
	json_t *c;
	size_t j;
	int rc;

	*disk = NULL;
	for (j = i; j-- > 0;)
		if (ops[j]->ok && strcmp(ops[j]->fname, op->fname) == 0) {
			*cur = ops[j]->state;
			return 0;
		}
	if ((c = json_object_get(fs->cache, op->fname)) != NULL) {
		*cur = json_is_null(c) ? NULL : c;
		return 0;
	}
	rc = file_obj_read(fs, op->name, op->fname, disk, &op->err);
	if (rc == GCS_OK &&
	    strcmp(json_string_value(json_object_get(*disk, "name")),
	        op->name) != 0) {
		json_decref(*disk);
		*disk = NULL;
		rc = gcs_fail(&op->err, GCS_UNAVAILABLE,
		    "the file of object %s holds another name",
		    gcs_name_shown(op->name, shown, sizeof(shown)));
	}
	if (rc != GCS_OK && rc != GCS_NOT_FOUND) {
		op->rc = rc;
		return -1;
	}
	json_object_set(fs->cache, op->fname, *disk ? *disk : json_null());
	*cur = *disk;
	return 0;
}

/* Step 2: check each op's preconditions, in queue order. */
static void
batch_eval(file_store *fs, file_op **ops, size_t n, int64_t now_ms)
{
	json_t *cur, *disk;
	size_t i;

	for (i = 0; i < n; i++) {
		if (op_current(fs, ops, i, &cur, &disk) != 0)
			continue;
		op_eval(fs, ops[i], cur, now_ms);
		json_decref(disk);
	}
}

/* Step 3's record: the counter and the final state of every name the batch
 * changed; each final op's text is at its toff/tlen in REC.  1 built, 0
 * the batch changed nothing, -1 every op failed. */
static int
batch_record(file_store *fs, file_op **ops, size_t n, int64_t now_ms,
    file_buf *rec)
{
	char head[64];
	size_t i, j, nfinal = 0;

	snprintf(head, sizeof(head), "{\"counter\":%lld,\"entries\":[",
	    (long long)fs->counter);
	if (file_buf_add(rec, head, strlen(head)) != 0)
		goto nomem;
	for (i = 0; i < n; i++) {
		file_op *op = ops[i];

		if (!op->ok)
			continue;
		op->final = 1;
		for (j = i + 1; j < n; j++)
			if (ops[j]->ok && strcmp(ops[j]->fname, op->fname) == 0)
				op->final = 0;
		if (!op->final)
			continue;
		if (nfinal > 0 && file_buf_add(rec, ",", 1) != 0)
			goto nomem;
		op->toff = rec->n;
		if (file_put_entry(rec, op->name, op->state, now_ms) != 0)
			goto nomem;
		op->tlen = rec->n - op->toff;
		/* Bounded by the metadata limit; checked before the commit,
		 * as a committed state that cannot be written would stop
		 * every later batch. */
		if (FILE_OBJ_HDR + op->tlen > FILE_OBJ_BYTES_MAX) {
			batch_fail(ops, n, GCS_INVALID, "object too large",
			    NULL);
			return -1;
		}
		nfinal++;
	}
	if (nfinal == 0)
		return 0;
	if (file_buf_add(rec, "]}", 2) != 0)
		goto nomem;
	return 1;
nomem:
	batch_fail(ops, n, GCS_NOMEM, "out of memory", NULL);
	return -1;
}

/* Step 3, the commit point.  0 durable; -1 not committed, every op failed;
 * 1 the crash hook stopped it with the record half written. */
static int
batch_commit(file_store *fs, file_op **ops, size_t n, const file_buf *rec,
    gcs_file_crash crash)
{
	gcs_err err = { 0 };

	if (crash == GCS_FILE_CRASH_BEFORE_COMMIT) {
		(void)wal_append(fs, rec->p, rec->n, 1, &err);
		return 1;
	}
	if (wal_append(fs, rec->p, rec->n, 0, &err) != GCS_OK) {
		batch_fail(ops, n, err.status, err.msg, err.detail);
		return -1;
	}
	return 0;
}

/* Step 4: rewrite each changed object file in place from REC, the record
 * that starts at REC_START in the log.  0 applied; -1 committed but not
 * applied: the next batch re-applies the record, and callers get
 * "unavailable" (the write may stand, as after a lost GCS response); 1 the
 * crash hook stopped it after a torn rewrite. */
static int
batch_apply(file_store *fs, file_op **ops, size_t n, const file_buf *rec,
    off_t rec_start, int64_t now_ms, gcs_file_crash crash)
{
	gcs_err err = { 0 };
	size_t i;

	for (i = 0; i < n; i++) {
		file_op *op = ops[i];

		if (!op->final)
			continue;
		if (crash == GCS_FILE_CRASH_AFTER_COMMIT) {
			(void)file_obj_write(fs, op->name, op->fname,
			    rec->p + op->toff, op->tlen, 1, &err);
			return 1;
		}
		if (file_obj_write(fs, op->name, op->fname, rec->p + op->toff,
		        op->tlen, 0, &err) != GCS_OK) {
			fs->wal_end = rec_start;
			file_cache_forget_all(fs);
			batch_fail(ops, n, err.status, err.msg, err.detail);
			return -1;
		}
		json_object_set(fs->cache, op->fname,
		    op->state ? op->state : json_null());
		if (op->state == NULL)
			file_tomb_add(fs, op->fname, now_ms);
		else
			json_object_del(fs->tombs, op->fname);
	}
	return 0;
}

/* After step 4: each caller's answer, then the housekeeping: a checkpoint
 * when the log is long (retried after the next batch when it fails), else
 * recycling old tombstones now and then. */
static void
batch_done(file_store *fs, file_op **ops, size_t n, int64_t now_ms)
{
	gcs_err err = { 0 };
	size_t i;

	for (i = 0; i < n; i++)
		if (ops[i]->ok && ops[i]->state != NULL)
			file_entry_to_object(ops[i]->state, now_ms,
			    &ops[i]->out);
	if (fs->wal_end > FILE_WAL_CHECKPOINT)
		(void)file_wal_checkpoint(fs, &err);
	else if (now_ms - fs->last_sweep_ms >= FILE_SWEEP_EVERY_MS)
		file_tomb_sweep(fs);
}

/* The crash hook fired (gcs_file_set_crash_point): as if the process were
 * killed here, stop writing (every later batch fails), stop the spare
 * maker and fail this batch.  The caller drops the flock. */
static void
batch_die(file_store *fs, file_op **ops, size_t n)
{
	file_cache_forget_all(fs);
	pthread_mutex_lock(&fs->mu);
	fs->dead = 1;
	pthread_mutex_unlock(&fs->mu);
	pthread_mutex_lock(&fs->spare_mu);
	fs->spare_stop = 1;
	pthread_cond_signal(&fs->spare_cv);
	pthread_mutex_unlock(&fs->spare_mu);
	batch_fail(ops, n, GCS_UNAVAILABLE, "the store has stopped", NULL);
}

/* One batch: steps 1-4 of the commit protocol (the top of store_file.c)
 * under the flock; step 5, waking the callers, is the committer's. */
static void
batch_run(file_store *fs, file_op **ops, size_t n)
{
	file_buf rec = { 0 };
	gcs_file_crash crash;
	gcs_err err = { 0 };
	int64_t now_ms;
	off_t rec_start;
	int rc;

	if (batch_begin(fs, ops, n, &crash) != 0)
		return;
	if (file_wal_catch_up(fs, &err) != GCS_OK) {
		batch_fail(ops, n, err.status, err.msg, err.detail);
		goto unlock;
	}
	if (json_object_size(fs->cache) > FILE_CACHE_MAX)
		file_cache_forget_all(fs);
	now_ms = fs->clock(fs->clock_ctx);
	batch_eval(fs, ops, n, now_ms);
	if (batch_record(fs, ops, n, now_ms, &rec) <= 0)
		goto unlock;
	rec_start = fs->wal_end;
	rc = batch_commit(fs, ops, n, &rec, crash);
	if (rc == 0)
		rc = batch_apply(fs, ops, n, &rec, rec_start, now_ms, crash);
	if (rc == 0)
		batch_done(fs, ops, n, now_ms);
	else if (rc > 0)
		batch_die(fs, ops, n);
unlock:
	flock(fs->lockfd, LOCK_UN);
	free(rec.p);
}

/* Wait (up to FILE_GATHER_US) until WANT ops are queued: the callers just
 * woken are about to queue their next op, and one sync for all of them
 * beats two for two halves.  Returns at once when WANT are queued. */
static void
gather(file_store *fs, size_t want)
{
	struct timespec dl;

	if (want > FILE_BATCH_MAX)
		want = FILE_BATCH_MAX;
	dl = util_mono_after_us(FILE_GATHER_US);
	/* Woken once, when the last expected op is queued, not by each. */
	fs->wake_at = want;
	while (fs->qlen < want && !fs->stop)
		if (pthread_cond_timedwait(&fs->work, &fs->mu, &dl) != 0)
			break;
	fs->wake_at = 0;
}

void *
file_committer_main(void *arg)
{
	file_store *fs = arg;
	file_op *batch[FILE_BATCH_MAX];
	size_t n = 0, i;

	pthread_mutex_lock(&fs->mu);
	for (;;) {
		/* The N callers of the last batch, once woken, queue again:
		 * some of them may be queued already, so wait for N in all,
		 * not N more (with one caller, that waited for nobody). */
		if (n > 0 && fs->qlen > 0)
			gather(fs, n);
		fs->wake_at = 1;
		while (fs->head == NULL && !fs->stop)
			pthread_cond_wait(&fs->work, &fs->mu);
		fs->wake_at = 0;
		if (fs->head == NULL)
			break;
		for (n = 0; n < FILE_BATCH_MAX && fs->head != NULL; n++) {
			batch[n] = fs->head;
			fs->head = fs->head->next;
		}
		fs->qlen -= n;
		if (fs->head == NULL)
			fs->tail = NULL;
		pthread_mutex_unlock(&fs->mu);
		batch_run(fs, batch, n);
		/* Woken without fs->mu held, so the callers do not all pile
		 * up on it.  Each op is woken once, by this thread alone, and
		 * not touched after: it may be gone the moment it is woken. */
		for (i = 0; i < n; i++)
			rt_waiter_wake(&batch[i]->done);
		pthread_mutex_lock(&fs->mu);
	}
	pthread_mutex_unlock(&fs->mu);
	return NULL;
}

/* Queue OP, wait for the committer, hand back the result.  In a task the
 * wait is an rt_waiter: the task's loop goes on meanwhile, and the
 * committer's wake resumes the task on it. */
int
file_submit(file_store *fs, file_op *op, gcs_object *out, gcs_err *err)
{
	int rc;

	/* Work that needs no lock is done here, in parallel, not by the
	 * committer. */
	if (file_name_encode(op->name, op->fname) != 0 || !utf8_ok(op->name))
		return gcs_fail(err, GCS_INVALID, "object name is not UTF-8");
	if (op->kind == OP_INSERT) {
		op->clean = gcs_meta_new(op->meta);
		if (op->clean == NULL)
			return gcs_fail(err, GCS_NOMEM, "out of memory");
		if (file_meta_too_big(op->clean)) {
			json_decref(op->clean);
			return gcs_fail(err, GCS_INVALID,
			    "metadata over %d bytes", GCS_META_BYTES_MAX);
		}
	}
	rt_waiter_init(&op->done);
	pthread_mutex_lock(&fs->mu);
	op->next = NULL;
	if (fs->tail != NULL)
		fs->tail->next = op;
	else
		fs->head = op;
	fs->tail = op;
	fs->qlen++;
	if (fs->wake_at != 0 && fs->qlen >= fs->wake_at)
		pthread_cond_signal(&fs->work);
	pthread_mutex_unlock(&fs->mu);
	rt_waiter_wait(&op->done, RT_FOREVER);
	json_decref(op->state);
	json_decref(op->clean);
	rc = op->rc;
	if (rc == GCS_OK && out != NULL) {
		/* A reference to the metadata the committer keeps: it is never
		 * changed once made (a patch makes a new object), and jansson
		 * counts references atomically. */
		*out = op->out;
	} else {
		gcs_object_clear(&op->out);
	}
	if (rc != GCS_OK && err != NULL)
		*err = op->err;
	return rc;
}
