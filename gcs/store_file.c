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
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gcs.h"
#include "store_file.h"

#define FILE_FNAME_MAX      200  /* longest encoded name kept readable */
#define FILE_FNAME_BUF      256  /* >= FILE_FNAME_MAX + 1 and hash form */
#define FILE_PATH_BUF       4096 /* DIR as given, and mkdir -p steps */
#define FILE_OBJ_HDR        18   /* "%08x %08x " (CRC, length) + JSON */
#define FILE_OBJ_BYTES_MAX  (16 * 1024) /* an object file, bounded read */
#define FILE_TORN_RETRIES   100   /* re-reads of a file caught mid-write */
#define FILE_BATCH_MAX      128   /* ops per committed batch */
#define FILE_GATHER_US      200   /* wait for woken callers to queue again */
#define FILE_CACHE_MAX      65536 /* object states the committer remembers */
#define FILE_FD_SLOTS       256   /* object files the committer keeps open */
#define FILE_REC_HDR        8     /* u32 length + u32 CRC-32 */
#define FILE_REC_BYTES_MAX  (FILE_BATCH_MAX * (FILE_OBJ_BYTES_MAX + 1) + 64)
#define FILE_WAL_HDR        16                /* magic + int64 counter floor */
#define FILE_WAL_CHECKPOINT (4 * 1024 * 1024) /* log bytes before a trim */
#define FILE_WAL_PREZERO    (FILE_WAL_CHECKPOINT + 1024 * 1024)
#define FILE_ZERO_CHUNK     (64 * 1024) /* zeros written per pwrite */
#define FILE_TOMB_KEEP_MS   GCS_FILE_TOMB_KEEP_MS
#define FILE_TOMBS_MAX      100000 /* tombstones remembered for recycling */
#define FILE_SWEEP_EVERY_MS 100    /* how often the committer recycles */
#define FILE_SPARES_MAX     4096   /* spare files kept ready for new names */
#define FILE_SPARES_FILL    256    /* the spare maker creates up to this */
#define FILE_SPARES_LOW     64     /* below this the spare maker refills */
#define FILE_DIR_MODE       0700
#define FILE_MODE           0600

static const char wal_magic[8] = { 'L', 'G', 'W', 'A', 'L', '0', '0', '1' };
#define WAL_NAME     ".wal"
#define LOCK_NAME    ".lock"
#define TMP_PREFIX   ".tmp."
#define SPARE_PREFIX ".spare."
#define SPARE_DIR    ".spares" /* where spares are created */

enum file_kind { OP_INSERT, OP_PATCH, OP_REMOVE };

/* One queued write.  Lives on the caller's stack until `done`. */
typedef struct file_op {
	enum file_kind kind;
	const char *name;   /* borrowed */
	const json_t *meta; /* borrowed */
	int64_t gen, metagen;
	char fname[FILE_FNAME_BUF];
	json_t *clean;     /* owned: insert's metadata, nulls dropped */
	size_t toff, tlen; /* its final state's text in the record */
	json_t *state;     /* owned: new state (entry), NULL = absent */
	int ok;            /* preconditions held: state is the result */
	int final;         /* last ok op on its name in the batch */
	int rc;
	gcs_err err;
	gcs_object out;
	sem_t done; /* posted by the committer when the op is decided */
	struct file_op *next;
} file_op;

typedef struct file_store {
	gcs_store base;
	char *dir;
	int dirfd, lockfd, walfd;
	ino_t wal_ino;
	off_t wal_end;   /* end of the last record we know applied */
	int64_t counter; /* largest generation issued in DIR */
	gcs_clock_fn clock;
	void *clock_ctx;
	json_t *cache; /* committer only: fname -> state or null,
				      valid while no other writer wrote */
	json_t *tombs; /* committer only: fname -> deleted_ms of
				      tombstones, recycled when old */
	/* Committer only: open object files, direct-mapped by name, so that
	 * a rewrite is one pwritev.  Valid while the name's file is the one
	 * opened: dropped with `cache` (another writer may have recycled it)
	 * and when we recycle or unlink it. */
	struct file_fd {
		char fname[FILE_FNAME_BUF];
		int fd;
	} * fds;
	int64_t last_sweep_ms;

	/* Spare files (empty tombstones named SPARE_PREFIX...) renamed into
	 * place for a new name, so that no write waits for ext4 to allocate
	 * an inode.  Made by the spare maker thread, off the write path. */
	pthread_mutex_t spare_mu;
	pthread_cond_t spare_cv;
	char **spares; /* FILE_SPARES_MAX slots */
	size_t nspares;
	unsigned spare_seq;
	uint64_t spare_id; /* random: spare names never repeat */
	int spare_want, spare_stop, spare_started;
	pthread_t spare_maker;

	pthread_mutex_t mu; /* queue, done flags, crash, dead */
	pthread_cond_t work;
	file_op *head, *tail;
	size_t qlen;
	size_t wake_at; /* signal `work` when qlen reaches this; 0 = never
			   (the committer is not waiting) */
	int stop, dead;
	gcs_file_crash crash;
	pthread_t committer;
	int started;

	uint64_t n_ops, n_batches, n_syncs, n_checkpoints; /* atomic */
	uint64_t n_created, n_spares_used, n_recycled;     /* atomic */
} file_store;

