/*
 * file_spares.c: spare files made in advance for new names, and tombstones
 * recycled into spares once old (why: the top of store_file.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "store_file_int.h"

/* ---- spare files ---- */

/* The content of a spare: a tombstone of no name (never an object). */
static const char spare_text[] = "{\"name\":\"\",\"deleted\":true}";

static void
spare_name(file_store *fs, char *out)
{
	unsigned seq = __atomic_add_fetch(&fs->spare_seq, 1, __ATOMIC_RELAXED);

	snprintf(out, FILE_FNAME_BUF, SPARE_PREFIX "%016llx.%u",
	    (unsigned long long)fs->spare_id, seq);
}

/* Add NAME (taken over) to the pool; 0, or -1 when the pool is full. */
int
file_spare_push(file_store *fs, char *name)
{
	int rc = -1;

	pthread_mutex_lock(&fs->spare_mu);
	if (fs->nspares < FILE_SPARES_MAX) {
		fs->spares[fs->nspares++] = name;
		rc = 0;
	}
	pthread_mutex_unlock(&fs->spare_mu);
	return rc;
}

/* Under the flock: rename a spare to FNAME (which does not exist) and
 * open it for writing.  -1 when no spare could be used. */
int
file_spare_take(file_store *fs, const char *fname)
{
	char *name;
	int fd = -1;

	for (;;) {
		pthread_mutex_lock(&fs->spare_mu);
		name = fs->nspares > 0 ? fs->spares[--fs->nspares] : NULL;
		if (fs->nspares < FILE_SPARES_LOW && !fs->spare_want) {
			fs->spare_want = 1;
			pthread_cond_signal(&fs->spare_cv);
		}
		pthread_mutex_unlock(&fs->spare_mu);
		if (name == NULL)
			return -1;
		/* Another store on DIR may have adopted and used it. */
		if (renameat2(fs->dirfd, name, fs->dirfd, fname,
		        RENAME_NOREPLACE) == 0)
			fd = openat(fs->dirfd, fname,
			    O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		free(name);
		if (fd >= 0) {
			stat_add(&fs->n_spares_used, 1);
			return fd;
		}
	}
}

/* Make one spare file, without the flock; 0 or -1.  It is created in
 * SPARE_DIR, so that the slow inode allocation holds that directory's
 * lock, not DIR's (which every rename in DIR needs), then renamed into DIR:
 * a spare visible under SPARE_PREFIX is complete and nobody holds it open,
 * so another store may adopt and use it. */
static int
spare_make(file_store *fs)
{
	char name[FILE_FNAME_BUF], tmp[FILE_FNAME_BUF + sizeof(SPARE_DIR)];
	char hdr[FILE_OBJ_HDR + 1];
	size_t tlen = sizeof(spare_text) - 1;
	char *dup = NULL;
	int fd, ok;

	spare_name(fs, name);
	snprintf(tmp, sizeof(tmp), SPARE_DIR "/%s", name + 1);
	fd = openat(fs->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    FILE_MODE);
	if (fd < 0)
		return -1;
	snprintf(hdr, sizeof(hdr), "%08x %08x ",
	    (unsigned)file_crc32_buf((const unsigned char *)spare_text, tlen),
	    (unsigned)tlen);
	ok = write(fd, hdr, FILE_OBJ_HDR) == FILE_OBJ_HDR &&
	    write(fd, spare_text, tlen) == (ssize_t)tlen;
	close(fd);
	if (!ok ||
	    renameat2(fs->dirfd, tmp, fs->dirfd, name, RENAME_NOREPLACE) != 0) {
		unlinkat(fs->dirfd, tmp, 0);
		return -1;
	}
	dup = strdup(name);
	if (dup == NULL || file_spare_push(fs, dup) != 0) {
		free(dup);
		unlinkat(fs->dirfd, name, 0);
		return -1;
	}
	return 0;
}

/* The spare maker: refills the pool when the committer asks. */
void *
file_spare_main(void *arg)
{
	file_store *fs = arg;
	size_t n;

	pthread_mutex_lock(&fs->spare_mu);
	for (;;) {
		while (!fs->spare_want && !fs->spare_stop)
			pthread_cond_wait(&fs->spare_cv, &fs->spare_mu);
		if (fs->spare_stop)
			break;
		n = fs->nspares;
		pthread_mutex_unlock(&fs->spare_mu);
		while (n < FILE_SPARES_FILL && spare_make(fs) == 0) {
			n++;
			pthread_mutex_lock(&fs->spare_mu);
			if (fs->spare_stop) {
				pthread_mutex_unlock(&fs->spare_mu);
				return NULL;
			}
			pthread_mutex_unlock(&fs->spare_mu);
		}
		pthread_mutex_lock(&fs->spare_mu);
		fs->spare_want = 0;
	}
	pthread_mutex_unlock(&fs->spare_mu);
	return NULL;
}

/* ---- tombstones ---- */

/* Remember that FNAME became a tombstone at MS (a later release of the
 * same name replaces the time).  Past FILE_TOMBS_MAX names, tombstones
 * stay on disk until the next open. */
void
file_tomb_add(file_store *fs, const char *fname, int64_t ms)
{
	if (json_object_size(fs->tombs) < FILE_TOMBS_MAX ||
	    json_object_get(fs->tombs, fname) != NULL)
		json_object_set_new(fs->tombs, fname,
		    json_integer((json_int_t)ms));
}

/* Under the flock: turn the tombstones older than FILE_TOMB_KEEP_MS that
 * are still tombstones into spare files (or remove them when the pool is
 * full).  A missing file is the same state as a tombstone, and a spare is
 * never an object, so this needs no log record and no sync.  Younger
 * tombstones stay: a name released and taken again reuses its file. */
void
file_tomb_sweep(file_store *fs)
{
	int64_t now = fs->clock(fs->clock_ctx);
	char *buf = malloc(FILE_OBJ_BYTES_MAX), spare[FILE_FNAME_BUF], *dup;
	const char *fname;
	json_t *ms, *e;
	void *tmp;

	fs->last_sweep_ms = now;
	if (buf == NULL)
		return;
	json_object_foreach_safe(fs->tombs, tmp, fname, ms)
	{
		if (json_integer_value(ms) + FILE_TOMB_KEEP_MS > now)
			continue;
		if (file_obj_read_once(fs, fname, buf, &e) == 0) {
			if (!file_entry_exists(e)) {
				json_object_del(fs->cache, fname);
				file_fd_forget(fs, fname);
				spare_name(fs, spare);
				dup = strdup(spare);
				if (dup == NULL ||
				    renameat2(fs->dirfd, fname, fs->dirfd,
				        spare, RENAME_NOREPLACE) != 0)
					unlinkat(fs->dirfd, fname, 0);
				else if (file_spare_push(fs, dup) != 0)
					unlinkat(fs->dirfd, spare, 0);
				else {
					dup = NULL;
					stat_add(&fs->n_recycled, 1);
				}
				free(dup);
			}
			json_decref(e);
		}
		json_object_del(fs->tombs, fname);
	}
	free(buf);
}
