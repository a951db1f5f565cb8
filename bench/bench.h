/*
 * bench.h: the plumbing bench/loadgen.c and bench/storage_floor.c share:
 * the clock, the common options, the record of the measured latencies and
 * the one result line that bench/run.sh reads with awk.
 *
 * Static functions: each benchmark is one .c file built on its own (the
 * Makefile's build/bench/% rule), so there is no object to link.  Both
 * programs use every function here; a program that includes this header
 * without using one of them gets a -Wunused-function warning.  Each
 * program's own limits stay in the program and are passed in.
 */
#ifndef LOCKGATE_BENCH_H
#define LOCKGATE_BENCH_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_LABEL_MAX 64    /* bytes of --label, with its NUL */
#define BENCH_PORT_MAX  65535 /* --port */

/* The options both benchmarks take.  The caller sets its defaults before
 * bench_parse_args; port stays 0 until given. */
typedef struct bench_opts {
	int port;                    /* --port: of 127.0.0.1, required */
	int clients;                 /* --clients */
	int seconds;                 /* --seconds: the measured window */
	int warmup_ms;               /* --warmup: before the window */
	char label[BENCH_LABEL_MAX]; /* --label: first field of the line */
} bench_opts;

/* The latencies of the measured cycles in µs, in an array that grows on
 * demand (see bench_record).  Set up with bench_lat_init; the caller
 * frees us. */
typedef struct bench_lat {
	uint32_t *us; /* owned, NULL until the first cycle kept */
	size_t n, cap;
	size_t init, max; /* slots first allocated, slots at most */
} bench_lat;

/* What the result line of a run says. */
typedef struct bench_result {
	const char *label;
	int clients, threads;
	int64_t window_ns;   /* length of the measured window */
	const uint32_t *lat; /* borrowed, sorted ascending (bench_cmp_u32) */
	size_t cycles;       /* latencies at lat, at least 1 */
	uint64_t errors;
	double cpu_us; /* CPU time over the window in µs; < 0: not known */
} bench_result;

/* Nanoseconds of CLOCK_MONOTONIC: only differences mean anything. */
static int64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* S as a whole decimal number in MIN..MAX into *OUT: 0, or -1 (and *OUT
 * untouched) when S is empty, has anything after the digits, overflows
 * or is out of bounds. */
static int
bench_parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* ARGV[1..] as "--key value" pairs into O: --port 1..BENCH_PORT_MAX,
 * --clients 1..CLIENTS_MAX, --seconds 1..SECONDS_MAX, --warmup (ms)
 * 0..SECONDS_MAX * 1000, --label (shorter than BENCH_LABEL_MAX, no space,
 * for run.sh splits the line on them).  Any other key goes with its value
 * to EXTRA, which returns 0 when it took the pair, -1 otherwise; NULL
 * takes none.  What is not given keeps the caller's default.  0, or -1 on
 * an unknown key, a bad value, a key without a value or no --port (O is
 * then partly filled). */
static int
bench_parse_args(int argc, char **argv, bench_opts *o, long clients_max,
    long seconds_max, int (*extra)(const char *key, const char *val))
{
	long v;
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *a = argv[i + 1];

		if (strcmp(k, "--port") == 0 &&
		    bench_parse_int(a, 1, BENCH_PORT_MAX, &v) == 0)
			o->port = (int)v;
		else if (strcmp(k, "--clients") == 0 &&
		    bench_parse_int(a, 1, clients_max, &v) == 0)
			o->clients = (int)v;
		else if (strcmp(k, "--seconds") == 0 &&
		    bench_parse_int(a, 1, seconds_max, &v) == 0)
			o->seconds = (int)v;
		else if (strcmp(k, "--warmup") == 0 &&
		    bench_parse_int(a, 0, seconds_max * 1000, &v) == 0)
			o->warmup_ms = (int)v;
		else if (strcmp(k, "--label") == 0 &&
		    strlen(a) < sizeof(o->label) && strchr(a, ' ') == NULL)
			snprintf(o->label, sizeof(o->label), "%s", a);
		else if (extra == NULL || extra(k, a) != 0)
			return -1;
	}
	if (i != argc || o->port == 0)
		return -1;
	return 0;
}

/* An empty record that first allocates INIT slots (> 0) and holds MAX
 * at most. */
static void
bench_lat_init(bench_lat *l, size_t init, size_t max)
{
	memset(l, 0, sizeof(*l));
	l->init = init;
	l->max = max;
}

/* Keep the latency of a cycle from START_NS to END_NS when the cycle ENDS
 * inside the measured window [WIN_START_NS, WIN_END_NS) (one that started
 * in the warm-up counts; one that ends after the window does not).  The
 * array doubles when full; a cycle is dropped, quietly, once it holds
 * l->max or when it cannot grow (the percentiles come from the cycles
 * kept).  A latency of UINT32_MAX µs or more is kept as UINT32_MAX. */
static void
bench_record(bench_lat *l, int64_t win_start_ns, int64_t win_end_ns,
    int64_t start_ns, int64_t end_ns)
{
	uint32_t *grown;
	size_t cap;
	int64_t us;

	if (end_ns < win_start_ns || end_ns >= win_end_ns)
		return;
	if (l->n == l->cap) {
		if (l->cap >= l->max)
			return;
		cap = l->cap ? l->cap * 2 : l->init;
		if ((grown = realloc(l->us, cap * sizeof(*grown))) == NULL)
			return;
		l->us = grown;
		l->cap = cap;
	}
	us = (end_ns - start_ns) / 1000;
	l->us[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* qsort's comparator for uint32_t, ascending. */
static int
bench_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The PCT-th percentile (0..100) of the N >= 1 values at SORTED, sorted
 * ascending: the value of rank (N - 1) * PCT / 100, rounded down. */
static uint32_t
bench_percentile(const uint32_t *sorted, size_t n, size_t pct)
{
	return sorted[(n - 1) * pct / 100];
}

/* The one line of a run on stdout, which bench/run.sh parses with awk
 * (keep the keys, their order and their formats):
 *   label=L clients=C threads=T seconds=D cycles=N cycles_per_s=X
 *   p50_us=P p99_us=Q errors=E cpu_us_per_cycle=U
 * U is R->cpu_us / N with one decimal, "-" when R->cpu_us < 0.  The caller
 * flushes. */
static void
bench_print_result(const bench_result *r)
{
	double secs = (double)r->window_ns / 1e9;
	char cpu_text[32];

	if (r->cpu_us >= 0)
		snprintf(cpu_text, sizeof(cpu_text), "%.1f",
		    r->cpu_us / (double)r->cycles);
	else
		snprintf(cpu_text, sizeof(cpu_text), "-");
	printf("label=%s clients=%d threads=%d seconds=%.2f cycles=%zu "
	       "cycles_per_s=%.0f p50_us=%u p99_us=%u errors=%" PRIu64
	       " cpu_us_per_cycle=%s\n",
	    r->label, r->clients, r->threads, secs, r->cycles,
	    (double)r->cycles / secs, bench_percentile(r->lat, r->cycles, 50),
	    bench_percentile(r->lat, r->cycles, 99), r->errors, cpu_text);
}

#endif
