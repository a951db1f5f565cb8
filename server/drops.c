/*
 * drops.c: clients that went away, counted and logged in aggregate.
 *
 * A flood ends in a burst: thousands of waiters hang up at once, or
 * thousands of half-open connections are dropped.  A line for each would
 * flood the log (4,100 lines in one burst were seen), so each is counted in
 * /metrics as it happens and the log gets at most one line every
 * SRV_LOG_INTERVAL_MS, saying how many of each kind there were since the
 * last one.  The HTTP loops call srv_drops_report as they go round (at
 * least once a second each), so a burst's line comes within about a
 * second, and srv_drops_report(true) at shutdown writes what is left.
 */
#include <pthread.h>
#include <stdio.h>

#include "metrics.h"
#include "srv.h"
#include "util/clock.h"

static unsigned pending[SRV_DROP_KINDS]; /* atomic: not logged yet */
static int64_t next_line_ms;             /* atomic: mono ms */

void
srv_drop(srv_drop_kind kind, unsigned n)
{
	if (n == 0 || (unsigned)kind >= SRV_DROP_KINDS)
		return;
	switch (kind) {
	case SRV_DROP_WAITER:
		metrics_waiters_abandoned(n);
		break;
	case SRV_DROP_HEAD:
		metrics_heads_dropped(n);
		break;
	case SRV_DROP_SLOW_HEAD:
		metrics_slow_heads(n);
		break;
	default:
		break;
	}
	__atomic_add_fetch(&pending[kind], n, __ATOMIC_RELAXED);
}

/* "; N ONE|MANY WHAT" onto OUT (LEN bytes) at *OFF when N > 0. */
static void
part(char *out, size_t len, size_t *off, unsigned n, const char *one,
    const char *many, const char *what)
{
	int w;

	if (n == 0 || *off >= len)
		return;
	w = snprintf(out + *off, len - *off, "%s%u %s %s", *off ? "; " : "", n,
	    n == 1 ? one : many, what);
	if (w > 0)
		*off += (size_t)w;
}

void
srv_drops_report(bool now)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int64_t t = util_mono_ms();
	unsigned n[SRV_DROP_KINDS];
	char msg[400];
	size_t off = 0;
	int i;

	if (!now && t < __atomic_load_n(&next_line_ms, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&mu); /* one line for one interval */
	if (!now && t < next_line_ms) {
		pthread_mutex_unlock(&mu);
		return;
	}
	for (i = 0; i < SRV_DROP_KINDS; i++)
		n[i] = __atomic_exchange_n(&pending[i], 0, __ATOMIC_RELAXED);
	if (n[SRV_DROP_WAITER] + n[SRV_DROP_HEAD] + n[SRV_DROP_SLOW_HEAD] > 0)
		__atomic_store_n(&next_line_ms, t + SRV_LOG_INTERVAL_MS,
		    __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	part(msg, sizeof(msg), &off, n[SRV_DROP_WAITER], "waiting acquire",
	    "waiting acquires", "whose client left before the answer");
	part(msg, sizeof(msg), &off, n[SRV_DROP_HEAD], "connection",
	    "connections", "closed by the client with a request head pending");
	part(msg, sizeof(msg), &off, n[SRV_DROP_SLOW_HEAD], "connection",
	    "connections",
	    "closed by lockgate: the request head took over the head "
	    "timeout");
	if (off == 0)
		return;
	srv_log("WARNING", msg,
	    json_pack("{s:s, s:i, s:i, s:i}", "component", "http",
	        "waiters_abandoned", (int)n[SRV_DROP_WAITER], "heads_dropped",
	        (int)n[SRV_DROP_HEAD], "slow_heads_closed",
	        (int)n[SRV_DROP_SLOW_HEAD]));
}
