/*
 * file_log.c: the commit log (.wal): its records, catching up with other
 * writers, checkpoints, and the recovery at open (the protocol: the top of
 * store_file.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_file_int.h"

static const char wal_magic[8] = { 'L', 'G', 'W', 'A', 'L', '0', '0', '1' };

/* ---- the log ---- */

static int
pread_all(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

/* Write zeros over [FROM, TO) of FD (not synced). */
int
file_zero_fill(int fd, off_t from, off_t to)
{
	static const char zeros[FILE_ZERO_CHUNK];

	while (from < to) {
		size_t n = to - from < FILE_ZERO_CHUNK ? (size_t)(to - from)
		                                       : FILE_ZERO_CHUNK;

		if (file_pwrite_all(fd, zeros, n, from) != 0)
			return -1;
		from += (off_t)n;
	}
	return 0;
}

/* Whether the log ends at OFF: the end of the file, or a header of zeros
 * (the unwritten part of the log).  A read error counts as the end. */
static int
wal_at_end(file_store *fs, off_t off)
{
	static const unsigned char zeros[FILE_REC_HDR];
	unsigned char hdr[FILE_REC_HDR];

	if (pread_all(fs->walfd, hdr, sizeof(hdr), off) != 0)
		return 1;
	return memcmp(hdr, zeros, sizeof(hdr)) == 0;
}

/* Make a log of FS in FD: the header with counter floor FLOOR, then
 * (with prealloc) zeros up to FILE_WAL_PREZERO, durable. */
static int
wal_make(const file_store *fs, int fd, int64_t floor)
{
	unsigned char hdr[FILE_WAL_HDR];

	memcpy(hdr, wal_magic, 8);
	memcpy(hdr + 8, &floor, 8);
	if (ftruncate(fd, 0) != 0 ||
	    file_pwrite_all(fd, hdr, sizeof(hdr), 0) != 0 ||
	    (fs->prealloc &&
	        file_zero_fill(fd, FILE_WAL_HDR, FILE_WAL_PREZERO) != 0) ||
	    fdatasync(fd) != 0)
		return -1;
	return 0;
}

/* Read the record at *OFF (file size SIZE).  Returns the parsed record
 * (new reference) and advances *OFF, or NULL at the end or at a torn or
 * corrupt record. */
static json_t *
wal_read_record(file_store *fs, off_t *off, off_t size)
{
	unsigned char hdr[FILE_REC_HDR];
	uint32_t len, crc;
	unsigned char *buf;
	json_t *rec = NULL;
	json_error_t je;

	if (size - *off < FILE_REC_HDR ||
	    pread_all(fs->walfd, hdr, sizeof(hdr), *off) != 0)
		return NULL;
	memcpy(&len, hdr, 4);
	memcpy(&crc, hdr + 4, 4);
	if (len == 0 || len > FILE_REC_BYTES_MAX ||
	    (off_t)len > size - *off - FILE_REC_HDR)
		return NULL;
	buf = malloc(len);
	if (buf == NULL)
		return NULL;
	if (pread_all(fs->walfd, buf, len, *off + FILE_REC_HDR) == 0 &&
	    file_crc32_buf(buf, len) == crc) {
		rec = json_loadb((const char *)buf, len, 0, &je);
		if (rec != NULL &&
		    (!json_is_array(json_object_get(rec, "entries")) ||
		        !json_is_integer(json_object_get(rec, "counter")) ||
		        file_entry_int(rec, "counter") < 0 ||
		        file_entry_int(rec, "counter") > GCS_GEN_MAX)) {
			json_decref(rec);
			rec = NULL;
		}
	}
	free(buf);
	if (rec != NULL)
		*off += FILE_REC_HDR + (off_t)len;
	return rec;
}

static void
counter_see(file_store *fs, int64_t c)
{
	if (c > fs->counter)
		fs->counter = c;
}

/* Open DIR/.wal (creating it with an empty header when absent) and read
 * its header.  Under the flock. */
int
file_wal_open(file_store *fs, gcs_err *err)
{
	unsigned char hdr[FILE_WAL_HDR];
	struct stat st;
	int64_t floor;
	int fd;

	fd = openat(fs->dirfd, WAL_NAME, O_RDWR | O_CREAT | O_CLOEXEC,
	    FILE_MODE);
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return file_fail(fs, err, WAL_NAME, strerror(errno),
		    "open its log");
	}
	if (st.st_size < FILE_WAL_HDR) {
		/* New (or torn while being created, before any record). */
		if (wal_make(fs, fd, fs->counter) != 0 ||
		    fsync(fs->dirfd) != 0) {
			close(fd);
			return file_fail(fs, err, WAL_NAME, strerror(errno),
			    "initialise its log");
		}
		stat_add(&fs->n_syncs, 2);
	}
	if (pread_all(fd, hdr, sizeof(hdr), 0) != 0 ||
	    memcmp(hdr, wal_magic, 8) != 0) {
		close(fd);
		return file_fail(fs, err, WAL_NAME, "not a lockgate log",
		    "open its log");
	}
	memcpy(&floor, hdr + 8, 8);
	if (floor < 0 || floor > GCS_GEN_MAX) {
		/* Past it no generation can be issued in order. */
		close(fd);
		return file_fail(fs, err, WAL_NAME,
		    "corrupt: its generation counter is out of range",
		    "open its log");
	}
	counter_see(fs, floor);
	if (fs->walfd >= 0)
		close(fs->walfd);
	fs->walfd = fd;
	fs->wal_ino = st.st_ino;
	fs->wal_end = FILE_WAL_HDR;
	return GCS_OK;
}

