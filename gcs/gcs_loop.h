/*
 * gcs_loop.h: an event loop whose tasks wait on the network without
 * holding a thread.
 *
 * A gcs_loop belongs to one thread.  It watches file descriptors with
 * epoll, keeps timers, drives a libcurl multi handle, and runs *tasks*: a
 * task is a function run on a stack of its own, which may stop at a
 * storage transfer (gcs_http_perform) or a pause (gcs_loop_sleep) and
 * carry on later, while the loop's thread serves everything else.  So
 * code written as plain blocking calls (the lock algorithm, the store
 * client) runs unchanged on a loop, and hundreds of storage calls can be
 * in flight on one thread.
 *
 * Code that is not in a task (any other thread, or the loop's own code)
 * gets the ordinary blocking behaviour from the same calls.
 *
 * Rules for task code: do not block the thread for long (a mutex held
 * briefly is fine; a condition wait on another thread's progress is not,
 * see gcs_loop_in_task), and do not call into the loop's own dispatch.
 */
#ifndef LOCKGATE_GCS_LOOP_H
#define LOCKGATE_GCS_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#define GCS_TASK_STACK \
	(256 * 1024)          /* bytes of a task's stack (touched
					   pages only are memory) */
#define GCS_TASKS_SPARE    64 /* finished tasks kept for reuse */
#define GCS_LOOP_EVENTS    64 /* epoll events taken per wait */
#define GCS_LOOP_WATCH_MAX 4  /* fds watched besides libcurl's */
/* Idle storage connections a loop keeps open.  libcurl's default keeps 4
 * per transfer in flight, so a lull closes connections that the next
 * burst must open again. */
#define GCS_LOOP_CONNS     256
/* Connections a loop opens to one host once that host answered over
 * HTTP/2 (see loop_host_cap in gcs_loop.c): one carries every transfer,
 * the second covers a GOAWAY'd one that is still draining. */
#define GCS_LOOP_H2_CONNS  2

typedef struct gcs_loop gcs_loop;

/* A new loop for the calling thread; NULL when out of memory or
 * descriptors.  Free it on the same thread with gcs_loop_free once no task
 * is alive (gcs_loop_tasks() == 0). */
gcs_loop *gcs_loop_new(void);
void gcs_loop_free(gcs_loop *l);

/* Call FN(ARG) on the loop's thread whenever FD is readable (level
 * triggered).  At most GCS_LOOP_WATCH_MAX such watches.  0 or -1. */
int gcs_loop_watch(gcs_loop *l, int fd, void (*fn)(void *arg), void *arg);

/* Wait for events at most TIMEOUT_MS (0: do not wait; less when a timer
 * of the loop is due sooner), then run what they call for: watched fds,
 * libcurl, tasks whose transfer or pause ended.  Returns the number of
 * events handled. */
int gcs_loop_run_once(gcs_loop *l, int timeout_ms);

/* Make a gcs_loop_run_once of L return soon.  Any thread. */
void gcs_loop_wake(gcs_loop *l);

/* Run FN(ARG) as a task of L now, on the calling thread (L's, outside any
 * task).  Returns 1 when FN returned before this call did; 0 when it
 * waits, in which case DONE(ARG) is called on L's thread when FN returns
 * (from inside a later gcs_loop_run_once); -1 when no task could be made
 * (out of memory), and FN was not run.  DONE is not called when 1 is
 * returned. */
int gcs_loop_spawn(gcs_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg));

/* Tasks of L begun and not yet finished. */
int gcs_loop_tasks(const gcs_loop *l);
/* epoll_ctl calls made for libcurl's sockets so far (for tests). */
unsigned long gcs_loop_epoll_ctls(const gcs_loop *l);

/* Whether the caller runs in a task (and so must not wait for another
 * thread's progress with a blocking primitive: use gcs_loop_sleep in a
 * bounded re-check loop instead). */
bool gcs_loop_in_task(void);

/* Pause the caller MS milliseconds: a task yields its thread meanwhile,
 * anyone else sleeps. */
void gcs_loop_sleep(int64_t ms);

/* Objects a loop keeps for its own tasks (the store client's HTTP
 * handles).  A handle used by one loop only stays on one thread, so what
 * libcurl allocates during a transfer is freed by the thread, and the
 * malloc arena, that allocated it; a handle shared between threads made
 * their arenas' locks contend (0.65 futex calls per gs:// cycle at 64
 * clients).  Objects are told apart by the function that frees them.
 * gcs_loop_cache_put: keep OBJ (FREE_FN frees it when the loop is freed);
 * 0, or -1 when the caller is not in a task or GCS_LOOP_CACHE_MAX are
 * kept, and the caller still owns OBJ.  gcs_loop_cache_take: the object
 * put last with FREE_FN by a task of the calling task's loop, now the
 * caller's; NULL when there is none or the caller is not in a task. */
#define GCS_LOOP_CACHE_MAX 64
int gcs_loop_cache_put(void *obj, void (*free_fn)(void *));
void *gcs_loop_cache_take(void (*free_fn)(void *));

/* Run the transfer of H to its end and return its CURLcode: in a task, on
 * the loop's multi handle while the thread does other work; elsewhere
 * with curl_easy_perform. */
CURLcode gcs_loop_perform(CURL *h);

/* Wait until FD can be read (OUT false) or written (OUT true), at most
 * until DEADLINE_MS (util_mono_ms clock).  In a task the task yields, and
 * FD stays in the loop's epoll set for reading afterwards, so that the
 * next wait on it costs no system call, until gcs_loop_fd_forget.
 * Elsewhere, poll(2).  1: ready (an error or hang-up on FD counts: the
 * next read or write says which); 0: the deadline passed; -1: FD cannot
 * be watched. */
int gcs_loop_wait_fd(int fd, bool out, int64_t deadline_ms);
/* FD, waited on by gcs_loop_wait_fd, is about to be closed: the calling
 * task's loop forgets it.  Nothing outside a task. */
void gcs_loop_fd_forget(int fd);
/* Whether FD, kept in the calling task's loop's epoll set between waits,
 * became readable while nobody waited on it: its peer closed it (or sent
 * what nobody asked for).  Its connection is not to be used again.
 * False outside a task. */
bool gcs_loop_fd_hung_up(int fd);

#endif
