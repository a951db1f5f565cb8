/*
 * test_rt_loop.c: the runtime's event loop and its tasks (rt/): a task
 * that needs no wait finishes within rt_loop_spawn; waiting tasks
 * (sleeps) are all alive at once on one thread; a wake-up from another
 * thread ends a wait; a task's stack overflow is fatal, never silent; a
 * task waiting on an fd goes on when it is readable or at its deadline;
 * tasks waiting for another thread's word go on when it comes, or at
 * their deadline, with or without one; outside a task the same wait
 * blocks the thread until the word or the deadline; a task spawned from
 * another thread runs on the loop, with a deadline of its own.
 *
 * No timing upper bounds: concurrency is shown by counts (tasks alive at
 * once), every wait is bounded.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "util/clock.h"
#include "rt/rt.h"

#define RUN_MAX_MS 20000 /* any test's loop gives up after this long */
#define MANY_TASKS 500

/* Run L until it has no task left, for at most RUN_MAX_MS. */
static void
run_until_idle(rt_loop *l)
{
	int64_t end = util_mono_ms() + RUN_MAX_MS;

	while (rt_loop_tasks(l) > 0 && util_mono_ms() < end)
		rt_loop_run_once(l, 50);
	assert_int_equal(rt_loop_tasks(l), 0);
}
/* ---- tasks without a network ---- */

typedef struct counter {
	int ran, done, in_task, sleep_ms;
	int64_t started, ended;
} counter;

static void
count_fn(void *arg)
{
	counter *c = arg;

	c->in_task = rt_in_task();
	c->started = util_mono_ms();
	if (c->sleep_ms > 0)
		rt_sleep(c->sleep_ms);
	c->ended = util_mono_ms();
	c->ran++;
}

static void
count_done(void *arg)
{
	counter *c = arg;

	c->done++;
}

static void
test_spawn_without_wait_finishes_inline(void **state)
{
	rt_loop *l = rt_loop_new();
	counter c = { 0 };

	(void)state;
	assert_non_null(l);
	assert_false(rt_in_task());
	assert_int_equal(rt_loop_spawn(l, count_fn, &c, count_done), 1);
	assert_int_equal(c.ran, 1);
	assert_int_equal(c.in_task, 1);
	assert_int_equal(c.done, 0); /* DONE is only for tasks that waited */
	assert_int_equal(rt_loop_tasks(l), 0);
	assert_false(rt_in_task());
	rt_loop_free(l);
}

static void
test_sleeping_tasks_wait_together(void **state)
{
	rt_loop *l = rt_loop_new();
	counter c[3];
	int i;

	(void)state;
	memset(c, 0, sizeof(c));
	for (i = 0; i < 3; i++) {
		c[i].sleep_ms = 100 + 50 * i;
		assert_int_equal(rt_loop_spawn(l, count_fn, &c[i], count_done),
		    0);
	}
	/* All three are waiting at once, on this one thread. */
	assert_int_equal(rt_loop_tasks(l), 3);
	run_until_idle(l);
	for (i = 0; i < 3; i++) {
		assert_int_equal(c[i].ran, 1);
		assert_int_equal(c[i].done, 1);
		/* A sleep never ends early. */
		assert_true(c[i].ended - c[i].started >= c[i].sleep_ms);
	}
	rt_loop_free(l);
}

static void
test_many_tasks_reuse_stacks(void **state)
{
	rt_loop *l = rt_loop_new();
	counter *c = calloc(MANY_TASKS, sizeof(*c));
	int i, round, waited = 0;

	(void)state;
	assert_non_null(c);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < MANY_TASKS; i++) {
			c[i].sleep_ms = 1 + i % 5;
			if (rt_loop_spawn(l, count_fn, &c[i], count_done) == 0)
				waited++;
		}
		assert_int_equal(rt_loop_tasks(l), MANY_TASKS);
		run_until_idle(l);
	}
	assert_int_equal(waited, 2 * MANY_TASKS);
	for (i = 0; i < MANY_TASKS; i++) {
		assert_int_equal(c[i].ran, 2);
		assert_int_equal(c[i].done, 2);
	}
	free(c);
	rt_loop_free(l);
}

static void *
waker(void *arg)
{
	usleep(50 * 1000);
	rt_loop_wake(arg);
	return NULL;
}

/* A wait of the loop ends on a wake-up from another thread: run_once
 * returns having handled one event (the wake-up), not on its timeout. */
