/*
 * store_file_int.h: what the files of the file:// store share (store_file.c,
 * file_objects.c, file_spares.c, file_log.c, file_commit.c), and nothing
 * else includes.  The on-disk layout and the commit protocol these files
 * implement are described at the top of store_file.c.
 */
#ifndef LOCKGATE_STORE_FILE_INT_H
#define LOCKGATE_STORE_FILE_INT_H

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "gcs.h"
#include "rt/rt.h"
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
	rt_waiter done; /* woken by the committer when the op is decided */
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
	int prealloc; /* zeros ahead in a new log, spare files (gcs_settings) */

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

/* A growable string for the record text. */
typedef struct file_buf {
	char *p;
	size_t n, cap;
} file_buf;

static inline void
stat_add(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

/* store_file.c */
/* A failure of the store's own files in doing WHAT (printf-style, e.g.
 * "append to its log"): GCS_UNAVAILABLE, with "the local store could not
 * WHAT" for callers, and for the operator's log (err->detail) also why
 * (WHY: errno's text, or what was wrong) and where (DIR/FILE; the
 * directory itself when FILE is NULL).  A caller learns what failed,
 * never the host's layout (gcs.h, gcs_err).  ERR may be NULL. */
int
file_fail(const file_store *fs, gcs_err *err, const char *file, const char *why,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* file_objects.c */
int file_name_encode(const char *name, char *out);
int file_name_decode(const char *fname, char *out);
int file_entry_exists(const json_t *e);
int64_t file_entry_int(const json_t *e, const char *key);
int file_entry_valid(const json_t *e);
void file_entry_to_object(const json_t *e, int64_t now_ms, gcs_object *out);
uint32_t file_crc32_buf(const unsigned char *p, size_t n);
int file_obj_read_once(file_store *fs, const char *fname, char *buf,
    json_t **entry);
/* NAME, the object's, is only for messages (NULL: a read that wants none). */
int file_obj_read(file_store *fs, const char *name, const char *fname,
    json_t **entry, gcs_err *err);
int file_pwrite_all(int fd, const void *buf, size_t n, off_t off);
void file_fd_forget(file_store *fs, const char *fname);
void file_cache_forget_all(file_store *fs);
int file_obj_write(file_store *fs, const char *name, const char *fname,
    const char *text, size_t tlen, int torn, gcs_err *err);
int file_buf_add(file_buf *b, const char *s, size_t n);
int file_put_entry(file_buf *b, const char *name, const json_t *entry,
    int64_t deleted_ms);
int file_meta_too_big(const json_t *meta);
int file_entry_apply(file_store *fs, const json_t *entry, gcs_err *err);

/* file_spares.c */
int file_spare_push(file_store *fs, char *name);
int file_spare_take(file_store *fs, const char *fname);
void *file_spare_main(void *arg);
void file_tomb_add(file_store *fs, const char *fname, int64_t ms);
void file_tomb_sweep(file_store *fs);

/* file_log.c */
int file_zero_fill(int fd, off_t from, off_t to);
int file_wal_open(file_store *fs, gcs_err *err);
int file_wal_catch_up(file_store *fs, gcs_err *err);
int file_wal_checkpoint(file_store *fs, gcs_err *err);
DIR *file_dir_stream(file_store *fs);
int file_recover(file_store *fs, gcs_err *err);

/* file_commit.c */
void *file_committer_main(void *arg);
int file_submit(file_store *fs, file_op *op, gcs_object *out, gcs_err *err);

#endif
