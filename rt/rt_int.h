/*
 * rt_int.h: internal to the runtime (rt_task.c, rt_loop.c): the task and
 * loop structs and the calls between the two files.
 */
#ifndef LOCKGATE_RT_INT_H
#define LOCKGATE_RT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include "rt.h"

#if defined(__SANITIZE_ADDRESS__)
#define RT_ASAN 1
#endif

#if defined(__x86_64__)
#define RT_ASM_SWITCH 1
typedef struct rt_ctx {
	void *sp;
} rt_ctx;
#else
typedef ucontext_t rt_ctx;
#endif

struct rt_task {
	rt_ctx ctx;   /* the task's own */
	rt_ctx *back; /* where a yield returns: the loop thread's stack */
	char *map;    /* guard page, then the stack */
	size_t map_len;
	char *stack; /* its lowest usable byte */
	size_t stack_len;
	void (*fn)(void *);
	void *arg;
	void (*done)(void *);
	bool finished; /* fn returned */
	bool detached; /* spawn returned 0: DONE is owed */
	bool fd_ready; /* rt_wait_fd: the fd, not the deadline */
	int64_t wake_ms;
	int64_t deadline_ms;    /* rt_task_deadline_set's, 0: none */
	struct rt_task *next;   /* spare, sleeping or ready list */
	struct rt_task *remote; /* the loop's queue of remote resumes */
	rt_waiter *waiter;      /* rt_waiter_wait's, while it sleeps */
	rt_loop *loop;
#ifdef RT_ASAN
	void *asan_fake;
	const void *back_bottom;
	size_t back_size;
#endif
};

typedef struct rt_watch {
	int fd;
	void (*fn)(void *);
	void *arg;
} rt_watch;

/* What the loop knows of an fd in its epoll set, by fd number. */
typedef struct rt_fdent {
	unsigned char reg; /* RT_IN|RT_OUT as registered, RT_RAW, RT_HUP */
	rt_task *waiter;   /* RT_RAW: the task waiting on it */
	rt_fd_fn *fn;      /* a client's: rt_loop_fd_set */
	void *arg;
} rt_fdent;

/* An fd of rt_wait_fd's (not a client's): registered for reading between
 * waits; RT_HUP once it became readable with no waiter. */
#define RT_RAW 8u
#define RT_HUP 16u

struct rt_loop {
	int epfd;
	int wakefd;
	rt_timer *timers;  /* clients' armed timers, unordered */
	rt_task *sleepers; /* by wake_ms */
	rt_task *ready, *ready_tail;
	rt_task *remote; /* rt_task_resume_remote's, last first (atomic) */
	rt_task *spare;
	int nspare;
	int live; /* atomic: rt_loop_spawn_remote adds from any thread */
	rt_watch watch[RT_LOOP_WATCH_MAX];
	int nwatch;
	rt_fdent *fds;
	int nfds;
	unsigned long ctls; /* epoll_ctl calls for fds in the table */
	struct {
		const void *key;
		void *obj;
		void (*free_fn)(void *);
	} local[RT_LOOP_LOCALS];
	int nlocal;
};

/* rt_task.c */
extern __thread rt_task *rt_tl_task; /* the task running on this thread */
/* A new task of L, its stack mapped and its context ready; NULL. */
rt_task *rt_task_new(rt_loop *l);
/* Unmap T's stack and free T. */
void rt_task_unmap(rt_task *t);
/* From the loop's stack into T, until T yields or finishes.  Returns
 * whether T finished (and is then recycled, DONE called if owed). */
bool rt_task_enter(rt_task *t);
/* From T's stack back to the loop's. */
void rt_task_yield(rt_task *t);

/* rt_loop.c */
/* Put T on its loop's ready list. */
void rt_ready_push(rt_loop *l, rt_task *t);

#endif
