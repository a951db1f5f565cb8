/*
 * store_file_bench.c: raw throughput of the file:// store, without HTTP.
 *
 *   build/bench/store_file_bench [DIR|-] [THREADS] [SECONDS] [LIST_OBJECTS]
 *       [fresh]
 *
 * THREADS callers (default 64) each loop insert+remove on a lock name of
 * their own for SECONDS (default 3); prints cycles/s, durable writes/s and
 * the batching achieved.  With "fresh", every cycle uses a new name.  Then fills LIST_OBJECTS (default 10000) objects
 * and times list pages of 1000.  DIR defaults to a fresh temp directory,
 * removed at the end.
 */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gcs/store_file.h"

#define BENCH_THREADS_MAX 1024
#define BENCH_PATH        1024
#define BENCH_PROBES      50

typedef struct worker {
	gcs_store *s;
	int id;
	int mode; /* 0 = cycle until stop, 1 = fill `fill` objects */
	int fill;
	long cycles, errors;
} worker;

static volatile int stop_flag;
static int fresh_names;

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *
work(void *arg)
{
	worker *w = arg;
	char name[64];
	json_t *m = json_pack("{s:s, s:s, s:s}", "lease_id",
	    "0123456789abcdef0123456789abcdef", "owner", "bench", "ttl", "30");
	gcs_object o;
	gcs_err err;
	int i;

	if (w->mode == 1) {
		for (i = 0; i < w->fill; i++) {
			snprintf(name, sizeof(name), "fill/%03d/%05d", w->id,
			    i);
			if (gcs_insert(w->s, name, m, &o, &err) != GCS_OK)
				w->errors++;
			gcs_object_clear(&o);
		}
		json_decref(m);
		return NULL;
	}
	snprintf(name, sizeof(name), "bench/%d", w->id);
	for (i = 0; !__atomic_load_n(&stop_flag, __ATOMIC_RELAXED); i++) {
		if (fresh_names)
			snprintf(name, sizeof(name), "bench/%d/%d", w->id, i);
		if (gcs_insert(w->s, name, m, &o, &err) != GCS_OK) {
			w->errors++;
			continue;
		}
		if (gcs_remove(w->s, name, o.generation, 1, &err) != GCS_OK)
			w->errors++;
		else
			w->cycles++;
		gcs_object_clear(&o);
	}
	json_decref(m);
	return NULL;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median latency of appending 256 bytes + fdatasync in DIR: the floor
 * under any durable write on this disk right now. */
static double
fsync_probe(const char *dir)
{
	char path[BENCH_PATH + 32], buf[256];
	double lat[BENCH_PROBES], t0;
	int fd, i;

	snprintf(path, sizeof(path), "%s/.bench-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	if (fd < 0)
		return -1;
	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < BENCH_PROBES; i++) {
		t0 = mono();
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    fdatasync(fd) != 0)
			break;
		lat[i] = mono() - t0;
	}
	close(fd);
	unlink(path);
	if (i < BENCH_PROBES)
		return -1;
	qsort(lat, BENCH_PROBES, sizeof(lat[0]), cmp_double);
	return lat[BENCH_PROBES / 2];
}

