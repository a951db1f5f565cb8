/*
 * metrics.c: the Prometheus registry of lockgate.
 *
 * Every series lives in a fixed, statically allocated array indexed by
 * label, so recording is one or two relaxed atomic adds and nothing else:
 * no lock, no allocation, no hash table.  A histogram keeps one
 * non-cumulative counter per bucket (the last one is +Inf) and a sum in
 * nanoseconds; metrics_render() turns the buckets cumulative and derives
 * _count from them, so _bucket{le="+Inf"} == _count holds in every scrape
 * even while other threads record.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "srv.h" /* LOCKGATE_VERSION */

/* Limits of the registry. */
#define METRICS_STATUS_MIN       100 /* lowest HTTP status kept apart */
#define METRICS_STATUS_MAX       599 /* highest HTTP status kept apart */
#define METRICS_STATUS_SLOTS     (METRICS_STATUS_MAX - METRICS_STATUS_MIN + 2)
#define METRICS_STATUS_OTHER     (METRICS_STATUS_SLOTS - 1)
#define METRICS_HIST_BUCKETS_MAX 16    /* finite buckets of one histogram */
#define METRICS_OBSERVE_MAX_S    1e6   /* larger observations are clamped */
#define METRICS_RENDER_INITIAL   16384 /* first size of the render buffer */
#define METRICS_NS_PER_S         1e9

/* Fixed label sets; the last entry of each is "other". */
static const char *const route_names[] = {
	"acquire",
	"refresh",
	"release",
	"force_release",
	"inspect",
	"list",
	"whoami",
	"healthz",
	"readyz",
	"metrics",
	"asset",
	"other",
};
#define N_ROUTES (sizeof(route_names) / sizeof(route_names[0]))

static const char *const outcome_names[] = {
	"granted",
	"conflict",
	"lost",
	"expired_takeover",
	"forced",
	"released",
	"refreshed",
	"abandoned",
	"too_many_waiters",
	"other",
};
#define N_OUTCOMES (sizeof(outcome_names) / sizeof(outcome_names[0]))

static const char *const op_names[] = {
	"insert",
	"get",
	"patch",
	"delete",
	"list",
	"check",
	"other",
};
#define N_OPS (sizeof(op_names) / sizeof(op_names[0]))

static const char *const store_status_names[] = {
	"ok",
	"not_found",
	"precondition_failed",
	"busy",
	"unavailable",
	"denied",
	"invalid",
	"nomem",
	"other",
};
#define N_STORE_STATUSES \
	(sizeof(store_status_names) / sizeof(store_status_names[0]))

/* Upper bounds (le) of the finite buckets, in seconds. */
static const double http_le[] = {
	0.001,
	0.0025,
	0.005,
	0.01,
	0.025,
	0.05,
	0.1,
	0.25,
	0.5,
	1,
	2.5,
	5,
	10,
	30,
	60,
	300,
};
static const double wait_le[] = {
	0.01,
	0.05,
	0.1,
	0.25,
	0.5,
	1,
	2.5,
	5,
	10,
	30,
	60,
	120,
	300,
};
static const double store_le[] = {
	0.001,
	0.0025,
	0.005,
	0.01,
	0.025,
	0.05,
	0.1,
	0.25,
	0.5,
	1,
	2.5,
	5,
	10,
	30,
};

typedef struct hist_def {
	const double *le;
	size_t n; /* finite buckets, <= METRICS_HIST_BUCKETS_MAX */
} hist_def;

#define HIST_DEF(a) \
	{ \
		(a), sizeof(a) / sizeof((a)[0]) \
	}
static const hist_def http_hist_def = HIST_DEF(http_le);
static const hist_def wait_hist_def = HIST_DEF(wait_le);
static const hist_def store_hist_def = HIST_DEF(store_le);

typedef struct hist {
	uint64_t bucket[METRICS_HIST_BUCKETS_MAX + 1]; /* [n] is +Inf */
	uint64_t sum_ns;
} hist;

