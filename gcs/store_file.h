/*
 * store_file.h: test and benchmark hooks of the file:// store.  The store
 * itself is opened with gcs_file_new() (gcs.h); nothing here is needed to
 * use it.
 */
#ifndef LOCKGATE_STORE_FILE_H
#define LOCKGATE_STORE_FILE_H

#include <stdint.h>

#include "gcs.h"

/* A released name keeps its file (a tombstone) this long, so that taking
 * it again costs no new file; older tombstones become spare files for new
 * names. */
#define GCS_FILE_TOMB_KEEP_MS 200

/* Where the committer stops "as if killed" (it releases DIR/.lock as a dead
 * process would, answers GCS_UNAVAILABLE, and the store refuses every later
 * write).  Used to check crash recovery by reopening DIR in a new store. */
typedef enum gcs_file_crash {
	GCS_FILE_CRASH_NONE = 0,
	/* Half a commit record appended, not synced, no object file
	 * touched: reopening must show the OLD state. */
	GCS_FILE_CRASH_BEFORE_COMMIT,
	/* Commit record durable, then killed half way through rewriting the
	 * first object file: readers get GCS_UNAVAILABLE for that object
	 * (never a torn state); reopening, or the next write of any store on
	 * DIR, must show the NEW state. */
	GCS_FILE_CRASH_AFTER_COMMIT,
} gcs_file_crash;

/* Arm a crash point for the next batch of writes of S (a file:// store). */
void gcs_file_set_crash_point(gcs_store *s, gcs_file_crash point);

/* Counters of one file:// store, for tests and benchmarks. */
typedef struct gcs_file_stats {
	uint64_t ops;           /* writes that went through the committer */
	uint64_t batches;       /* batches committed (each under one flock) */
	uint64_t syncs;         /* fdatasync/fsync/syncfs calls made */
	uint64_t checkpoints;   /* log truncations (syncfs + new log) */
	uint64_t files_created; /* object files created on the write path */
	uint64_t spares_used;   /* new names given a ready spare file */
	uint64_t recycled;      /* old tombstones turned into spare files */
} gcs_file_stats;

void gcs_file_stats_get(gcs_store *s, gcs_file_stats *out);

/* gcs_file_new with a replaceable store clock (milliseconds).  CLOCK NULL
 * means CLOCK_REALTIME.  Used to prove that generations keep increasing
 * when the clock goes backwards. */
gcs_store *gcs_file_new_clock(const char *dir, gcs_clock_fn clock,
    void *clock_ctx, gcs_err *err);

#endif