/* Cut the log at OFF (file size SIZE), durably: the torn record there is
 * overwritten with zeros (as far as the longest record could reach), so
 * that the log ends at OFF and the next record is appended there. */
static int
wal_cut(file_store *fs, off_t off, off_t size, gcs_err *err)
{
	off_t to = off + FILE_REC_HDR + FILE_REC_BYTES_MAX;

	if (file_zero_fill(fs->walfd, off, to < size ? to : size) != 0 ||
	    fdatasync(fs->walfd) != 0)
		return file_fail(fs, err, WAL_NAME, strerror(errno),
		    "cut its log");
	stat_add(&fs->n_syncs, 1);
	return GCS_OK;
}

static int
record_apply(file_store *fs, const json_t *rec, gcs_err *err)
{
	json_t *e;
	size_t i;
	int rc;

	json_array_foreach(json_object_get(rec, "entries"), i, e)
	{
		if (!file_entry_valid(e))
			return file_fail(fs, err, WAL_NAME, "a bad entry",
			    "read its log");
		rc = file_entry_apply(fs, e, err);
		if (rc != GCS_OK)
			return rc;
	}
	return GCS_OK;
}

/* Under the flock, before a batch: follow what other writers did since our
 * last batch.  Re-applies the newest record we did not write (its writer
 * may have died before renaming) and cuts a torn tail. */
int
file_wal_catch_up(file_store *fs, gcs_err *err)
{
	struct stat st;
	json_t *rec, *last = NULL;
	off_t off;
	int rc = GCS_OK;

	if (fstatat(fs->dirfd, WAL_NAME, &st, 0) != 0 ||
	    st.st_ino != fs->wal_ino) {
		file_cache_forget_all(fs);
		/* Replaced by a checkpoint (or removed): start over. */
		rc = file_wal_open(fs, err);
		if (rc != GCS_OK)
			return rc;
		if (fstat(fs->walfd, &st) != 0)
			return file_fail(fs, err, WAL_NAME, strerror(errno),
			    "stat its log");
	}
	if (st.st_size >= fs->wal_end && wal_at_end(fs, fs->wal_end))
		return GCS_OK;
	/* Another writer was here: forget what we knew of the files. */
	file_cache_forget_all(fs);
	off = st.st_size >= fs->wal_end ? fs->wal_end : FILE_WAL_HDR;
	while ((rec = wal_read_record(fs, &off, st.st_size)) != NULL) {
		counter_see(fs, file_entry_int(rec, "counter"));
		json_decref(last);
		last = rec;
	}
	if (!wal_at_end(fs, off))
		rc = wal_cut(fs, off, st.st_size, err);
	if (rc == GCS_OK && last != NULL)
		rc = record_apply(fs, last, err);
	if (rc == GCS_OK)
		fs->wal_end = off;
	json_decref(last);
	return rc;
}

/* Make every object file durable, then start a fresh log that carries the
 * counter.  Under the flock. */
int
file_wal_checkpoint(file_store *fs, gcs_err *err)
{
	static const char tmpname[] = TMP_PREFIX "wal";
	int fd;

	if (syncfs(fs->dirfd) != 0 || fsync(fs->dirfd) != 0)
		return file_fail(fs, err, NULL, strerror(errno),
		    "sync its directory");
	file_tomb_sweep(fs);
	fd = openat(fs->dirfd, tmpname,
	    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, FILE_MODE);
	if (fd < 0)
		goto fail;
	if (wal_make(fs, fd, fs->counter) != 0) {
		close(fd);
		goto fail;
	}
	close(fd);
	if (renameat(fs->dirfd, tmpname, fs->dirfd, WAL_NAME) != 0 ||
	    fsync(fs->dirfd) != 0)
		goto fail;
	stat_add(&fs->n_syncs, 4);
	stat_add(&fs->n_checkpoints, 1);
	return file_wal_open(fs, err);
fail:
	file_fail(fs, err, WAL_NAME, strerror(errno), "checkpoint its log");
	unlinkat(fs->dirfd, tmpname, 0);
	return GCS_UNAVAILABLE;
}