static void
test_wake_from_another_thread(void **state)
{
	rt_loop *l = rt_loop_new();
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, waker, l), 0);
	assert_int_equal(rt_loop_run_once(l, RUN_MAX_MS), 1);
	pthread_join(t, NULL);
	rt_loop_free(l);
}

/* What a task spawned from another thread saw. */
typedef struct remote_seen {
	int in_task, done;
	int64_t deadline_set, deadline_next; /* its own; a later task's */
} remote_seen;

static void
remote_fn(void *arg)
{
	remote_seen *r = arg;

	r->in_task = rt_in_task();
	rt_task_deadline_set(12345);
	r->deadline_set = rt_task_deadline();
	rt_sleep(1); /* finishes in a later round, so DONE is called */
}

static void
remote_done(void *arg)
{
	remote_seen *r = arg;

	r->done++;
}

static void
next_fn(void *arg)
{
	remote_seen *r = arg;

	r->deadline_next = rt_task_deadline();
}

static void *
remote_spawner(void *arg)
{
	static remote_seen seen;
	rt_loop *l = arg;

	memset(&seen, 0, sizeof(seen));
	if (rt_loop_spawn_remote(l, remote_fn, &seen, remote_done) != 0)
		return NULL;
	return &seen;
}

/* A task spawned from another thread runs on the loop's next round, as
 * a task, and its DONE is called; the deadline a task sets is its own:
 * outside a task there is none, and the next task starts with none. */
static void
test_spawn_remote_runs_on_the_loop(void **state)
{
	rt_loop *l = rt_loop_new();
	remote_seen *seen = NULL, next = { 0 };
	pthread_t t;
	int i;

	(void)state;
	assert_non_null(l);
	assert_int_equal(pthread_create(&t, NULL, remote_spawner, l), 0);
	pthread_join(t, (void **)&seen);
	assert_non_null(seen);
	assert_int_equal(rt_loop_tasks(l), 1);
	for (i = 0; i < RUN_MAX_MS / 50 && seen->done == 0; i++)
		rt_loop_run_once(l, 50);
	assert_int_equal(seen->done, 1);
	assert_int_equal(seen->in_task, 1);
	assert_int_equal(seen->deadline_set, 12345);
	assert_int_equal(rt_task_deadline(), 0);
	next.deadline_next = -1;
	assert_int_equal(rt_loop_spawn(l, next_fn, &next, NULL), 1);
	assert_int_equal(next.deadline_next, 0);
	run_until_idle(l);
	rt_loop_free(l);
}

static int overflow_depth;
static volatile int overflow_limit = 1 << 30; /* never reached */

static int
recurse(int n)
{
	volatile char pad[1024];

	if (n >= overflow_limit)
		return 0;
	pad[0] = (char)n;
	overflow_depth = n;
	return pad[0] + recurse(n + 1) + pad[0];
}

static void
overflow_fn(void *arg)
{
	(void)arg;
	recurse(0);
}

/* A task that runs off its stack is stopped (the guard page below it
 * faults, or the sanitizer's stack-overflow check fires), in a child
 * process: it does not carry on into whatever lies below. */
static void
test_stack_overflow_is_fatal(void **state)
{
	pid_t pid;
	int st = 0;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		rt_loop *l = rt_loop_new();

		alarm(10);
		if (l != NULL)
			rt_loop_spawn(l, overflow_fn, NULL, NULL);
		_exit(0); /* reached only if the overflow went unnoticed */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	/* Killed by SIGSEGV/SIGBUS, or stopped by AddressSanitizer (which
	 * reports the overflow and exits non-zero). */
	assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (WIFSIGNALED(st))
		assert_true(WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS ||
		    WTERMSIG(st) == SIGABRT);
}

/* ---- waiting on a file descriptor ---- */

typedef struct fdw {
	int fd, rc, rc2, hung;
	int64_t deadline;
} fdw;

static void
fdw_fn(void *arg)
{
	fdw *w = arg;

	w->rc = rt_wait_fd(w->fd, false, w->deadline);
}

static void
hung_fn(void *arg)
{
	fdw *w = arg;

	w->hung = rt_fd_hung_up(w->fd);
	rt_fd_forget(w->fd);
	w->rc2 = rt_fd_hung_up(w->fd);
}

