/*
 * rt.h: the process's runtime: event loops whose tasks wait on file
 * descriptors and timers without holding a thread.
 *
 * An rt_loop belongs to one thread.  It watches file descriptors with
 * epoll, keeps timers, and runs *tasks*: a task is a function run on a
 * stack of its own, which may stop at a wait (rt_sleep, rt_wait_fd, or a
 * client's rt_task_suspend) and carry on later, while the loop's thread
 * serves everything else.  So code written as plain blocking calls (the
 * lock algorithm, the store client) runs unchanged on a loop, and
 * hundreds of waits can be in flight on one thread.
 *
 * The runtime knows nothing of what its clients wait on: a client with
 * an engine of its own (an HTTP client library, say) drives it through
 * the client interface at the end of this header (fd events, a timer,
 * suspend and resume, a slot of per-loop state).  Module layering:
 * server -> api -> gcs -> rt; rt uses nothing of the others.
 *
 * Code that is not in a task (any other thread, or the loop's own code)
 * gets the ordinary blocking behaviour from the same calls.
 *
 * Rules for task code: do not block the thread for long (a mutex held
 * briefly is fine; a condition wait on another thread's progress is not,
 * see rt_in_task), and do not call into the loop's own dispatch.
 */
#ifndef LOCKGATE_RT_H
#define LOCKGATE_RT_H

#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#define RT_TASK_STACK \
	(256 * 1024)         /* bytes of a task's stack (touched
					   pages only are memory) */
#define RT_TASKS_SPARE    64 /* finished tasks kept for reuse */
#define RT_LOOP_EVENTS    64 /* epoll events taken per wait */
#define RT_LOOP_WATCH_MAX 4  /* rt_loop_watch fds */
#define RT_LOOP_LOCALS    4  /* rt_loop_local_set slots */

typedef struct rt_loop rt_loop;
typedef struct rt_task rt_task;

/* A new loop for the calling thread; NULL when out of memory or
 * descriptors.  Free it on the same thread with rt_loop_free once no task
 * is alive (rt_loop_tasks() == 0). */
rt_loop *rt_loop_new(void);
/* Frees L's spare tasks, then its clients' state (rt_loop_local_set, last
 * set first), then L. */
void rt_loop_free(rt_loop *l);

/* Call FN(ARG) on the loop's thread whenever FD is readable (level
 * triggered).  At most RT_LOOP_WATCH_MAX such watches.  0 or -1. */
int rt_loop_watch(rt_loop *l, int fd, void (*fn)(void *arg), void *arg);

/* Wait for events at most TIMEOUT_MS (0: do not wait; less when a timer
 * of the loop is due sooner), then run what they call for: watched fds,
 * clients' fds and timers, tasks whose wait ended.  Returns the number of
 * events handled. */
int rt_loop_run_once(rt_loop *l, int timeout_ms);

/* Make an rt_loop_run_once of L return soon.  Any thread. */
void rt_loop_wake(rt_loop *l);

/* Run FN(ARG) as a task of L now, on the calling thread (L's, outside any
 * task).  Returns 1 when FN returned before this call did; 0 when it
 * waits, in which case DONE(ARG) is called on L's thread when FN returns
 * (from inside a later rt_loop_run_once); -1 when no task could be made
 * (out of memory), and FN was not run.  DONE is not called when 1 is
 * returned. */
int rt_loop_spawn(rt_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg));

/* Run FN(ARG) as a new task of L, from any thread (a task of L or of
 * another loop included): it starts in L's next round, and DONE(ARG) is
 * called on L's thread when FN returns.  0, or -1 when no task could be
 * made (out of memory), and FN will not run. */
int rt_loop_spawn_remote(rt_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg));

/* Tasks of L begun and not yet finished. */
int rt_loop_tasks(const rt_loop *l);
/* epoll_ctl calls made for fds of rt_wait_fd and of clients so far (for
 * tests). */
unsigned long rt_loop_epoll_ctls(const rt_loop *l);

/* Whether the caller runs in a task (and so must not wait for another
 * thread's progress with a blocking primitive: use rt_sleep in a bounded
 * re-check loop instead). */
bool rt_in_task(void);

/* The calling task's deadline for the work it asks of others (a storage
 * call gives up by then), util_mono_ms clock; 0 lifts it.  Each task
 * starts with none.  Nothing outside a task, where rt_task_deadline is
 * always 0. */
void rt_task_deadline_set(int64_t ms);
int64_t rt_task_deadline(void);

/* Pause the caller MS milliseconds: a task yields its thread meanwhile,
 * anyone else sleeps. */
void rt_sleep(int64_t ms);

/* Wait until FD can be read (OUT false) or written (OUT true), at most
 * until DEADLINE_MS (util_mono_ms clock).  In a task the task yields, and
 * FD stays in the loop's epoll set for reading afterwards, so that the
 * next wait on it costs no system call, until rt_fd_forget.  Elsewhere,
 * poll(2).  1: ready (an error or hang-up on FD counts: the next read or
 * write says which); 0: the deadline passed; -1: FD cannot be watched. */
int rt_wait_fd(int fd, bool out, int64_t deadline_ms);
/* FD, waited on by rt_wait_fd, is about to be closed: the calling task's
 * loop forgets it.  Nothing outside a task. */
