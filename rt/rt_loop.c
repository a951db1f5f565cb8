/*
 * rt_loop.c: the event loop of rt.h: epoll, fd waits, timers, sleeps and
 * the round that runs the tasks they make ready.
 *
 * Epoll events carry the fd only, never a pointer, and each is routed by
 * the loop's table of fds at the time it is handled: so an fd that a
 * client closes while a batch of events is being handled cannot leave a
 * dangling pointer behind (an event of an fd no longer in the table is
 * dropped).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "rt_int.h"

void
rt_ready_push(rt_loop *l, rt_task *t)
{
	t->next = NULL;
	if (l->ready_tail != NULL)
		l->ready_tail->next = t;
	else
		l->ready = t;
	l->ready_tail = t;
}

/* ---- the table of fds ---- */

static rt_fdent *
fd_slot(rt_loop *l, int fd)
{
	rt_fdent *nf;
	int n;

	if (fd < 0)
		return NULL;
	if (fd >= l->nfds) {
		n = l->nfds ? l->nfds : 64;
		while (n <= fd)
			n *= 2;
		if ((nf = realloc(l->fds, (size_t)n * sizeof(*nf))) == NULL)
			return NULL;
		memset(nf + l->nfds, 0, (size_t)(n - l->nfds) * sizeof(*nf));
		l->fds = nf;
		l->nfds = n;
	}
	return &l->fds[fd];
}

/* Register FD for WANT (RT_IN|RT_OUT; 0: not at all) in epoll, and in its
 * slot E (whose other bits are cleared). */
static int
reg_set(rt_loop *l, int fd, rt_fdent *e, unsigned want)
{
	unsigned have = e->reg & (RT_IN | RT_OUT);
	struct epoll_event ev;
	int rc = 0;

	memset(&ev, 0, sizeof(ev));
	ev.data.fd = fd;
	ev.events =
	    ((want & RT_IN) ? EPOLLIN : 0u) | ((want & RT_OUT) ? EPOLLOUT : 0u);
	if (want != have) {
		/* ADD what is new, MOD what is registered; should the table be
		 * wrong about which (EEXIST, ENOENT), the other one. */
		int op = have == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
		int other = have == 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
		int stale = have == 0 ? EEXIST : ENOENT;

		l->ctls++;
		if (want == 0)
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		else if (epoll_ctl(l->epfd, op, fd, &ev) != 0 &&
		    (errno != stale || epoll_ctl(l->epfd, other, fd, &ev) != 0))
			rc = -1;
	}
	e->reg = rc == 0 ? (unsigned char)want : 0;
	return rc;
}

int
rt_loop_fd_set(rt_loop *l, int fd, unsigned want, rt_fd_fn *fn, void *arg)
{
	rt_fdent *e;
	int rc;

	if (want == 0 && (fd < 0 || fd >= l->nfds))
		return 0; /* never watched */
	if ((e = fd_slot(l, fd)) == NULL)
		return -1;
	rc = reg_set(l, fd, e, want & (RT_IN | RT_OUT));
	e->waiter = NULL;
	e->fn = rc == 0 && want != 0 ? fn : NULL;
	e->arg = rc == 0 && want != 0 ? arg : NULL;
	return rc;
}

unsigned
rt_loop_fd_want(const rt_loop *l, int fd)
{
	if (fd < 0 || fd >= l->nfds || (l->fds[fd].reg & RT_RAW))
		return 0;
	return l->fds[fd].reg & (RT_IN | RT_OUT);
}

unsigned long
rt_loop_epoll_ctls(const rt_loop *l)
{
	return l->ctls;
}

/* ---- waiting on a file descriptor ---- */

static void
sleeper_remove(rt_loop *l, rt_task *t)
{
	rt_task **p;

	for (p = &l->sleepers; *p != NULL; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			t->next = NULL;
			return;
		}
}

static void
sleeper_add(rt_loop *l, rt_task *t)
{
	rt_task **p;

	for (p = &l->sleepers; *p != NULL && (*p)->wake_ms <= t->wake_ms;
	     p = &(*p)->next)
		;
	t->next = *p;
	*p = t;
}

/* An event on an rt_wait_fd fd: its waiter goes on; with none, the fd (a
 * kept connection between requests) was closed by its peer, or sent what
 * nobody asked for: stop watching it, and say so. */