/* A directory stream of DIR with its own offset (a dup would share it). */
DIR *
file_dir_stream(file_store *fs)
{
	int fd = openat(fs->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (d == NULL)
		close(fd);
	return d;
}

/* Create SPARE_DIR, or empty it of spares a stopped store was making. */
static void
spare_dir_clean(file_store *fs)
{
	struct dirent *de;
	DIR *d;
	int fd;

	if (mkdirat(fs->dirfd, SPARE_DIR, FILE_DIR_MODE) == 0 ||
	    errno != EEXIST)
		return;
	fd = openat(fs->dirfd, SPARE_DIR,
	    O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			unlinkat(fd, de->d_name, 0);
	closedir(d);
}

/* Replay the log's records up to SIZE into FINALS (name: its last
 * entry), seeing every counter and generation on the way. */
static int
wal_replay(file_store *fs, off_t size, json_t *finals, gcs_err *err)
{
	off_t off = FILE_WAL_HDR;
	json_t *rec, *e;
	size_t i;

	while ((rec = wal_read_record(fs, &off, size)) != NULL) {
		counter_see(fs, file_entry_int(rec, "counter"));
		json_array_foreach(json_object_get(rec, "entries"), i, e)
		{
			if (!file_entry_valid(e)) {
				json_decref(rec);
				return file_fail(fs, err, WAL_NAME,
				    "a bad entry", "read its log");
			}
			json_object_set(finals,
			    json_string_value(json_object_get(e, "name")), e);
			if (file_entry_exists(e))
				counter_see(fs,
				    file_entry_int(e, "generation"));
		}
		json_decref(rec);
	}
	return GCS_OK;
}

/* The directory D after the replay: temp files removed, spares kept for
 * reuse, tombstones and generations of the object files seen. */
static void
dir_sweep(file_store *fs, DIR *d)
{
	struct dirent *de;
	char *buf = malloc(FILE_OBJ_BYTES_MAX);
	json_t *e;

	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
			unlinkat(fs->dirfd, de->d_name, 0);
			continue;
		}
		if (strncmp(de->d_name, SPARE_PREFIX, strlen(SPARE_PREFIX)) ==
		    0) {
			/* Left by a store that stopped (or still runs: a
			 * spare used twice fails its rename, harmlessly). */
			char *dup = strdup(de->d_name);

			if (dup == NULL || file_spare_push(fs, dup) != 0) {
				free(dup);
				unlinkat(fs->dirfd, de->d_name, 0);
			}
			continue;
		}
		if (de->d_name[0] == '.' || buf == NULL ||
		    file_obj_read_once(fs, de->d_name, buf, &e) != 0)
			continue;
		if (!file_entry_exists(e))
			file_tomb_add(fs, de->d_name,
			    file_entry_int(e, "deleted_ms"));
		else
			counter_see(fs, file_entry_int(e, "generation"));
		json_decref(e);
	}
	free(buf);
}

/* At open, under the flock: replay the whole log (final state per name),
 * apply it, sweep the directory (stray temp files, spares, tombstones),
 * and checkpoint, in the order the protocol at the top of store_file.c
 * states. */
int
file_recover(file_store *fs, gcs_err *err)
{
	struct stat st;
	json_t *finals = NULL, *v;
	const char *k;
	DIR *d;
	int rc;

	rc = file_wal_open(fs, err);
	if (rc != GCS_OK)
		return rc;
	if (fstat(fs->walfd, &st) != 0)
		return file_fail(fs, err, WAL_NAME, strerror(errno),
		    "stat its log");
	finals = json_object();
	if (finals == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	rc = wal_replay(fs, st.st_size, finals, err);
	if (rc != GCS_OK)
		goto out;
	/* A torn tail is cut by the checkpoint below, which replaces the log. */
	json_object_foreach(finals, k, v)
	{
		rc = file_entry_apply(fs, v, err);
		if (rc != GCS_OK)
			goto out;
	}
	d = file_dir_stream(fs);
	if (d == NULL) {
		rc = file_fail(fs, err, NULL, strerror(errno),
		    "read its directory");
		goto out;
	}
	spare_dir_clean(fs);
	dir_sweep(fs, d);
	closedir(d);
	rc = file_wal_checkpoint(fs, err);
out:
	json_decref(finals);
	return rc;
}