/* A task waiting on an fd goes on when it becomes readable, or at its
 * deadline with 0; the fd stays watched between waits (no epoll_ctl for
 * the second wait), and readable with nobody waiting it is reported as
 * hung up, once, until forgotten.  Outside a task the same call polls. */
static void
test_wait_fd(void **state)
{
	rt_loop *l = rt_loop_new();
	int pfd[2], i, events = 0;
	unsigned long ctls;
	fdw w = { 0 };
	char b;

	(void)state;
	assert_non_null(l);
	assert_int_equal(pipe(pfd), 0);
	w.fd = pfd[0];
	w.rc = -9;
	w.deadline = util_mono_ms() + RUN_MAX_MS;
	assert_int_equal(rt_loop_spawn(l, fdw_fn, &w, NULL), 0);
	rt_loop_run_once(l, 0);
	assert_int_equal(w.rc, -9); /* still waiting */
	assert_int_equal(write(pfd[1], "x", 1), 1);
	run_until_idle(l);
	assert_int_equal(w.rc, 1);
	assert_int_equal(read(pfd[0], &b, 1), 1);
	ctls = rt_loop_epoll_ctls(l);
	assert_int_equal(ctls, 1);

	/* The deadline: nothing to read. */
	w.rc = -9;
	w.deadline = util_mono_ms() + 60;
	assert_int_equal(rt_loop_spawn(l, fdw_fn, &w, NULL), 0);
	run_until_idle(l);
	assert_int_equal(w.rc, 0);
	assert_true(util_mono_ms() >= w.deadline);
	assert_int_equal(rt_loop_epoll_ctls(l), ctls); /* still watched */

	/* Readable with nobody waiting: seen once, then no longer watched
	 * (ten rounds see at most one event, not one per round). */
	assert_int_equal(write(pfd[1], "y", 1), 1);
	for (i = 0; i < 10; i++)
		events += rt_loop_run_once(l, 10);
	assert_int_equal(events, 1);
	assert_int_equal(rt_loop_spawn(l, hung_fn, &w, NULL), 1);
	assert_int_equal(w.hung, 1);
	assert_int_equal(w.rc2, 0);          /* forgotten */
	assert_false(rt_fd_hung_up(pfd[0])); /* not in a task */

	/* Outside a task: poll. */
	assert_int_equal(rt_wait_fd(pfd[0], false, util_mono_ms() + 1000), 1);
	assert_int_equal(read(pfd[0], &b, 1), 1);
	assert_int_equal(rt_wait_fd(pfd[0], false, util_mono_ms() + 30), 0);
	assert_int_equal(rt_wait_fd(pfd[1], true, util_mono_ms() + 1000), 1);
	close(pfd[0]);
	close(pfd[1]);
	rt_loop_free(l);
}

/* ---- rt_waiter ---- */

#define WAITERS 100

/* The other thread's side of the rt_waiter protocol. */
static struct {
	pthread_mutex_t mu;
	rt_waiter *list;
	int registered;
} word = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };

typedef struct waiter_task {
	int64_t deadline_ms;
	int rc; /* rt_waiter_wait's */
} waiter_task;

static void
waiter_task_fn(void *arg)
{
	waiter_task *wt = arg;
	rt_waiter w, **p;

	rt_waiter_init(&w);
	pthread_mutex_lock(&word.mu);
	w.next = word.list;
	word.list = &w;
	word.registered++;
	pthread_mutex_unlock(&word.mu);
	wt->rc = rt_waiter_wait(&w, wt->deadline_ms);
	pthread_mutex_lock(&word.mu);
	for (p = &word.list; *p != NULL; p = &(*p)->next)
		if (*p == &w) {
			*p = w.next;
			break;
		}
	pthread_mutex_unlock(&word.mu);
}

/* Wake every waiter on the list once N have registered (bounded wait). */
static void *
word_giver(void *arg)
{
	int n = *(int *)arg, i, seen = 0;
	rt_waiter *w;

	for (i = 0; i < RUN_MAX_MS && seen < n; i++) {
		pthread_mutex_lock(&word.mu);
		seen = word.registered;
		pthread_mutex_unlock(&word.mu);
		if (seen < n)
			usleep(1000);
	}
	pthread_mutex_lock(&word.mu);
	for (w = word.list; w != NULL; w = w->next)
		rt_waiter_wake(w);
	for (w = word.list; w != NULL; w = w->next)
		rt_waiter_wake(w); /* a second word changes nothing */
	pthread_mutex_unlock(&word.mu);
	return NULL;
}

