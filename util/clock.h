/*
 * util/clock.h: the process's one monotonic clock (CLOCK_MONOTONIC), for
 * durations, deadlines and timed waits.  Never for what a caller or the
 * storage sees as a time of day: that is the storage's clock (design.md 1).
 * Header only, so every module may use it without a link dependency.
 */
#ifndef LOCKGATE_UTIL_CLOCK_H
#define LOCKGATE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on the monotonic clock. */
static inline int64_t
util_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Microseconds on the monotonic clock. */
static inline int64_t
util_mono_us(void)
{
	return util_mono_ns() / 1000;
}

/* Milliseconds on the monotonic clock . */
static inline int64_t
util_mono_ms(void)
{
	return util_mono_ns() / 1000000;
}

/* The monotonic time US microseconds from now, as pthread_cond_timedwait
 * takes it on a condition variable set to CLOCK_MONOTONIC
 * (pthread_condattr_setclock). */
static inline struct timespec
util_mono_after_us(int64_t us)
{
	int64_t t = util_mono_ns() + us * 1000;
	struct timespec ts;

	ts.tv_sec = (time_t)(t / 1000000000);
	ts.tv_nsec = (long)(t % 1000000000);
	return ts;
}

#endif