static void
raw_event(rt_loop *l, int fd)
{
	rt_fdent *e = &l->fds[fd];
	rt_task *t = e->waiter;

	if (t != NULL) {
		e->waiter = NULL;
		sleeper_remove(l, t);
		t->fd_ready = true;
		rt_ready_push(l, t);
		return;
	}
	reg_set(l, fd, e, 0);
	e->reg = RT_RAW | RT_HUP;
}

/* rt_wait_fd outside a task: poll(2), EINTR retried. */
static int
poll_fd(int fd, bool out, int64_t deadline_ms)
{
	struct pollfd p;
	int64_t left;
	int rc;

	p.fd = fd;
	p.events = out ? POLLOUT : POLLIN;
	for (;;) {
		left = deadline_ms - util_mono_ms();
		if (left < 0)
			left = 0;
		rc = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (rc >= 0 || errno != EINTR)
			break;
	}
	return rc > 0 ? 1 : rc;
}

int
rt_wait_fd(int fd, bool out, int64_t deadline_ms)
{
	rt_task *t = rt_tl_task;
	rt_fdent *e;
	unsigned want = out ? RT_IN | RT_OUT : RT_IN;

	if (t == NULL)
		return poll_fd(fd, out, deadline_ms);
	e = fd_slot(t->loop, fd);
	if (e == NULL)
		return -1;
	if (!(e->reg & RT_RAW)) {
		/* Ours now: whatever the table says of an earlier fd of that
		 * number is stale (reg_set then ADDs, or MODs what epoll
		 * still holds). */
		e->reg = 0;
		e->fn = NULL;
		e->arg = NULL;
	}
	if ((e->reg & (RT_IN | RT_OUT)) != want || !(e->reg & RT_RAW)) {
		if (reg_set(t->loop, fd, e, want) != 0)
			return -1;
		e->reg |= RT_RAW;
	}
	e->waiter = t;
	t->fd_ready = false;
	t->wake_ms = deadline_ms;
	sleeper_add(t->loop, t);
	rt_task_yield(t); /* until raw_event, or the deadline */
	e = &t->loop->fds[fd];
	if (!t->fd_ready)
		e->waiter = NULL;
	/* Back to reading only: level-triggered EPOLLOUT fires at once. */
	if (out && (e->reg & RT_OUT)) {
		reg_set(t->loop, fd, e, RT_IN);
		e->reg |= RT_RAW;
	}
	return t->fd_ready ? 1 : 0;
}

void
rt_fd_forget(int fd)
{
	rt_loop *l = rt_loop_self();

	if (l == NULL || fd < 0 || fd >= l->nfds || !(l->fds[fd].reg & RT_RAW))
		return;
	if (l->fds[fd].reg & (RT_IN | RT_OUT)) {
		l->ctls++;
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	}
	l->fds[fd].reg = 0;
	l->fds[fd].waiter = NULL;
}

bool
rt_fd_hung_up(int fd)
{
	rt_loop *l = rt_loop_self();

	return l != NULL && fd >= 0 && fd < l->nfds &&
	    (l->fds[fd].reg & RT_HUP) != 0;
}

/* ---- sleeping, timers ---- */

void
rt_sleep(int64_t ms)
{
	rt_task *t = rt_tl_task;
	struct timespec ts;

	if (ms <= 0)
		return;
	if (t == NULL) {
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000;
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		return;
	}
	t->wake_ms = util_mono_ms() + ms;
	sleeper_add(t->loop, t);
	rt_task_yield(t);
}

void
rt_timer_set(rt_loop *l, rt_timer *t, int64_t due_ms)
{
	rt_timer **p;

	if (t->set && due_ms < 0) {
		for (p = &l->timers; *p != NULL; p = &(*p)->next)
			if (*p == t) {
				*p = t->next;
				break;
			}
		t->set = false;
	} else if (!t->set && due_ms >= 0) {
		t->next = l->timers;
		l->timers = t;
		t->set = true;
	}
	t->due = due_ms;
}

/* The earliest of L's timers and sleepers, -1 when none is set. */
static int64_t
next_due(const rt_loop *l)
{
	int64_t due = -1;
	const rt_timer *t;

	for (t = l->timers; t != NULL; t = t->next)
		if (due < 0 || t->due < due)
			due = t->due;
	if (l->sleepers != NULL && (due < 0 || l->sleepers->wake_ms < due))
		due = l->sleepers->wake_ms;
	return due;
}