static int
run(gcs_store *s, int threads, int mode, int fill, double seconds, long *cycles,
    long *errors)
{
	static pthread_t th[BENCH_THREADS_MAX];
	static worker w[BENCH_THREADS_MAX];
	struct timespec ts;
	int i;

	stop_flag = 0;
	for (i = 0; i < threads; i++) {
		w[i] = (worker){ .s = s, .id = i, .mode = mode, .fill = fill };
		if (pthread_create(&th[i], NULL, work, &w[i]) != 0)
			return -1;
	}
	if (mode == 0) {
		ts.tv_sec = (time_t)seconds;
		ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
		__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	}
	*cycles = *errors = 0;
	for (i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		*cycles += w[i].cycles;
		*errors += w[i].errors;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	char dir[BENCH_PATH];
	int threads = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 64;
	double seconds = argc > 3 ? strtod(argv[3], NULL) : 3.0;
	int list_objects = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 10000;
	int own_dir = argc <= 1 || strcmp(argv[1], "-") == 0;
	fresh_names = argc > 5 && strcmp(argv[5], "fresh") == 0;
	gcs_file_stats a, b;
	gcs_store *s;
	gcs_page pg;
	gcs_err err;
	long cycles, errors;
	double t0, t, worst = 0;
	char *token = NULL;
	size_t total = 0;
	int pages = 0;

	if (threads < 1 || threads > BENCH_THREADS_MAX || seconds <= 0 ||
	    list_objects < 0) {
		fprintf(stderr,
		    "usage: %s [DIR|-] [THREADS] [SECONDS] "
		    "[LIST_OBJECTS]\n",
		    argv[0]);
		return 2;
	}
	if (own_dir) {
		snprintf(dir, sizeof(dir), "/tmp/lockgate-bench-XXXXXX");
		if (mkdtemp(dir) == NULL) {
			perror("mkdtemp");
			return 1;
		}
	} else {
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	}
	s = gcs_file_new(dir, &err);
	if (s == NULL) {
		fprintf(stderr, "open %s: %s\n", dir, err.msg);
		return 1;
	}
	printf("disk: append+fdatasync median %.0f us (before)\n",
	    fsync_probe(dir) * 1e6);
	gcs_file_stats_get(s, &a);
	t0 = mono();
	if (run(s, threads, 0, 0, seconds, &cycles, &errors) != 0)
		return 1;
	t = mono() - t0;
	gcs_file_stats_get(s, &b);
	printf("file store, %s names, %d threads, %.1f s: %.0f insert+remove "
	       "cycles/s "
	       "(%.0f durable writes/s), %ld errors\n",
	    fresh_names ? "fresh" : "reused", threads, t, (double)cycles / t,
	    2.0 * (double)cycles / t, errors);
	printf("  %llu ops in %llu batches (%.1f ops/batch), %llu syncs, "
	       "%llu checkpoints\n",
	    (unsigned long long)(b.ops - a.ops),
	    (unsigned long long)(b.batches - a.batches),
	    (double)(b.ops - a.ops) /
	        (double)(b.batches - a.batches + !(b.batches - a.batches)),
	    (unsigned long long)(b.syncs - a.syncs),
	    (unsigned long long)(b.checkpoints - a.checkpoints));
	printf("  files created %llu, spares used %llu, tombstones recycled "
	       "%llu\n",
	    (unsigned long long)(b.files_created - a.files_created),
	    (unsigned long long)(b.spares_used - a.spares_used),
	    (unsigned long long)(b.recycled - a.recycled));

	printf("disk: append+fdatasync median %.0f us (after)\n",
	    fsync_probe(dir) * 1e6);
	if (list_objects > 0) {
		int per = (list_objects + threads - 1) / threads;

		t0 = mono();
		run(s, threads, 1, per, 0, &cycles, &errors);
		printf("filled %d objects in %.2f s (%ld errors)\n",
		    per * threads, mono() - t0, errors);
		t0 = mono();
		do {
			double p0 = mono(), dt;

			if (gcs_list(s, "fill/", 1000, token, &pg, &err) !=
			    GCS_OK) {
				fprintf(stderr, "list: %s\n", err.msg);
				break;
			}
			dt = mono() - p0;
			if (dt > worst)
				worst = dt;
			pages++;
			total += pg.n;
			free(token);
			token = pg.next_token ? strdup(pg.next_token) : NULL;
			gcs_page_clear(&pg);
		} while (token != NULL);
		printf("listed %zu objects in %d pages of 1000: %.1f ms total, "
		       "slowest page %.1f ms\n",
		    total, pages, (mono() - t0) * 1e3, worst * 1e3);
		t0 = mono();
		if (gcs_list(s, "fill/000/", 10, NULL, &pg, &err) == GCS_OK) {
			printf("one page of 10 among %zu objects: %.1f ms\n",
			    total, (mono() - t0) * 1e3);
			gcs_page_clear(&pg);
		}
	}
	gcs_store_free(s);
	if (own_dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