static void
stat_add(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

/* ---- names ---- */

static int
raw_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* Encode NAME into OUT (FILE_FNAME_BUF bytes).  0, or -1 for an empty
 * name or a hashing failure. */
static int
name_encode(const char *name, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)name;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	size_t o = 0;

	if (*p == '\0')
		return -1;
	for (; *p != '\0'; p++) {
		if (o + 3 > FILE_FNAME_MAX)
			goto hash;
		if (raw_ok(*p) && !(o == 0 && *p == '.')) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return 0;
hash:
	if (EVP_Digest(name, strlen(name), md, &mdlen, EVP_sha256(), NULL) != 1)
		return -1;
	out[0] = '~';
	for (i = 0; i < mdlen; i++) {
		out[1 + 2 * i] = hex[md[i] >> 4];
		out[2 + 2 * i] = hex[md[i] & 15];
	}
	out[1 + 2 * mdlen] = '\0';
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode an object file name into OUT (GCS_NAME_MAX + 1 bytes).
 * 0 decoded, 1 a hashed name (read the file for the name), -1 not an
 * object file. */
static int
name_decode(const char *fname, char *out)
{
	size_t o = 0;

	if (fname[0] == '.' || fname[0] == '\0')
		return -1;
	if (fname[0] == '~')
		return 1;
	for (; *fname != '\0'; fname++) {
		int c = (unsigned char)*fname;
		if (o >= GCS_NAME_MAX)
			return -1;
		if (c == '%') {
			int hi = hexval(fname[1]), lo;
			if (hi < 0 || (lo = hexval(fname[2])) < 0)
				return -1;
			c = hi * 16 + lo;
			fname += 2;
		} else if (!raw_ok((unsigned char)c)) {
			return -1;
		}
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

/* ---- object files ---- */

/* An entry is the JSON of one object's state: {"name", "generation",
 * "metageneration", "created_ms", "updated_ms", "metadata"}, or
 * {"name", "deleted": true} in a log record. */
static int
entry_exists(const json_t *e)
{
	return json_object_get(e, "deleted") == NULL;
}

static int64_t
entry_int(const json_t *e, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(e, key));
}

/* A generation or metageneration as this store issues them: 1 ..
 * GCS_GEN_MAX, so that the next one (+1) cannot overflow.  Anything else
 * in a file or a log record was not written by a lockgate store: the
 * entry is corrupt. */
static int
gen_valid(int64_t g)
{
	return g > 0 && g <= GCS_GEN_MAX;
}

static int
entry_valid(const json_t *e)
{
	if (!json_is_object(e) || !json_is_string(json_object_get(e, "name")))
		return 0;
	if (!entry_exists(e))
		return 1;
	return gen_valid(entry_int(e, "generation")) &&
	    gen_valid(entry_int(e, "metageneration")) &&
	    json_is_integer(json_object_get(e, "created_ms")) &&
	    json_is_integer(json_object_get(e, "updated_ms")) &&
	    json_is_object(json_object_get(e, "metadata"));
}

static void
entry_to_object(const json_t *e, int64_t now_ms, gcs_object *out)
{
	out->generation = entry_int(e, "generation");
	out->metageneration = entry_int(e, "metageneration");
	out->created_ms = entry_int(e, "created_ms");
	out->updated_ms = entry_int(e, "updated_ms");
	out->now_ms = now_ms;
	out->metadata = json_incref(json_object_get(e, "metadata"));
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
	uint32_t i, k, v;

	for (i = 0; i < 256; i++) {
		v = i;
		for (k = 0; k < 8; k++)
			v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
		crc_table[i] = v;
	}
}

/* CRC-32 (IEEE): catches torn object files and torn log records. */
static uint32_t
crc32_buf(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	pthread_once(&crc_once, crc_init);
	while (n-- > 0)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* Read object file FNAME once.  0 with *ENTRY (a live object or a
 * tombstone), ENOENT, EAGAIN when torn or corrupt, or another errno. */
static int
obj_read_once(file_store *fs, const char *fname, char *buf, json_t **entry)
{
	size_t len = 0;
	ssize_t r;
	json_error_t je;
	unsigned long crc, jlen;
	char *end;
	int fd, rc = EAGAIN;

	*entry = NULL;
	fd = openat(fs->dirfd, fname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	while (len < FILE_OBJ_BYTES_MAX) {
		r = read(fd, buf + len, FILE_OBJ_BYTES_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = errno;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len < FILE_OBJ_HDR || buf[8] != ' ' || buf[17] != ' ')
		goto out;
	buf[8] = buf[17] = '\0';
	crc = strtoul(buf, &end, 16);
	if (end != buf + 8)
		goto out;
	jlen = strtoul(buf + 9, &end, 16);
	if (end != buf + 17 || jlen == 0 || jlen > len - FILE_OBJ_HDR ||
	    crc != crc32_buf((unsigned char *)buf + FILE_OBJ_HDR, jlen))
		goto out;
	*entry = json_loadb(buf + FILE_OBJ_HDR, jlen, 0, &je);
	if (*entry == NULL || !entry_valid(*entry)) {
		json_decref(*entry);
		*entry = NULL;
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Read object file FNAME: GCS_OK with *ENTRY (new reference, a live
 * object), GCS_NOT_FOUND (no file, or a tombstone), or GCS_UNAVAILABLE.
 * Files are rewritten in place under the flock while readers take no lock,
 * so a read that overlaps a write fails its CRC and is retried. */
static int
obj_read(file_store *fs, const char *fname, json_t **entry, gcs_err *err)
{
	char *buf = malloc(FILE_OBJ_BYTES_MAX);
	int rc = EAGAIN, i;

	*entry = NULL;
	if (buf == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	for (i = 0; i < FILE_TORN_RETRIES && rc == EAGAIN; i++) {
		if (i > 0)
			sched_yield();
		rc = obj_read_once(fs, fname, buf, entry);
	}
	free(buf);
	if (rc == 0 && !entry_exists(*entry)) {
		json_decref(*entry);
		*entry = NULL;
		rc = ENOENT;
	}
	if (rc == 0)
		return GCS_OK;
	if (rc == ENOENT)
		return gcs_fail(err, GCS_NOT_FOUND, "no such object");
	if (rc == EAGAIN)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "object file %s/%s is corrupt", fs->dir, fname);
	return gcs_fail(err, GCS_UNAVAILABLE, "read %s/%s: %s", fs->dir, fname,
	    strerror(rc));
}

static int
pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

static int spare_take(file_store *fs, const char *fname);

static struct file_fd *
fd_slot(file_store *fs, const char *fname)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *fname != '\0'; fname++)
		h = (h ^ (unsigned char)*fname) * 16777619u;
	return &fs->fds[h % FILE_FD_SLOTS];
}

/* Close FNAME's cached file, if any. */
static void
fd_forget(file_store *fs, const char *fname)
{
	struct file_fd *f = fd_slot(fs, fname);

	if (f->fd >= 0 && strcmp(f->fname, fname) == 0) {
		close(f->fd);
		f->fd = -1;
	}
}

/* Forget every state and open file the committer knows. */
static void
cache_forget_all(file_store *fs)
{
	size_t i;

	json_object_clear(fs->cache);
	for (i = 0; i < FILE_FD_SLOTS; i++)
		if (fs->fds[i].fd >= 0) {
			close(fs->fds[i].fd);
			fs->fds[i].fd = -1;
		}
}

/* Write TEXT (the JSON of an object or a tombstone) over object file
 * FNAME, in place: no new inode per write (ext4 makes creating files right
 * after deleting others slow) and no truncation (the header gives the
 * length; bytes after it are ignored).  Not durable by itself: the log
 * record is.  With TORN, write only the first half (the crash hook). */
static int
obj_write(file_store *fs, const char *fname, const char *text, size_t tlen,
    int torn, gcs_err *err)
{
	char hdr[FILE_OBJ_HDR + 1];
	struct iovec iov[2];
	struct file_fd *slot;
	size_t n = FILE_OBJ_HDR + tlen;
	ssize_t w;
	int fd, rc = GCS_OK;

	if (n > FILE_OBJ_BYTES_MAX)
		return gcs_fail(err, GCS_INVALID, "object of %zu bytes", n);
	snprintf(hdr, sizeof(hdr), "%08x %08x ",
	    (unsigned)crc32_buf((const unsigned char *)text, tlen),
	    (unsigned)tlen);
	iov[0].iov_base = hdr;
	iov[0].iov_len = FILE_OBJ_HDR;
	iov[1].iov_base = (void *)text;
	iov[1].iov_len = torn ? tlen / 2 : tlen;
	slot = fd_slot(fs, fname);
	if (slot->fd >= 0 && strcmp(slot->fname, fname) == 0) {
		fd = slot->fd;
	} else {
		fd =
		    openat(fs->dirfd, fname, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT)
			fd = spare_take(fs, fname);
		if (fd < 0) {
			fd = openat(fs->dirfd, fname,
			    O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			    FILE_MODE);
			if (fd >= 0)
				stat_add(&fs->n_created, 1);
		}
		if (fd < 0)
			return gcs_fail(err, GCS_UNAVAILABLE, "open %s/%s: %s",
			    fs->dir, fname, strerror(errno));
		if (slot->fd >= 0)
			close(slot->fd);
		snprintf(slot->fname, sizeof(slot->fname), "%s", fname);
		slot->fd = fd;
	}
	do
		w = pwritev(fd, iov, 2, 0);
	while (w < 0 && errno == EINTR);
	/* A short write of a few hundred bytes is an error (disk full). */
	if (w != (ssize_t)(iov[0].iov_len + iov[1].iov_len)) {
		rc = gcs_fail(err, GCS_UNAVAILABLE, "write %s/%s: %s", fs->dir,
		    fname, w < 0 ? strerror(errno) : "short write");
		fd_forget(fs, fname);
	}
	return rc;
}

/* A growable string for the record text. */
typedef struct file_buf {
	char *p;
	size_t n, cap;
} file_buf;

static int
buf_add(file_buf *b, const char *s, size_t n)
{
	char *np;
	size_t ncap;

	if (b->n + n + 1 > b->cap) {
		ncap = b->cap ? b->cap : 4096;
		while (ncap < b->n + n + 1)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (np == NULL)
			return -1;
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

/*
 * Object and tombstone texts are written here directly, not built as
 * jansson values and dumped: the committer writes one per op, and the
 * dump's allocations were a tenth of its time.  They are read back with
 * jansson (obj_read, replay).
 */

/* Append S as a JSON string: UTF-8 as it is (names and metadata are
 * valid UTF-8), '"', '\\' and control characters escaped.  B NULL: only
 * count.  Returns the bytes it takes, or SIZE_MAX when out of memory. */
static size_t
put_str(file_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run;
	size_t n = 2;
	char esc[6];
	int bad = 0;

	if (b != NULL)
		bad |= buf_add(b, "\"", 1);
	for (;;) {
		for (run = p; *p >= 0x20 && *p != '"' && *p != '\\'; p++)
			;
		n += (size_t)(p - run);
		if (b != NULL && p > run)
			bad |= buf_add(b, (const char *)run, (size_t)(p - run));
		if (*p == '\0')
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			n += 2;
			if (b != NULL)
				bad |= buf_add(b, esc, 2);
		} else {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			n += 6;
			if (b != NULL)
				bad |= buf_add(b, esc, 6);
		}
		p++;
	}
	if (b != NULL)
		bad |= buf_add(b, "\"", 1);
	return bad ? SIZE_MAX : n;
}

/* Append (B NULL: count) V, not a string, as JSON (jansson's dump). */
static size_t
put_other(file_buf *b, const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t n = text ? strlen(text) : SIZE_MAX;

	if (text != NULL && b != NULL && buf_add(b, text, n) != 0)
		n = SIZE_MAX;
	free(text);
	return n;
}

/* Append (B NULL: count) metadata META as JSON.  SIZE_MAX when out of
 * memory. */
static size_t
put_meta(file_buf *b, const json_t *meta)
{
	const char *k;
	json_t *v;
	size_t n = 1, kn, vn;
	int first = 1;

	if (b != NULL && buf_add(b, "{", 1) != 0)
		return SIZE_MAX;
	json_object_foreach((json_t *)meta, k, v)
	{
		if (!first && b != NULL && buf_add(b, ",", 1) != 0)
			return SIZE_MAX;
		n += !first;
		first = 0;
		kn = put_str(b, k);
		if (kn == SIZE_MAX || (b != NULL && buf_add(b, ":", 1) != 0))
			return SIZE_MAX;
		vn = json_is_string(v) ? put_str(b, json_string_value(v))
		                       : put_other(b, v);
		if (vn == SIZE_MAX)
			return SIZE_MAX;
		n += kn + 1 + vn;
	}
	if (b != NULL && buf_add(b, "}", 1) != 0)
		return SIZE_MAX;
	return n + 1;
}

/* Append the text of state ENTRY, or of a tombstone of NAME deleted at
 * DELETED_MS when ENTRY is NULL.  0 or -1 (out of memory). */
static int
put_entry(file_buf *b, const char *name, const json_t *entry,
    int64_t deleted_ms)
{
	char num[160];

	if (buf_add(b, "{\"name\":", 8) != 0 || put_str(b, name) == SIZE_MAX)
		return -1;
	if (entry == NULL) {
		snprintf(num, sizeof(num),
		    ",\"deleted\":true,\"deleted_ms\":%lld}",
		    (long long)deleted_ms);
		return buf_add(b, num, strlen(num));
	}
	snprintf(num, sizeof(num),
	    ",\"generation\":%lld,\"metageneration\":%lld,\"created_ms\":"
	    "%lld,\"updated_ms\":%lld,\"metadata\":",
	    (long long)entry_int(entry, "generation"),
	    (long long)entry_int(entry, "metageneration"),
	    (long long)entry_int(entry, "created_ms"),
	    (long long)entry_int(entry, "updated_ms"));
	if (buf_add(b, num, strlen(num)) != 0 ||
	    put_meta(b, json_object_get(entry, "metadata")) == SIZE_MAX)
		return -1;
	return buf_add(b, "}", 1);
}

/* Whether META's text is over the metadata limit. */
static int
meta_too_big(const json_t *meta)
{
	size_t n = put_meta(NULL, meta);

	return n == SIZE_MAX || n > GCS_META_BYTES_MAX;
}

/* obj_write of ENTRY (a state or a tombstone from the log), in the same
 * text the committer writes. */
static int
obj_write_entry(file_store *fs, const char *fname, const json_t *entry,
    gcs_err *err)
{
	const char *name = json_string_value(json_object_get(entry, "name"));
	file_buf b = { 0 };
	int rc;

	if (put_entry(&b, name, entry_exists(entry) ? entry : NULL,
	        entry_int(entry, "deleted_ms")) != 0) {
		free(b.p);
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	rc = obj_write(fs, fname, b.p, b.n, 0, err);
	free(b.p);
	return rc;
}

/* Make the object named in ENTRY match ENTRY, unless it already does.
 * Used to replay the log; not durable by itself. */
static int
entry_apply(file_store *fs, const json_t *entry, gcs_err *err)
{
	const char *name = json_string_value(json_object_get(entry, "name"));
	char fname[FILE_FNAME_BUF];
	json_t *cur = NULL;
	int rc, same;

	if (name_encode(name, fname) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE, "bad name in the log");
	rc = obj_read(fs, fname, &cur, NULL);
	if (rc != GCS_OK)
		cur = NULL; /* absent, a tombstone, or torn: rewrite */
	if (cur != NULL &&
	    strcmp(json_string_value(json_object_get(cur, "name")), name) !=
	        0) {
		/* Another name's inode under this name (only a crash of the
		 * machine mid-recycling can do that): never write into it. */
		json_decref(cur);
		cur = NULL;
		rc = GCS_NOT_FOUND;
		fd_forget(fs, fname);
		if (unlinkat(fs->dirfd, fname, 0) != 0 && errno != ENOENT)
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "unlink %s/%s: %s", fs->dir, fname,
			    strerror(errno));
	}
	if (!entry_exists(entry))
		same = rc == GCS_NOT_FOUND;
	else
		same = cur != NULL &&
		    entry_int(cur, "generation") ==
		        entry_int(entry, "generation") &&
		    entry_int(cur, "metageneration") ==
		        entry_int(entry, "metageneration");
	json_decref(cur);
	if (same)
		return GCS_OK;
	return obj_write_entry(fs, fname, entry, err);
}

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
static int
spare_push(file_store *fs, char *name)
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
static int
spare_take(file_store *fs, const char *fname)
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
	    (unsigned)crc32_buf((const unsigned char *)spare_text, tlen),
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
	if (dup == NULL || spare_push(fs, dup) != 0) {
		free(dup);
		unlinkat(fs->dirfd, name, 0);
		return -1;
	}
	return 0;
}

/* The spare maker: refills the pool when the committer asks. */
static void *
spare_main(void *arg)
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
static void
tomb_add(file_store *fs, const char *fname, int64_t ms)
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
static void
tomb_sweep(file_store *fs)
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
		if (obj_read_once(fs, fname, buf, &e) == 0) {
			if (!entry_exists(e)) {
				json_object_del(fs->cache, fname);
				fd_forget(fs, fname);
				spare_name(fs, spare);
				dup = strdup(spare);
				if (dup == NULL ||
				    renameat2(fs->dirfd, fname, fs->dirfd,
				        spare, RENAME_NOREPLACE) != 0)
					unlinkat(fs->dirfd, fname, 0);
				else if (spare_push(fs, dup) != 0)
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
static int
zero_fill(int fd, off_t from, off_t to)
{
	static const char zeros[FILE_ZERO_CHUNK];

	while (from < to) {
		size_t n = to - from < FILE_ZERO_CHUNK ? (size_t)(to - from)
		                                       : FILE_ZERO_CHUNK;

		if (pwrite_all(fd, zeros, n, from) != 0)
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

/* Make a log in FD: the header with counter floor FLOOR, then zeros up to
 * FILE_WAL_PREZERO, durable. */
static int
wal_make(int fd, int64_t floor)
{
	unsigned char hdr[FILE_WAL_HDR];

	memcpy(hdr, wal_magic, 8);
	memcpy(hdr + 8, &floor, 8);
	if (ftruncate(fd, 0) != 0 || pwrite_all(fd, hdr, sizeof(hdr), 0) != 0 ||
	    zero_fill(fd, FILE_WAL_HDR, FILE_WAL_PREZERO) != 0 ||
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
	    crc32_buf(buf, len) == crc) {
		rec = json_loadb((const char *)buf, len, 0, &je);
		if (rec != NULL &&
		    (!json_is_array(json_object_get(rec, "entries")) ||
		        !json_is_integer(json_object_get(rec, "counter")) ||
		        entry_int(rec, "counter") < 0 ||
		        entry_int(rec, "counter") > GCS_GEN_MAX)) {
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
static int
wal_open(file_store *fs, gcs_err *err)
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
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "open %s/" WAL_NAME ": %s", fs->dir, strerror(errno));
	}
	if (st.st_size < FILE_WAL_HDR) {
		/* New (or torn while being created, before any record). */
		if (wal_make(fd, fs->counter) != 0 || fsync(fs->dirfd) != 0) {
			close(fd);
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "initialise %s/" WAL_NAME ": %s", fs->dir,
			    strerror(errno));
		}
		stat_add(&fs->n_syncs, 2);
	}
	if (pread_all(fd, hdr, sizeof(hdr), 0) != 0 ||
	    memcmp(hdr, wal_magic, 8) != 0) {
		close(fd);
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "%s/" WAL_NAME " is not a lockgate log", fs->dir);
	}
	memcpy(&floor, hdr + 8, 8);
	if (floor < 0 || floor > GCS_GEN_MAX) {
		/* Past it no generation can be issued in order. */
		close(fd);
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "%s/" WAL_NAME " is corrupt: its generation counter is "
		    "out of range",
		    fs->dir);
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

	if (zero_fill(fs->walfd, off, to < size ? to : size) != 0 ||
	    fdatasync(fs->walfd) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE, "cut %s/" WAL_NAME ": %s",
		    fs->dir, strerror(errno));
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
		if (!entry_valid(e))
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "bad entry in %s/" WAL_NAME, fs->dir);
		rc = entry_apply(fs, e, err);
		if (rc != GCS_OK)
			return rc;
	}
	return GCS_OK;
}

/* Under the flock, before a batch: follow what other writers did since our
 * last batch.  Re-applies the newest record we did not write (its writer
 * may have died before renaming) and cuts a torn tail. */
static int
wal_catch_up(file_store *fs, gcs_err *err)
{
	struct stat st;
	json_t *rec, *last = NULL;
	off_t off;
	int rc = GCS_OK;

	if (fstatat(fs->dirfd, WAL_NAME, &st, 0) != 0 ||
	    st.st_ino != fs->wal_ino) {
		cache_forget_all(fs);
		/* Replaced by a checkpoint (or removed): start over. */
		rc = wal_open(fs, err);
		if (rc != GCS_OK)
			return rc;
		if (fstat(fs->walfd, &st) != 0)
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "stat %s/" WAL_NAME ": %s", fs->dir,
			    strerror(errno));
	}
	if (st.st_size >= fs->wal_end && wal_at_end(fs, fs->wal_end))
		return GCS_OK;
	/* Another writer was here: forget what we knew of the files. */
	cache_forget_all(fs);
	off = st.st_size >= fs->wal_end ? fs->wal_end : FILE_WAL_HDR;
	while ((rec = wal_read_record(fs, &off, st.st_size)) != NULL) {
		counter_see(fs, entry_int(rec, "counter"));
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
static int
wal_checkpoint(file_store *fs, gcs_err *err)
{
	static const char tmpname[] = TMP_PREFIX "wal";
	int fd;

	if (syncfs(fs->dirfd) != 0 || fsync(fs->dirfd) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE, "sync %s: %s", fs->dir,
		    strerror(errno));
	tomb_sweep(fs);
	fd = openat(fs->dirfd, tmpname,
	    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, FILE_MODE);
	if (fd < 0)
		goto fail;
	if (wal_make(fd, fs->counter) != 0) {
		close(fd);
		goto fail;
	}
	close(fd);
	if (renameat(fs->dirfd, tmpname, fs->dirfd, WAL_NAME) != 0 ||
	    fsync(fs->dirfd) != 0)
		goto fail;
	stat_add(&fs->n_syncs, 4);
	stat_add(&fs->n_checkpoints, 1);
	return wal_open(fs, err);
fail:
	gcs_fail(err, GCS_UNAVAILABLE, "checkpoint %s: %s", fs->dir,
	    strerror(errno));
	unlinkat(fs->dirfd, tmpname, 0);
	return GCS_UNAVAILABLE;
}

/* A directory stream of DIR with its own offset (a dup would share it). */
static DIR *
dir_stream(file_store *fs)
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

/* At open, under the flock: replay the whole log (final state per name),
 * remove stray temp files, and checkpoint. */
/* long: the recovery order (replay, apply, sweep temp files, checkpoint)
 * reads best in one place, as the protocol at the top of store_file.c states
 * it */
static int
recover(file_store *fs, gcs_err *err)
{
	struct stat st;
	json_t *finals = NULL, *rec, *e, *v;
	const char *k;
	DIR *d = NULL;
	struct dirent *de;
	off_t off = FILE_WAL_HDR;
	char *buf;
	size_t i;
	int rc;

	rc = wal_open(fs, err);
	if (rc != GCS_OK)
		return rc;
	if (fstat(fs->walfd, &st) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "stat %s/" WAL_NAME ": %s", fs->dir, strerror(errno));
	finals = json_object();
	if (finals == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	while ((rec = wal_read_record(fs, &off, st.st_size)) != NULL) {
		counter_see(fs, entry_int(rec, "counter"));
		json_array_foreach(json_object_get(rec, "entries"), i, e)
		{
			if (!entry_valid(e)) {
				json_decref(rec);
				rc = gcs_fail(err, GCS_UNAVAILABLE,
				    "bad entry in %s/" WAL_NAME, fs->dir);
				goto out;
			}
			json_object_set(finals,
			    json_string_value(json_object_get(e, "name")), e);
			if (entry_exists(e))
				counter_see(fs, entry_int(e, "generation"));
		}
		json_decref(rec);
	}
	/* A torn tail is cut by the checkpoint below, which replaces the log. */
	json_object_foreach(finals, k, v)
	{
		rc = entry_apply(fs, v, err);
		if (rc != GCS_OK)
			goto out;
	}
	d = dir_stream(fs);
	if (d == NULL) {
		rc = gcs_fail(err, GCS_UNAVAILABLE, "read %s: %s", fs->dir,
		    strerror(errno));
		goto out;
	}
	spare_dir_clean(fs);
	buf = malloc(FILE_OBJ_BYTES_MAX);
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

			if (dup == NULL || spare_push(fs, dup) != 0) {
				free(dup);
				unlinkat(fs->dirfd, de->d_name, 0);
			}
			continue;
		}
		if (de->d_name[0] == '.' || buf == NULL ||
		    obj_read_once(fs, de->d_name, buf, &e) != 0)
			continue;
		if (!entry_exists(e))
			tomb_add(fs, de->d_name, entry_int(e, "deleted_ms"));
		else
			counter_see(fs, entry_int(e, "generation"));
		json_decref(e);
	}
	free(buf);
	closedir(d);
	rc = wal_checkpoint(fs, err);
out:
	json_decref(finals);
	return rc;
}

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

/* Decide op I of the batch given the state before it, CUR (borrowed,
 * NULL = absent).  Sets op->ok/state or op->rc/err. */
static void
op_eval(file_store *fs, file_op *op, const json_t *cur, int64_t now_ms)
{
	json_t *meta;
	int64_t clock_gen;

	if (op->kind == OP_INSERT) {
		if (cur != NULL) {
			op->rc = gcs_fail(&op->err, GCS_PRECONDITION,
			    "object exists");
			return;
		}
		/* The counter never passes GCS_GEN_MAX (wal_open and
		 * entry_valid refuse more): tokens stay in order or the
		 * insert is refused, never wrapped. */
		if (fs->counter >= GCS_GEN_MAX) {
			op->rc = gcs_fail(&op->err, GCS_UNAVAILABLE,
			    "the generation counter of %s is exhausted",
			    fs->dir);
			return;
		}
		meta = op->clean;
		op->clean = NULL;
		clock_gen = now_ms > GCS_GEN_MAX / 1000 ? GCS_GEN_MAX
		    : now_ms < 0                        ? 0
		                                        : now_ms * 1000;
		fs->counter =
		    fs->counter + 1 > clock_gen ? fs->counter + 1 : clock_gen;
		op->state =
		    entry_new(op->name, fs->counter, 1, now_ms, now_ms, meta);
		if (op->state == NULL)
			goto nomem;
		op->ok = 1;
		return;
	}
	if (cur == NULL) {
		op->rc = gcs_fail(&op->err, GCS_NOT_FOUND, "no such object");
		return;
	}
	if (entry_int(cur, "generation") != op->gen ||
	    entry_int(cur, "metageneration") != op->metagen) {
		op->rc =
		    gcs_fail(&op->err, GCS_PRECONDITION, "precondition failed");
		return;
	}
	if (op->kind == OP_REMOVE) {
		op->state = NULL;
		op->ok = 1;
		return;
	}
	if (op->metagen >= GCS_GEN_MAX) {
		op->rc = gcs_fail(&op->err, GCS_UNAVAILABLE,
		    "the metageneration of %s is exhausted", op->name);
		return;
	}
	meta = gcs_meta_patched(json_object_get(cur, "metadata"), op->meta);
	if (meta == NULL)
		goto nomem;
	if (meta_too_big(meta)) {
		json_decref(meta);
		op->rc = gcs_fail(&op->err, GCS_INVALID,
		    "metadata over %d bytes", GCS_META_BYTES_MAX);
		return;
	}
	op->state = entry_new(op->name, op->gen, op->metagen + 1,
	    entry_int(cur, "created_ms"), now_ms, meta);
	if (op->state == NULL)
		goto nomem;
	op->ok = 1;
	return;
nomem:
	op->rc = gcs_fail(&op->err, GCS_NOMEM, "out of memory");
}

static int
utf8_ok(const char *name)
{
	json_t *j = json_string(name); /* NULL unless valid UTF-8 */

	json_decref(j);
	return j != NULL;
}

static void
batch_fail(file_op **ops, size_t n, gcs_status st, const char *msg)
{
	size_t i;

	for (i = 0; i < n; i++) {
		json_decref(ops[i]->state);
		ops[i]->state = NULL;
		ops[i]->ok = 0;
		gcs_object_clear(&ops[i]->out);
		ops[i]->rc = gcs_fail(&ops[i]->err, st, "%s", msg);
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
	crc = crc32_buf((const unsigned char *)text, len);
	memcpy(hdr, &len, 4);
	memcpy(hdr + 4, &crc, 4);
	if (pwrite_all(fs->walfd, hdr, sizeof(hdr), fs->wal_end) != 0 ||
	    pwrite_all(fs->walfd, text, half ? len / 2 : len,
	        fs->wal_end + FILE_REC_HDR) != 0) {
		rc = gcs_fail(err, GCS_UNAVAILABLE,
		    "append to %s/" WAL_NAME ": %s", fs->dir, strerror(errno));
		goto out;
	}
	if (half)
		goto out;
	if (fdatasync(fs->walfd) != 0) {
		rc = gcs_fail(err, GCS_UNAVAILABLE, "sync %s/" WAL_NAME ": %s",
		    fs->dir, strerror(errno));
		goto out;
	}
	stat_add(&fs->n_syncs, 1);
	fs->wal_end += FILE_REC_HDR + (off_t)len;
out:
	/* Not committed: zero what was written, so that no reader takes it
	 * for a record (the next append overwrites it anyway). */
	if (rc != GCS_OK && !half &&
	    zero_fill(fs->walfd, fs->wal_end,
	        fs->wal_end + FILE_REC_HDR + (off_t)len) == 0 &&
	    fdatasync(fs->walfd) == 0)
		stat_add(&fs->n_syncs, 1);
	return rc;
}

/* long: split pending (issue 21 section 3) */
static void
batch_run(file_store *fs, file_op **ops, size_t n)
{
	json_t *cur, *c;
	file_buf rec = { 0 };
	gcs_file_crash crash;
	gcs_err err = { 0 };
	char head[64];
	int64_t now_ms;
	off_t rec_start;
	size_t i, j, nfinal = 0;
	int rc;

	pthread_mutex_lock(&fs->mu);
	crash = fs->crash;
	fs->crash = GCS_FILE_CRASH_NONE;
	rc = fs->dead;
	pthread_mutex_unlock(&fs->mu);
	if (rc) {
		batch_fail(ops, n, GCS_UNAVAILABLE, "the store has stopped");
		return;
	}
	if (flock(fs->lockfd, LOCK_EX) != 0) {
		batch_fail(ops, n, GCS_UNAVAILABLE, "cannot lock the store");
		return;
	}
	stat_add(&fs->n_batches, 1);
	stat_add(&fs->n_ops, n);
	if (wal_catch_up(fs, &err) != GCS_OK) {
		batch_fail(ops, n, err.status, err.msg);
		goto unlock;
	}
	if (json_object_size(fs->cache) > FILE_CACHE_MAX)
		cache_forget_all(fs);
	now_ms = fs->clock(fs->clock_ctx);
	for (i = 0; i < n; i++) {
		file_op *op = ops[i];
		json_t *disk = NULL;

		/* The newest earlier result on this name, else what we know
		 * of the file, else the file. */
		for (j = i; j-- > 0;)
			if (ops[j]->ok && strcmp(ops[j]->fname, op->fname) == 0)
				break;
		if (j != (size_t)-1) {
			cur = ops[j]->state;
		} else if ((c = json_object_get(fs->cache, op->fname)) !=
		    NULL) {
			cur = json_is_null(c) ? NULL : c;
		} else {
			rc = obj_read(fs, op->fname, &disk, &op->err);
			if (rc == GCS_OK &&
			    strcmp(json_string_value(
			               json_object_get(disk, "name")),
			        op->name) != 0) {
				json_decref(disk);
				rc = gcs_fail(&op->err, GCS_UNAVAILABLE,
				    "object file %s/%s holds another name",
				    fs->dir, op->fname);
			}
			if (rc != GCS_OK && rc != GCS_NOT_FOUND) {
				op->rc = rc;
				continue;
			}
			json_object_set(fs->cache, op->fname,
			    disk ? disk : json_null());
			cur = disk;
		}
		op_eval(fs, op, cur, now_ms);
		json_decref(disk);
	}
	/* The record: the final state of every name the batch changed. */
	snprintf(head, sizeof(head), "{\"counter\":%lld,\"entries\":[",
	    (long long)fs->counter);
	if (buf_add(&rec, head, strlen(head)) != 0)
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
		if (nfinal > 0 && buf_add(&rec, ",", 1) != 0)
			goto nomem;
		op->toff = rec.n;
		if (put_entry(&rec, op->name, op->state, now_ms) != 0)
			goto nomem;
		op->tlen = rec.n - op->toff;
		/* Bounded by the metadata limit; checked before the commit,
		 * as a committed state that cannot be written would stop
		 * every later batch. */
		if (FILE_OBJ_HDR + op->tlen > FILE_OBJ_BYTES_MAX) {
			batch_fail(ops, n, GCS_INVALID, "object too large");
			goto unlock;
		}
		nfinal++;
	}
	if (nfinal == 0)
		goto unlock;
	if (buf_add(&rec, "]}", 2) != 0)
		goto nomem;
	rec_start = fs->wal_end;
	if (crash == GCS_FILE_CRASH_BEFORE_COMMIT) {
		wal_append(fs, rec.p, rec.n, 1, &err);
		goto die;
	}
	if (wal_append(fs, rec.p, rec.n, 0, &err) != GCS_OK) {
		batch_fail(ops, n, err.status, err.msg);
		goto unlock;
	}
	for (i = 0; i < n; i++) {
		file_op *op = ops[i];

		if (!op->final)
			continue;
		if (crash == GCS_FILE_CRASH_AFTER_COMMIT) {
			obj_write(fs, op->fname, rec.p + op->toff, op->tlen, 1,
			    &err);
			goto die;
		}
		if (obj_write(fs, op->fname, rec.p + op->toff, op->tlen, 0,
		        &err) != GCS_OK) {
			/* Committed but not applied: the next batch re-applies
			 * the record; callers get "unavailable" (the write may
			 * stand, as after a lost GCS response). */
			fs->wal_end = rec_start;
			cache_forget_all(fs);
			batch_fail(ops, n, err.status, err.msg);
			goto unlock;
		}
		json_object_set(fs->cache, op->fname,
		    op->state ? op->state : json_null());
		if (op->state == NULL)
			tomb_add(fs, op->fname, now_ms);
		else
			json_object_del(fs->tombs, op->fname);
	}
	for (i = 0; i < n; i++)
		if (ops[i]->ok && ops[i]->state != NULL)
			entry_to_object(ops[i]->state, now_ms, &ops[i]->out);
	if (fs->wal_end > FILE_WAL_CHECKPOINT)
		(void)wal_checkpoint(fs,
		    &err); /* retried after the next batch */
	else if (now_ms - fs->last_sweep_ms >= FILE_SWEEP_EVERY_MS)
		tomb_sweep(fs);
	goto unlock;
nomem:
	batch_fail(ops, n, GCS_NOMEM, "out of memory");
unlock:
	flock(fs->lockfd, LOCK_UN);
	goto out;
die:
	/* As if killed here: stop writing, drop the lock. */
	cache_forget_all(fs);
	pthread_mutex_lock(&fs->mu);
	fs->dead = 1;
	pthread_mutex_unlock(&fs->mu);
	pthread_mutex_lock(&fs->spare_mu);
	fs->spare_stop = 1;
	pthread_cond_signal(&fs->spare_cv);
	pthread_mutex_unlock(&fs->spare_mu);
	batch_fail(ops, n, GCS_UNAVAILABLE, "the store has stopped");
	flock(fs->lockfd, LOCK_UN);
out:
	free(rec.p);
}

/* Wait (up to FILE_GATHER_US) until QLEN ops are queued: the callers just
 * woken are about to queue their next op, and one sync for all of them
 * beats two for two halves.  Returns at once when nobody is expected. */
static void
gather(file_store *fs, size_t want)
{
	struct timespec dl;

	if (want > FILE_BATCH_MAX)
		want = FILE_BATCH_MAX;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_nsec += FILE_GATHER_US * 1000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	/* Woken once, when the last expected op is queued, not by each. */
	fs->wake_at = want;
	while (fs->qlen < want && !fs->stop)
		if (pthread_cond_timedwait(&fs->work, &fs->mu, &dl) != 0)
			break;
	fs->wake_at = 0;
}

static void *
committer_main(void *arg)
{
	file_store *fs = arg;
	file_op *batch[FILE_BATCH_MAX];
	size_t n = 0, i;

	pthread_mutex_lock(&fs->mu);
	for (;;) {
		if (n > 0 && fs->qlen > 0)
			gather(fs, fs->qlen + n);
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
		 * up on it; a semaphore cannot lose the wake-up. */
		for (i = 0; i < n; i++)
			sem_post(&batch[i]->done);
		pthread_mutex_lock(&fs->mu);
	}
	pthread_mutex_unlock(&fs->mu);
	return NULL;
}

/* Queue OP, wait for the committer, hand back the result. */
static int
submit(file_store *fs, file_op *op, gcs_object *out, gcs_err *err)
{
	int rc;

	/* Work that needs no lock is done here, in parallel, not by the
	 * committer. */
	if (name_encode(op->name, op->fname) != 0 || !utf8_ok(op->name))
		return gcs_fail(err, GCS_INVALID, "object name is not UTF-8");
	if (op->kind == OP_INSERT) {
		op->clean = gcs_meta_new(op->meta);
		if (op->clean == NULL)
			return gcs_fail(err, GCS_NOMEM, "out of memory");
		if (meta_too_big(op->clean)) {
			json_decref(op->clean);
			return gcs_fail(err, GCS_INVALID,
			    "metadata over %d bytes", GCS_META_BYTES_MAX);
		}
	}
	sem_init(&op->done, 0, 0);
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
	while (sem_wait(&op->done) != 0 && errno == EINTR)
		;
	sem_destroy(&op->done);
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

/* ---- the contract ---- */

static int
file_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	file_op op = { .kind = OP_INSERT, .name = name, .meta = metadata };

	return submit((file_store *)s, &op, out, err);
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

	return submit((file_store *)s, &op, out, err);
}

static int
file_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	file_op op = { .kind = OP_REMOVE,
		.name = name,
		.gen = gen,
		.metagen = metagen };

	return submit((file_store *)s, &op, NULL, err);
}

static int
file_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	file_store *fs = (file_store *)s;
	char fname[FILE_FNAME_BUF];
	json_t *e;
	int rc;

	if (name_encode(name, fname) != 0)
		return gcs_fail(err, GCS_INVALID, "bad name");
	rc = obj_read(fs, fname, &e, err);
	if (rc != GCS_OK)
		return rc;
	if (strcmp(json_string_value(json_object_get(e, "name")), name) != 0) {
		/* Read through a file that was a tombstone when opened and
		 * was recycled since: the object was absent then. */
		json_decref(e);
		return gcs_fail(err, GCS_NOT_FOUND, "no such object");
	}
	entry_to_object(e, fs->clock(fs->clock_ctx), out);
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

/* long: collect, sort and page the candidates with one cleanup path; split
 * pending (issue 21) */
static int
file_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	file_store *fs = (file_store *)s;
	file_cand *c = NULL, *nc;
	size_t n = 0, cap = 0, i, plen = strlen(prefix);
	char name[GCS_NAME_MAX + 1], fname[FILE_FNAME_BUF];
	struct dirent *de;
	DIR *d = NULL;
	json_t *e;
	int rc = GCS_OK, kind;

	if (page_token == NULL) /* our tokens are names too */
		page_token = after;
	d = dir_stream(fs);
	if (d == NULL)
		return gcs_fail(err, GCS_UNAVAILABLE, "read %s: %s", fs->dir,
		    strerror(errno));
	out->now_ms = fs->clock(fs->clock_ctx);
	while ((de = readdir(d)) != NULL) {
		kind = name_decode(de->d_name, name);
		if (kind < 0)
			continue;
		/* Only canonical encodings: get() of the name finds this file. */
		if (kind == 0 &&
		    (name_encode(name, fname) != 0 ||
		        strcmp(fname, de->d_name) != 0))
			continue;
		if (kind == 1) {
			/* Hashed long name: the file knows its name. */
			if (obj_read(fs, de->d_name, &e, NULL) != GCS_OK)
				continue;
			snprintf(name, sizeof(name), "%s",
			    json_string_value(json_object_get(e, "name")));
			json_decref(e);
		}
		if (strncmp(name, prefix, plen) != 0 ||
		    (page_token != NULL && strcmp(name, page_token) <= 0))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			nc = realloc(c, cap * sizeof(*c));
			if (nc == NULL)
				goto nomem;
			c = nc;
		}
		c[n].name = strdup(name);
		if (c[n].name == NULL)
			goto nomem;
		snprintf(c[n].fname, sizeof(c[n].fname), "%s", de->d_name);
		n++;
	}
	if (n > 0)
		qsort(c, n, sizeof(*c), cand_cmp);
	out->items = calloc((size_t)max, sizeof(*out->items));
	if (out->items == NULL)
		goto nomem;
	for (i = 0; i < n; i++) {
		gcs_entry *it;

		if (out->n == (size_t)max) {
			out->next_token = strdup(out->items[out->n - 1].name);
			if (out->next_token == NULL)
				goto nomem;
			break;
		}
		/* Gone since readdir (or recycled): skip it, the page stays
		 * full. */
		if (obj_read(fs, c[i].fname, &e, NULL) != GCS_OK)
			continue;
		if (strcmp(json_string_value(json_object_get(e, "name")),
		        c[i].name) != 0) {
			json_decref(e);
			continue;
		}
		it = &out->items[out->n];
		it->name = c[i].name;
		c[i].name = NULL;
		entry_to_object(e, out->now_ms, &it->obj);
		json_decref(e);
		out->n++;
	}
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
		return gcs_fail(err, GCS_UNAVAILABLE, "%s is not writable: %s",
		    fs->dir, strerror(errno));
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

/* long: open-time set-up in protocol order (directories, flock, recovery,
 * committer thread) with one unwind path */
gcs_store *
gcs_file_new_clock(const char *dir, gcs_clock_fn clock, void *clock_ctx,
    gcs_err *err)
{
	file_store *fs;
	gcs_err e = { 0 };
	pthread_condattr_t ca;
	size_t i;

	if (err == NULL)
		err = &e;
	if (dir == NULL || dir[0] == '\0') {
		gcs_fail(err, GCS_INVALID, "no store directory");
		return NULL;
	}
	fs = calloc(1, sizeof(*fs));
	if (fs == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		return NULL;
	}
	fs->base.ops = &file_ops;
	fs->dirfd = fs->lockfd = fs->walfd = -1;
	fs->clock = clock ? clock : gcs_clock_real;
	fs->clock_ctx = clock_ctx;
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
		goto fail;
	}
	if (mkdirs(dir, err) != GCS_OK)
		goto fail;
	fs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->dirfd < 0) {
		gcs_fail(err, GCS_UNAVAILABLE,
		    errno == ENOTDIR ? "store path %s is not a directory"
		                     : "cannot open store directory %s: %s",
		    dir, strerror(errno));
		goto fail;
	}
	fs->lockfd = openat(fs->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC,
	    FILE_MODE);
	if (fs->lockfd < 0) {
		gcs_fail(err, GCS_UNAVAILABLE,
		    "store directory %s is not writable: %s", dir,
		    strerror(errno));
		goto fail;
	}
	if (flock(fs->lockfd, LOCK_EX) != 0) {
		gcs_fail(err, GCS_UNAVAILABLE,
		    "cannot lock %s/" LOCK_NAME ": %s", dir, strerror(errno));
		goto fail;
	}
	if (recover(fs, err) != GCS_OK) {
		flock(fs->lockfd, LOCK_UN);
		goto fail;
	}
	flock(fs->lockfd, LOCK_UN);
	if (pthread_create(&fs->committer, NULL, committer_main, fs) != 0) {
		gcs_fail(err, GCS_UNAVAILABLE, "cannot start the committer");
		goto fail;
	}
	fs->started = 1;
	if (pthread_create(&fs->spare_maker, NULL, spare_main, fs) != 0) {
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