/* The registry. */
static uint64_t http_count[N_ROUTES][METRICS_STATUS_SLOTS];
static hist http_hist[N_ROUTES];
static uint64_t outcome_count[N_OUTCOMES];
/* Grants and waits by the kind of lease asked for (api_mode and limit). */
static const char *const mode_names[] = { "exclusive", "shared", "semaphore" };
#define N_MODES (sizeof(mode_names) / sizeof(mode_names[0]))
static uint64_t grant_count[N_MODES], wait_count[N_MODES];
static hist wait_hist;
static int64_t waiters;
static uint64_t slow_heads;    /* connections closed for a slow head */
static uint64_t conns_refused; /* answered 503 over the limit */
static uint64_t waiters_gone;  /* waiters whose client left */
static uint64_t heads_dropped; /* closed by the client mid-head */
static uint64_t store_count[N_OPS][N_STORE_STATUSES];
static hist store_hist[N_OPS];
static double start_time_s;

static void start_time_init(void) __attribute__((constructor));

static void
start_time_init(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	start_time_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
add(uint64_t *p, uint64_t v)
{
	__atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static uint64_t
load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Index of NAME in NAMES[0..n-1], the last ("other") when absent. */
static size_t
label_index(const char *const *names, size_t n, const char *name)
{
	size_t i;

	if (name != NULL)
		for (i = 0; i + 1 < n; i++)
			if (strcmp(names[i], name) == 0)
				return i;
	return n - 1;
}

static size_t
route_index(const char *route)
{
	/* The API verb spelling of the admin route. */
	if (route != NULL && strcmp(route, "forceRelease") == 0)
		route = "force_release";
	return label_index(route_names, N_ROUTES, route);
}

/* NaN and negative durations count as 0, absurd ones are clamped, so one
 * bad clock reading cannot poison a sum. */
static double
sane_seconds(double s)
{
	if (!(s >= 0))
		return 0;
	if (s > METRICS_OBSERVE_MAX_S)
		return METRICS_OBSERVE_MAX_S;
	return s;
}

static void
hist_observe(hist *h, const hist_def *d, double seconds)
{
	size_t i;

	seconds = sane_seconds(seconds);
	for (i = 0; i < d->n; i++)
		if (seconds <= d->le[i])
			break;
	add(&h->bucket[i], 1);
	add(&h->sum_ns, (uint64_t)llround(seconds * METRICS_NS_PER_S));
}

void
metrics_http(const char *route, int status, double seconds)
{
	size_t r = route_index(route);
	size_t s = METRICS_STATUS_OTHER;

	if (status >= METRICS_STATUS_MIN && status <= METRICS_STATUS_MAX)
		s = (size_t)(status - METRICS_STATUS_MIN);
	add(&http_count[r][s], 1);
	hist_observe(&http_hist[r], &http_hist_def, seconds);
}

void
metrics_lock_outcome(const char *outcome)
{
	add(&outcome_count[label_index(outcome_names, N_OUTCOMES, outcome)], 1);
}

static size_t
mode_index(api_mode mode, int limit)
{
	return mode == API_MODE_SHARED ? 1 : limit > 1 ? 2 : 0;
}

void
metrics_grant(api_mode mode, int limit)
{
	add(&grant_count[mode_index(mode, limit)], 1);
}

void
metrics_wait_start(api_mode mode, int limit)
{
	add(&wait_count[mode_index(mode, limit)], 1);
}

void
metrics_wait_observe(double seconds)
{
	hist_observe(&wait_hist, &wait_hist_def, seconds);
}

void
metrics_slow_heads(unsigned n)
{
	add(&slow_heads, n);
}

void
metrics_conns_refused(unsigned n)
{
	add(&conns_refused, n);
}

void
metrics_waiters_abandoned(unsigned n)
{
	add(&waiters_gone, n);
}

void
metrics_heads_dropped(unsigned n)
{
	add(&heads_dropped, n);
}

void
metrics_waiters_add(int delta)
{
	__atomic_add_fetch(&waiters, (int64_t)delta, __ATOMIC_RELAXED);
}

void
metrics_store_call(const char *op, const char *status, double seconds)
{
	size_t o = label_index(op_names, N_OPS, op);
	size_t s = label_index(store_status_names, N_STORE_STATUSES, status);

	add(&store_count[o][s], 1);
	hist_observe(&store_hist[o], &store_hist_def, seconds);
}

/* A growing text buffer; after a failed allocation every append is a
 * no-op and buf_finish() returns NULL. */
typedef struct buf {
	char *p;
	size_t len, cap;
	int oom;
} buf;

static void
buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
buf_printf(buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t need, ncap;
	char *np;
	int n;

	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		goto fail;
	need = b->len + (size_t)n + 1;
	if (need > b->cap) {
		ncap = b->cap * 2;
		while (ncap < need)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (np == NULL)
			goto fail;
		b->p = np;
		b->cap = ncap;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
	return;
fail:
	b->oom = 1;
}

static void
family(buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram series.  LABELS is "" or `key="value",` (with the comma),
 * put in front of le. */
static void
render_hist(buf *b, const char *name, const char *labels, const hist *h,
    const hist_def *d)
{
	uint64_t cum = 0;
	size_t i;
	size_t nl = strlen(labels);

	for (i = 0; i <= d->n; i++) {
		cum += load(&h->bucket[i]);
		if (i < d->n)
			buf_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name,
			    labels, d->le[i], (unsigned long long)cum);
		else
			buf_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name,
			    labels, (unsigned long long)cum);
	}
	/* _sum and _count take the labels without the trailing comma. */
	if (nl > 0) {
		buf_printf(b, "%s_sum{%.*s} %.9f\n", name, (int)(nl - 1),
		    labels, (double)load(&h->sum_ns) / METRICS_NS_PER_S);
		buf_printf(b, "%s_count{%.*s} %llu\n", name, (int)(nl - 1),
		    labels, (unsigned long long)cum);
	} else {
		buf_printf(b, "%s_sum %.9f\n", name,
		    (double)load(&h->sum_ns) / METRICS_NS_PER_S);
		buf_printf(b, "%s_count %llu\n", name, (unsigned long long)cum);
	}
}

static uint64_t
hist_total(const hist *h, const hist_def *d)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i <= d->n; i++)
		n += load(&h->bucket[i]);
	return n;
}