/* Tasks waiting for another thread's word all go on when it comes, long
 * before their deadline, each woken once. */
static void
test_waiters_woken_from_another_thread(void **state)
{
	rt_loop *l = rt_loop_new();
	waiter_task *wt = calloc(WAITERS, sizeof(*wt));
	int i, n = WAITERS;
	pthread_t th;

	(void)state;
	assert_non_null(wt);
	word.registered = 0;
	for (i = 0; i < WAITERS; i++) {
		wt[i].deadline_ms = util_mono_ms() + RUN_MAX_MS;
		wt[i].rc = -1;
		assert_int_equal(rt_loop_spawn(l, waiter_task_fn, &wt[i], NULL),
		    0);
	}
	assert_int_equal(pthread_create(&th, NULL, word_giver, &n), 0);
	run_until_idle(l);
	pthread_join(th, NULL);
	for (i = 0; i < WAITERS; i++)
		assert_int_equal(wt[i].rc, 1);
	assert_null(word.list);
	free(wt);
	rt_loop_free(l);
}

/* With no word, a wait ends at its deadline; a word after that (the
 * waiter is off the list by then) finds nobody. */
static void
test_waiter_deadline(void **state)
{
	rt_loop *l = rt_loop_new();
	waiter_task wt = { 0, -1 };
	int64_t start = util_mono_ms();

	(void)state;
	word.registered = 0;
	wt.deadline_ms = start + 50;
	assert_int_equal(rt_loop_spawn(l, waiter_task_fn, &wt, NULL), 0);
	run_until_idle(l);
	assert_int_equal(wt.rc, 0);
	assert_true(util_mono_ms() >= start + 50);
	assert_null(word.list);
	rt_loop_free(l);
}

/* A task with no deadline waits for the word alone. */
static void
test_waiter_without_deadline_woken(void **state)
{
	rt_loop *l = rt_loop_new();
	waiter_task wt = { RT_FOREVER, -1 };
	int n = 1;
	pthread_t th;

	(void)state;
	word.registered = 0;
	assert_int_equal(rt_loop_spawn(l, waiter_task_fn, &wt, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, word_giver, &n), 0);
	run_until_idle(l);
	pthread_join(th, NULL);
	assert_int_equal(wt.rc, 1);
	assert_null(word.list);
	rt_loop_free(l);
}

/* Outside a task the same calls block the thread: woken by another
 * thread's word, with or without a deadline. */
static void
test_waiter_outside_a_task_blocks_until_woken(void **state)
{
	waiter_task wt[2] = { { RT_FOREVER, -1 }, { 0, -1 } };
	int i, n = 1;
	pthread_t th;

	(void)state;
	wt[1].deadline_ms = util_mono_ms() + RUN_MAX_MS;
	for (i = 0; i < 2; i++) {
		word.registered = 0;
		assert_int_equal(pthread_create(&th, NULL, word_giver, &n), 0);
		waiter_task_fn(&wt[i]);
		pthread_join(th, NULL);
		assert_int_equal(wt[i].rc, 1);
		assert_null(word.list);
	}
}

/* Outside a task, with no word, the wait ends at its deadline. */
static void
test_waiter_outside_a_task_deadline(void **state)
{
	int64_t start = util_mono_ms();
	waiter_task wt = { start + 50, -1 };

	(void)state;
	word.registered = 0;
	waiter_task_fn(&wt);
	assert_int_equal(wt.rc, 0);
	assert_true(util_mono_ms() >= start + 50);
	assert_null(word.list);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_without_wait_finishes_inline),
		cmocka_unit_test(test_sleeping_tasks_wait_together),
		cmocka_unit_test(test_many_tasks_reuse_stacks),
		cmocka_unit_test(test_wake_from_another_thread),
		cmocka_unit_test(test_spawn_remote_runs_on_the_loop),
		cmocka_unit_test(test_stack_overflow_is_fatal),
		cmocka_unit_test(test_wait_fd),
		cmocka_unit_test(test_waiters_woken_from_another_thread),
		cmocka_unit_test(test_waiter_deadline),
		cmocka_unit_test(test_waiter_without_deadline_woken),
		cmocka_unit_test(test_waiter_outside_a_task_blocks_until_woken),
		cmocka_unit_test(test_waiter_outside_a_task_deadline),
	};

	return cmocka_run_group_tests_name("rt_loop", tests, NULL, NULL);
}