void rt_fd_forget(int fd);
/* Whether FD, kept in the calling task's loop's epoll set between waits,
 * became readable while nobody waited on it: its peer closed it (or sent
 * what nobody asked for).  Its connection is not to be used again.
 * False outside a task. */
bool rt_fd_hung_up(int fd);

/* ---- waiting for another thread's word ---- */

/*
 * A wait for something another thread does (a fetch it started ends, a
 * disk commit is made), without holding a task's thread.  The protocol,
 * with a mutex and a list of the other thread's: the waiter calls
 * rt_waiter_init and puts W on the list (mutex held), lets the mutex go
 * and calls rt_waiter_wait; the other thread calls rt_waiter_wake on
 * every W of the list (mutex held); the waiter, back, takes W off the
 * list (mutex held).  So W, on the waiter's stack, is alive whenever it is
 * woken.  (A waker that hands each W to exactly one rt_waiter_wake, a
 * queue it owns, needs no list: W is not touched after that call.)
 *
 * In a task the task yields and its loop serves on; elsewhere (a plain
 * thread, a command-line tool, a test) the calling thread blocks.
 */
typedef struct rt_waiter {
	rt_task *task;          /* private: NULL outside a task */
	int state;              /* private: 0 waits, 1 woken, 2 timed out */
	sem_t sem;              /* private: the wait outside a task */
	struct rt_waiter *next; /* the other thread's list */
} rt_waiter;
#define RT_FOREVER INT64_MAX /* rt_waiter_wait: no deadline */
/* W ready for the calling task or thread. */
void rt_waiter_init(rt_waiter *w);
/* Wait until rt_waiter_wake(W) (from any thread, and perhaps before this
 * call) or DEADLINE_MS (util_mono_ms clock; RT_FOREVER: none).  1:
 * woken; 0: the deadline passed first.  W needs no clean-up after. */
int rt_waiter_wait(rt_waiter *w, int64_t deadline_ms);
/* W's waiter goes on (a task on its own loop); nothing when it has been
 * woken or its deadline passed.  Any thread. */
void rt_waiter_wake(rt_waiter *w);

/* ---- for clients that wait on a loop in their own way ---- */

/* The calling task, and its loop; NULL outside a task. */
rt_task *rt_task_self(void);
rt_loop *rt_loop_self(void);

/* Stop the calling task (which must be one) until rt_task_resume. */
void rt_task_suspend(void);
/* Let T, suspended by rt_task_suspend, go on: it runs before the current
 * rt_loop_run_once of its loop returns, or in the next.  On T's loop's
 * thread only, from a client's fd or timer callback. */
void rt_task_resume(rt_task *t);
/* The same from any thread: T goes on a queue of its loop, which is woken
 * and runs T in its next rt_loop_run_once.  T must have suspended (or be
 * about to, on its loop's thread: the loop takes the queue only between
 * tasks).  Nothing of T's may be touched by the caller afterwards. */
void rt_task_resume_remote(rt_task *t);

/* Events of a client's fd, as passed to its callback. */
#define RT_IN  1u /* readable, or hung up */
#define RT_OUT 2u /* writable */
#define RT_ERR 4u /* an error condition */

/* Watch FD for WANT (RT_IN | RT_OUT, level triggered; 0: stop watching)
 * and call FN(ARG, FD, events) for its events, on L's thread.  A call
 * that changes only FN or ARG costs no system call; a call with the WANT
 * FD already has neither.  0, or -1 when epoll refused (FD is then not
 * watched). */
typedef void rt_fd_fn(void *arg, int fd, unsigned events);
int rt_loop_fd_set(rt_loop *l, int fd, unsigned want, rt_fd_fn *fn, void *arg);
/* What FD is watched for by rt_loop_fd_set (0: nothing). */
unsigned rt_loop_fd_want(const rt_loop *l, int fd);

/* A client's timer: FN(ARG) runs on the loop's thread once the monotonic
 * clock reaches DUE.  Owned by the client, which sets FN and ARG before
 * the first rt_timer_set and keeps the struct alive while it is set. */
typedef struct rt_timer {
	void (*fn)(void *arg);
	void *arg;
	int64_t due;           /* util_mono_ms; set by rt_timer_set */
	bool set;              /* rt_timer_set's, private */
	struct rt_timer *next; /* private */
} rt_timer;
/* Arm T on L for DUE_MS (util_mono_ms clock), or disarm it (DUE_MS < 0).
 * A timer whose FN runs is disarmed first: FN may arm it again (for the
 * next round at the earliest), but not another timer due in that round. */
void rt_timer_set(rt_loop *l, rt_timer *t, int64_t due_ms);

/* Per-loop state of a client, told apart by KEY (the address of
 * something of the client's).  rt_loop_local_set: keep OBJ for KEY;
 * FREE_FN(OBJ) is called by rt_loop_free; 0, or -1 when RT_LOOP_LOCALS
 * are kept (the caller still owns OBJ).  rt_loop_local: OBJ, or NULL. */
int rt_loop_local_set(rt_loop *l, const void *key, void *obj,
    void (*free_fn)(void *));
void *rt_loop_local(const rt_loop *l, const void *key);

#endif