static void
render_http(buf *b)
{
	char labels[64];
	uint64_t v;
	size_t r, s;

	family(b, "lockgate_http_requests_total", "counter",
	    "HTTP requests answered, by route and status.");
	for (r = 0; r < N_ROUTES; r++)
		for (s = 0; s < METRICS_STATUS_SLOTS; s++) {
			v = load(&http_count[r][s]);
			if (v == 0)
				continue;
			if (s == METRICS_STATUS_OTHER)
				buf_printf(b,
				    "lockgate_http_requests_total"
				    "{route=\"%s\",status=\"other\"} %llu\n",
				    route_names[r], (unsigned long long)v);
			else
				buf_printf(b,
				    "lockgate_http_requests_total"
				    "{route=\"%s\",status=\"%d\"} %llu\n",
				    route_names[r], (int)s + METRICS_STATUS_MIN,
				    (unsigned long long)v);
		}
	family(b, "lockgate_http_request_duration_seconds", "histogram",
	    "Time from a request's arrival to its answer, long polls "
	    "included.");
	for (r = 0; r < N_ROUTES; r++) {
		if (hist_total(&http_hist[r], &http_hist_def) == 0)
			continue;
		snprintf(labels, sizeof(labels), "route=\"%s\",",
		    route_names[r]);
		render_hist(b, "lockgate_http_request_duration_seconds", labels,
		    &http_hist[r], &http_hist_def);
	}
}