/* Run the timers due by NOW: each is disarmed, then its FN called. */
static void
run_timers(rt_loop *l, int64_t now)
{
	rt_timer *due = NULL, *t, **p = &l->timers;

	while ((t = *p) != NULL) {
		if (t->due <= now) {
			*p = t->next;
			t->set = false;
			t->due = -1;
			t->next = due;
			due = t;
		} else
			p = &t->next;
	}
	while ((t = due) != NULL) {
		due = t->next;
		t->next = NULL;
		t->fn(t->arg);
	}
}

/* ---- clients' state ---- */

int
rt_loop_local_set(rt_loop *l, const void *key, void *obj,
    void (*free_fn)(void *))
{
	if (l->nlocal == RT_LOOP_LOCALS)
		return -1;
	l->local[l->nlocal].key = key;
	l->local[l->nlocal].obj = obj;
	l->local[l->nlocal].free_fn = free_fn;
	l->nlocal++;
	return 0;
}

void *
rt_loop_local(const rt_loop *l, const void *key)
{
	int i;

	for (i = 0; i < l->nlocal; i++)
		if (l->local[i].key == key)
			return l->local[i].obj;
	return NULL;
}

/* ---- the loop ---- */

rt_loop *
rt_loop_new(void)
{
	rt_loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev;

	if (l == NULL)
		return NULL;
	l->wakefd = -1;
	if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	if ((l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto fail;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = l->wakefd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0)
		goto fail;
	return l;
fail:
	rt_loop_free(l);
	return NULL;
}

void
rt_loop_free(rt_loop *l)
{
	rt_task *t;

	if (l == NULL)
		return;
	while ((t = l->spare) != NULL) {
		l->spare = t->next;
		rt_task_unmap(t);
	}
	/* Clients first, while the epoll set is open: freeing their state
	 * may stop watching fds (rt_loop_fd_set). */
	while (l->nlocal > 0) {
		l->nlocal--;
		l->local[l->nlocal].free_fn(l->local[l->nlocal].obj);
	}
	free(l->fds);
	if (l->wakefd >= 0)
		close(l->wakefd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
}

int
rt_loop_watch(rt_loop *l, int fd, void (*fn)(void *arg), void *arg)
{
	struct epoll_event ev;

	if (l->nwatch >= RT_LOOP_WATCH_MAX)
		return -1;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		return -1;
	l->watch[l->nwatch++] = (rt_watch){ fd, fn, arg };
	return 0;
}

void
rt_loop_wake(rt_loop *l)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(l->wakefd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/* Move W from waiting to STATE; whether this call did. */
static bool
waiter_settle(rt_waiter *w, int state)
{
	int waiting = 0;

	return __atomic_compare_exchange_n(&w->state, &waiting, state, false,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void
rt_waiter_init(rt_waiter *w)
{
	w->task = rt_tl_task;
	w->state = 0;
	w->next = NULL;
	if (w->task == NULL)
		sem_init(&w->sem, 0, 0);
}

/* rt_waiter_wait outside a task: the thread blocks on W's semaphore. */
static int
waiter_block(rt_waiter *w, int64_t deadline_ms)
{
	struct timespec dl = { .tv_sec = deadline_ms / 1000,
		.tv_nsec = (long)(deadline_ms % 1000) * 1000000 };
	int rc;

	do
		rc = deadline_ms == RT_FOREVER
		    ? sem_wait(&w->sem)
		    : sem_clockwait(&w->sem, CLOCK_MONOTONIC, &dl);
	while (rc != 0 && errno == EINTR);
	/* Timed out, unless a wake settled W first: its post is then on
	 * its way, and taken before W goes. */
	if (rc != 0 && !waiter_settle(w, 2))
		while (sem_wait(&w->sem) != 0 && errno == EINTR)
			;
	sem_destroy(&w->sem);
	return __atomic_load_n(&w->state, __ATOMIC_ACQUIRE) == 1;
}

int
rt_waiter_wait(rt_waiter *w, int64_t deadline_ms)
{
	rt_task *t = w->task;

	if (t == NULL)
		return waiter_block(w, deadline_ms);
	/* Even when woken already, the task yields: its remote resume is
	 * queued, and the loop takes it only after this yield.  With no
	 * deadline the task is no sleeper: only the wake resumes it. */
	t->waiter = w;
	t->wake_ms = deadline_ms;
	if (deadline_ms != RT_FOREVER)
		sleeper_add(t->loop, t);
	rt_task_yield(t);
	t->waiter = NULL;
	return __atomic_load_n(&w->state, __ATOMIC_ACQUIRE) == 1;
}

void
rt_waiter_wake(rt_waiter *w)
{
	rt_task *t = w->task;

	if (!waiter_settle(w, 1))
		return;
	/* The waiter goes on only after this, and W is not touched again. */
	if (t != NULL)
		rt_task_resume_remote(t);
	else
		sem_post(&w->sem);
}

void
rt_task_resume_remote(rt_task *t)
{
	rt_loop *l = t->loop;
	rt_task *head = __atomic_load_n(&l->remote, __ATOMIC_RELAXED);

	do
		t->remote = head;
	while (!__atomic_compare_exchange_n(&l->remote, &head, t, true,
	    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	/* L outlives this: it is freed only once T has finished, and T runs
	 * only after the loop has been woken. */
	rt_loop_wake(l);
}

/* Move the tasks resumed from other threads to L's ready list, in the
 * order they were resumed. */
static void
remote_take(rt_loop *l)
{
	rt_task *t = __atomic_exchange_n(&l->remote, NULL, __ATOMIC_ACQUIRE);
	rt_task *order = NULL, *next;

	for (; t != NULL; t = next) {
		next = t->remote;
		t->remote = order;
		order = t;
	}
	for (t = order; t != NULL; t = next) {
		next = t->remote;
		t->remote = NULL;
		if (t->waiter != NULL && t->wake_ms != RT_FOREVER)
			sleeper_remove(l, t); /* woken before its deadline */
		rt_ready_push(l, t);
	}
}

static void
dispatch(rt_loop *l, const struct epoll_event *ev)
{
	int fd = ev->data.fd, i;
	unsigned events = 0;
	rt_fdent *e;
	uint64_t v;

	if (fd == l->wakefd) {
		/* The eventfd first: a resume queued after this read wakes
		 * the loop again. */
		while (read(l->wakefd, &v, sizeof(v)) > 0)
			;
		remote_take(l);
		return;
	}
	for (i = 0; i < l->nwatch; i++)
		if (l->watch[i].fd == fd) {
			l->watch[i].fn(l->watch[i].arg);
			return;
		}
	if (fd < 0 || fd >= l->nfds)
		return;
	e = &l->fds[fd];
	if (e->reg & RT_RAW) {
		raw_event(l, fd);
		return;
	}
	if (e->fn == NULL)
		return;
	if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
		events |= RT_IN;
	if (ev->events & EPOLLOUT)
		events |= RT_OUT;
	if (ev->events & EPOLLERR)
		events |= RT_ERR;
	e->fn(e->arg, fd, events);
}

int
rt_loop_run_once(rt_loop *l, int timeout_ms)
{
	struct epoll_event ev[RT_LOOP_EVENTS];
	int64_t now = 0, due;
	rt_task *t;
	int n, i;

	/* The clock is read only when a timer is set (a loop that serves
	 * only mem:// requests has none). */
	due = next_due(l);
	if (due >= 0 && due - (now = util_mono_ms()) < timeout_ms)
		timeout_ms = due <= now ? 0 : (int)(due - now);
	if (l->ready != NULL || timeout_ms < 0)
		timeout_ms = 0;
	n = epoll_wait(l->epfd, ev, RT_LOOP_EVENTS, timeout_ms);
	for (i = 0; i < n; i++)
		dispatch(l, &ev[i]);
	if (l->timers != NULL || l->sleepers != NULL)
		now = util_mono_ms();
	run_timers(l, now);
	while ((t = l->sleepers) != NULL && t->wake_ms <= now) {
		l->sleepers = t->next;
		t->next = NULL;
		/* An rt_waiter woken meanwhile is readied by its remote
		 * resume, not here. */
		if (t->waiter == NULL || waiter_settle(t->waiter, 2))
			rt_ready_push(l, t);
	}
	/* Tasks made ready now run now; any they make ready (none: a task
	 * only becomes ready through a client's callback or a timer) wait a
	 * round. */
	t = l->ready;
	l->ready = l->ready_tail = NULL;
	while (t != NULL) {
		rt_task *next = t->next;

		t->next = NULL;
		rt_task_enter(t);
		t = next;
	}
	return n < 0 ? 0 : n;
}