static void
render_locks(buf *b)
{
	int64_t w;
	size_t i;
	uint64_t v;

	family(b, "lockgate_lock_outcomes_total", "counter",
	    "Lock operations by outcome.");
	for (i = 0; i < N_OUTCOMES; i++) {
		v = load(&outcome_count[i]);
		if (i + 1 == N_OUTCOMES && v == 0)
			continue; /* "other" only when something fell there */
		buf_printf(b,
		    "lockgate_lock_outcomes_total{outcome=\"%s\"} %llu\n",
		    outcome_names[i], (unsigned long long)v);
	}
	family(b, "lockgate_wait_duration_seconds", "histogram",
	    "Time acquire requests spent waiting for a lock, whatever the "
	    "end.");
	render_hist(b, "lockgate_wait_duration_seconds", "", &wait_hist,
	    &wait_hist_def);
	w = __atomic_load_n(&waiters, __ATOMIC_RELAXED);
	family(b, "lockgate_grants_total", "counter",
	    "Acquires answered with a lease, by the kind of lease.");
	for (i = 0; i < N_MODES; i++)
		buf_printf(b, "lockgate_grants_total{mode=\"%s\"} %llu\n",
		    mode_names[i], (unsigned long long)load(&grant_count[i]));
	family(b, "lockgate_waits_total", "counter",
	    "Acquires that began to wait, by the kind of lease.");
	for (i = 0; i < N_MODES; i++)
		buf_printf(b, "lockgate_waits_total{mode=\"%s\"} %llu\n",
		    mode_names[i], (unsigned long long)load(&wait_count[i]));
	family(b, "lockgate_waiters", "gauge",
	    "Acquire requests waiting for a lock right now.");
	buf_printf(b, "lockgate_waiters %lld\n", (long long)(w < 0 ? 0 : w));
	family(b, "lockgate_slow_heads_closed_total", "counter",
	    "Connections closed because their request head took longer than "
	    "the head timeout.");
	buf_printf(b, "lockgate_slow_heads_closed_total %llu\n",
	    (unsigned long long)load(&slow_heads));
	family(b, "lockgate_connections_refused_total", "counter",
	    "Connections answered 503 at once: the connection limit was "
	    "reached.");
	buf_printf(b, "lockgate_connections_refused_total %llu\n",
	    (unsigned long long)load(&conns_refused));
	family(b, "lockgate_waiters_abandoned_total", "counter",
	    "Waiting acquires whose client left before their answer.");
	buf_printf(b, "lockgate_waiters_abandoned_total %llu\n",
	    (unsigned long long)load(&waiters_gone));
	family(b, "lockgate_heads_dropped_total", "counter",
	    "Connections their client closed with a request head pending "
	    "(a new connection before its first head was in, or a kept one "
	    "in the middle of its next).");
	buf_printf(b, "lockgate_heads_dropped_total %llu\n",
	    (unsigned long long)load(&heads_dropped));
}

static void
render_store(buf *b)
{
	char labels[64];
	gcs_stats st;
	uint64_t v;
	size_t o, s;

	family(b, "lockgate_storage_requests_total", "counter",
	    "Store calls by operation and outcome (retries inside one call "
	    "count once).");
	for (o = 0; o < N_OPS; o++)
		for (s = 0; s < N_STORE_STATUSES; s++) {
			v = load(&store_count[o][s]);
			if (v == 0)
				continue;
			buf_printf(b,
			    "lockgate_storage_requests_total"
			    "{op=\"%s\",status=\"%s\"} %llu\n",
			    op_names[o], store_status_names[s],
			    (unsigned long long)v);
		}
	family(b, "lockgate_storage_request_duration_seconds", "histogram",
	    "Latency of store calls by operation, retries included.");
	for (o = 0; o < N_OPS; o++) {
		if (hist_total(&store_hist[o], &store_hist_def) == 0)
			continue;
		snprintf(labels, sizeof(labels), "op=\"%s\",", op_names[o]);
		render_hist(b, "lockgate_storage_request_duration_seconds",
		    labels, &store_hist[o], &store_hist_def);
	}
	gcs_stats_get(&st);
	family(b, "lockgate_storage_retries_total", "counter",
	    "Store requests retried after 408, 429, 5xx or a transport error.");
	buf_printf(b, "lockgate_storage_retries_total %llu\n",
	    (unsigned long long)st.retries);
	family(b, "lockgate_storage_token_fetches_total", "counter",
	    "Access token fetches for the store, by result.");
	buf_printf(b,
	    "lockgate_storage_token_fetches_total{result=\"ok\"} "
	    "%llu\n",
	    (unsigned long long)st.token_fetches);
	buf_printf(b,
	    "lockgate_storage_token_fetches_total{result=\"error\"} "
	    "%llu\n",
	    (unsigned long long)st.token_failures);
}

char *
metrics_render(size_t *len)
{
	buf b = { 0 };

	*len = 0;
	b.p = malloc(METRICS_RENDER_INITIAL);
	if (b.p == NULL)
		return NULL;
	b.cap = METRICS_RENDER_INITIAL;
	b.p[0] = '\0';
	family(&b, "lockgate_build_info", "gauge",
	    "Always 1; the labels say which lockgate this is.");
	buf_printf(&b, "lockgate_build_info{version=\"%s\"} 1\n",
	    LOCKGATE_VERSION);
	family(&b, "lockgate_process_start_time_seconds", "gauge",
	    "Start time of the process since the Unix epoch.");
	buf_printf(&b, "lockgate_process_start_time_seconds %.3f\n",
	    start_time_s);
	render_http(&b);
	render_locks(&b);
	render_store(&b);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
