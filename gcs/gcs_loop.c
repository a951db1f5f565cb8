/*
 * gcs_loop.c: the event loop of gcs_loop.h.
 *
 * Tasks are ucontext coroutines, each on an mmap'ed stack with a guard
 * page below it.  A task is only ever entered from its loop's thread, on
 * that thread's own stack (from gcs_loop_spawn or gcs_loop_run_once), and
 * it returns there when it yields; so tasks never migrate between threads
 * and thread-local state stays valid in them.
 *
 * libcurl's multi handle is driven with its socket interface: libcurl
 * says which sockets it wants watched (on_socket) and when it wants to be
 * called back (on_timer); the loop calls curl_multi_socket_action for
 * both and moves the tasks whose transfers ended onto the ready list.
 * Epoll events carry the fd only, never a pointer, so an fd libcurl
 * closes while a batch of events is being handled cannot leave a
 * dangling pointer behind (a stale fd is harmless to libcurl).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#include <unistd.h>

#include "util/clock.h"
#include "gcs_http.h"
#include "gcs_loop.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define LOOP_ASAN 1
#endif

/*
 * Switching stacks.  On x86-64 a task switch saves the callee-saved
 * registers and the SSE/x87 control words on the stack it leaves and
 * stores that stack pointer (loop_switch, below); ucontext elsewhere.
 * glibc's swapcontext also saves and restores the signal mask, a system
 * call on every switch, four times per storage request: the loop's
 * threads never change their mask, so there is nothing to keep.
 */
#if defined(__x86_64__)
#define LOOP_ASM_SWITCH 1
typedef struct loop_ctx {
	void *sp;
} loop_ctx;
/* Save the caller's state on its stack and its stack pointer in FROM->sp,
 * then continue the context whose stack pointer is TO->sp. */
void loop_switch(loop_ctx *from, loop_ctx *to);
/* Where a new task's first switch lands: calls task_start(rbx). */
void loop_trampoline(void);
__asm__(".text\n"
        ".globl loop_switch\n"
        ".type loop_switch,@function\n"
        "loop_switch:\n"
        "	pushq %rbp\n"
        "	pushq %rbx\n"
        "	pushq %r12\n"
        "	pushq %r13\n"
        "	pushq %r14\n"
        "	pushq %r15\n"
        "	subq $8, %rsp\n"
        "	stmxcsr (%rsp)\n"
        "	fnstcw 4(%rsp)\n"
        "	movq %rsp, (%rdi)\n"
        "	movq (%rsi), %rsp\n"
        "	ldmxcsr (%rsp)\n"
        "	fldcw 4(%rsp)\n"
        "	addq $8, %rsp\n"
        "	popq %r15\n"
        "	popq %r14\n"
        "	popq %r13\n"
        "	popq %r12\n"
        "	popq %rbx\n"
        "	popq %rbp\n"
        "	ret\n"
        ".size loop_switch,.-loop_switch\n"
        ".globl loop_trampoline\n"
        ".type loop_trampoline,@function\n"
        "loop_trampoline:\n"
        "	movq %rbx, %rdi\n"
        "	call task_start\n"
        "	ud2\n"
        ".size loop_trampoline,.-loop_trampoline\n");
#else
typedef ucontext_t loop_ctx;
#endif

typedef struct gcs_task {
	loop_ctx ctx;   /* the task's own */
	loop_ctx *back; /* where a yield returns: the loop thread's stack */
	char *map;      /* guard page, then the stack */
	size_t map_len;
	char *stack; /* its lowest usable byte */
	size_t stack_len;
	void (*fn)(void *);
	void *arg;
	void (*done)(void *);
	bool finished; /* fn returned */
	bool detached; /* spawn returned 0: DONE is owed */
	CURLcode curl_rc;
	bool fd_ready; /* gcs_loop_wait_fd: the fd, not the deadline */
	int64_t wake_ms;
	struct gcs_task *next; /* spare, sleeping or ready list */
	gcs_loop *loop;
#ifdef LOOP_ASAN
	void *asan_fake;
	const void *back_bottom;
	size_t back_size;
#endif
} gcs_task;

typedef struct loop_watch {
	int fd;
	void (*fn)(void *);
	void *arg;
} loop_watch;

struct gcs_loop {
	int epfd;
	int wakefd;
	CURLM *multi;       /* made on the first transfer */
	int64_t curl_due;   /* mono ms libcurl wants a timeout call, -1 */
	long host_cap;      /* CURLMOPT_MAX_HOST_CONNECTIONS set, 0: none */
	gcs_task *sleepers; /* by wake_ms */
	gcs_task *ready, *ready_tail;
	gcs_task *spare;
	int nspare;
	int live;
	loop_watch watch[GCS_LOOP_WATCH_MAX];
	int nwatch;
	/* libcurl's sockets in epoll, by fd: REG_IN/REG_OUT as registered,
	 * REG_IDLE while no transfer uses it (see on_socket). */
	unsigned char *reg;
	gcs_task **fdwait; /* REG_RAW fds: the task waiting on each */
	int nreg;
	unsigned long ctls; /* epoll_ctl calls for libcurl's sockets */
	struct {
		void *obj;
		void (*free_fn)(void *);
	} cache[GCS_LOOP_CACHE_MAX]; /* gcs_loop_cache_put, last on top */
	int ncache;
};

static __thread gcs_task *tl_task; /* the task running on this thread */

/* ---- tasks ---- */

void task_start(gcs_task *t);
#if !defined(LOOP_ASM_SWITCH)
static void task_main(void);
#endif

/* From the context saved in FROM to the one in TO. */
static inline void
ctx_switch(loop_ctx *from, loop_ctx *to)
{
#if defined(LOOP_ASM_SWITCH)
	loop_switch(from, to);
#else
	swapcontext(from, to);
#endif
}

/* Make T's context start in task_start(T) on its own stack. */
static int
ctx_init(gcs_task *t)
{
#if defined(LOOP_ASM_SWITCH)
	uint64_t *sp = (uint64_t *)(void *)(t->stack + t->stack_len);
	uint32_t mxcsr;
	uint16_t fpucw;

	/* The frame loop_switch pops, top of the stack first: the return
	 * address (the trampoline), rbp, rbx (T), r12-r15, the control
	 * words.  Its `ret` leaves the stack pointer at the 16-byte aligned
	 * top, as the ABI wants it before the trampoline's call. */
	__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(fpucw));
	*--sp = (uint64_t)(uintptr_t)loop_trampoline;
	*--sp = 0;                      /* rbp */
	*--sp = (uint64_t)(uintptr_t)t; /* rbx */
	*--sp = 0;                      /* r12 */
	*--sp = 0;                      /* r13 */
	*--sp = 0;                      /* r14 */
	*--sp = 0;                      /* r15 */
	*--sp = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
	t->ctx.sp = sp;
	return 0;
#else
	if (getcontext(&t->ctx) != 0)
		return -1;
	t->ctx.uc_stack.ss_sp = t->stack;
	t->ctx.uc_stack.ss_size = t->stack_len;
	t->ctx.uc_link = NULL; /* task_main never returns */
	makecontext(&t->ctx, task_main, 0);
	return 0;
#endif
}

static void
task_unmap(gcs_task *t)
{
	if (t->map != NULL)
		munmap(t->map, t->map_len);
	free(t);
}

static gcs_task *
task_new(gcs_loop *l)
{
	long page = sysconf(_SC_PAGESIZE);
	gcs_task *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	if (page <= 0)
		page = 4096;
	t->loop = l;
	t->map_len = GCS_TASK_STACK + (size_t)page;
	t->map = mmap(NULL, t->map_len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (t->map == MAP_FAILED) {
		t->map = NULL;
		goto fail;
	}
	/* The stack grows down: an overflow runs into this page and faults
	 * instead of corrupting whatever lies below. */
	if (mprotect(t->map, (size_t)page, PROT_NONE) != 0)
		goto fail;
	t->stack = t->map + page;
	t->stack_len = GCS_TASK_STACK;
	if (ctx_init(t) != 0)
		goto fail;
	return t;
fail:
	task_unmap(t);
	return NULL;
}

/* From the loop's stack into T, until T yields or finishes.  Returns
 * whether T finished (and is then recycled, DONE called if owed). */
static bool
task_enter(gcs_task *t)
{
	gcs_loop *l = t->loop;
	gcs_task *prev = tl_task;
	loop_ctx here;
#ifdef LOOP_ASAN
	void *fake = NULL;
#endif

	/* HERE outlives every use: T switches back to it before this call
	 * returns, and each entry sets it anew. */
	// cppcheck-suppress autoVariables
	t->back = &here;
	tl_task = t;
#ifdef LOOP_ASAN
	__sanitizer_start_switch_fiber(&fake, t->stack, t->stack_len);
#endif
	ctx_switch(&here, &t->ctx);
#ifdef LOOP_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
	tl_task = prev;
	if (!t->finished)
		return false;
	l->live--;
	if (t->detached && t->done != NULL)
		t->done(t->arg);
	t->fn = NULL;
	t->arg = NULL;
	if (l->nspare < GCS_TASKS_SPARE) {
		t->next = l->spare;
		l->spare = t;
		l->nspare++;
	} else
		task_unmap(t);
	return true;
}

/* From T's stack back to the loop's. */
static void
task_yield(gcs_task *t)
{
#ifdef LOOP_ASAN
	__sanitizer_start_switch_fiber(&t->asan_fake, t->back_bottom,
	    t->back_size);
#endif
	ctx_switch(&t->ctx, t->back);
#ifdef LOOP_ASAN
	__sanitizer_finish_switch_fiber(t->asan_fake, &t->back_bottom,
	    &t->back_size);
#endif
}

/* Every task starts here once, and runs one FN per entry after a
 * finish: a finished task is parked in task_yield until reused.  Not
 * static: the x86-64 trampoline calls it. */
void
task_start(gcs_task *t)
{
#ifdef LOOP_ASAN
	__sanitizer_finish_switch_fiber(NULL, &t->back_bottom, &t->back_size);
#endif
	for (;;) {
		t->fn(t->arg);
		t->finished = true;
		task_yield(t);
	}
}

#if !defined(LOOP_ASM_SWITCH)
static void
task_main(void)
{
	task_start(tl_task);
}
#endif

/* ---- libcurl ---- */

/*
 * libcurl's sockets are registered lazily.  libcurl asks to stop watching
 * a keep-alive connection when its transfer ends and to watch it again for
 * the next one: two epoll_ctl calls per storage request.  Instead, a
 * socket left registered for reading stays so while idle (REG_IDLE); the
 * next transfer that wants it read costs nothing.  Should an idle socket
 * become readable (the server closed it), it is dropped from epoll there
 * and then, and libcurl finds the connection dead when it next looks.
 * When libcurl closes a socket, on_close forgets it, so that a new socket
 * that gets the same number starts afresh.
 */
#define REG_IN   1
#define REG_OUT  2
#define REG_IDLE 4
/* An fd of gcs_loop_wait_fd's (not libcurl's): registered for reading
 * between waits; REG_HUP once it became readable with no waiter. */
#define REG_RAW  8
#define REG_HUP  16

static unsigned char *
reg_slot(gcs_loop *l, int fd)
{
	unsigned char *nr;
	int n;

	if (fd < 0)
		return NULL;
	if (fd >= l->nreg) {
		gcs_task **nw;

		n = l->nreg ? l->nreg : 64;
		while (n <= fd)
			n *= 2;
		if ((nw = realloc(l->fdwait, (size_t)n * sizeof(*nw))) == NULL)
			return NULL;
		memset(nw + l->nreg, 0, (size_t)(n - l->nreg) * sizeof(*nw));
		l->fdwait = nw;
		if ((nr = realloc(l->reg, (size_t)n)) == NULL)
			return NULL;
		memset(nr + l->nreg, 0, (size_t)(n - l->nreg));
		l->reg = nr;
		l->nreg = n;
	}
	return &l->reg[fd];
}

/* Register FD for WANT (REG_IN|REG_OUT; 0: not at all). */
static int
reg_set(gcs_loop *l, int fd, unsigned char *slot, unsigned want)
{
	unsigned have = *slot & (REG_IN | REG_OUT);
	struct epoll_event ev;
	int rc = 0;

	memset(&ev, 0, sizeof(ev));
	ev.data.fd = fd;
	ev.events = ((want & REG_IN) ? EPOLLIN : 0u) |
	    ((want & REG_OUT) ? EPOLLOUT : 0u);
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
	*slot = rc == 0 ? (unsigned char)want : 0;
	return rc;
}

static int
on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	gcs_loop *l = userp;
	unsigned char *slot = reg_slot(l, s);

	(void)e;
	(void)socketp;
	if (slot == NULL)
		return -1;
	if (what == CURL_POLL_REMOVE) {
		/* Readable-only: keep it (an idle socket is not readable
		 * unless the peer closed it).  Writable: level-triggered
		 * EPOLLOUT would fire at once, so drop it. */
		if (*slot == REG_IN)
			*slot = REG_IN | REG_IDLE;
		else
			reg_set(l, s, slot, 0);
		return 0;
	}
	*slot &= (unsigned char)~REG_IDLE;
	return reg_set(l, s, slot,
	    ((what & CURL_POLL_IN) ? REG_IN : 0u) |
	        ((what & CURL_POLL_OUT) ? REG_OUT : 0u));
}

/* libcurl closes one of this loop's sockets. */
static int
on_close(void *clientp, curl_socket_t s)
{
	gcs_loop *l = clientp;

	if (l != NULL && s >= 0 && s < l->nreg) {
		if (l->reg[s] & (REG_IN | REG_OUT)) {
			l->ctls++;
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, s, NULL);
		}
		l->reg[s] = 0;
	}
	return close(s);
}

unsigned long
gcs_loop_epoll_ctls(const gcs_loop *l)
{
	return l->ctls;
}

static int
on_timer(CURLM *m, long ms, void *userp)
{
	gcs_loop *l = userp;

	(void)m;
	l->curl_due = ms < 0 ? -1 : util_mono_ms() + ms;
	return 0;
}

/* The loop's multi handle.  It multiplexes transfers over HTTP/2
 * (CURLPIPE_MULTIPLEX, libcurl's default, said here because the
 * connection count depends on it): with the handles' PIPEWAIT
 * (gcs_http.c) a loop keeps one HTTP/2 connection per storage host while
 * the server's stream limit allows.  See loop_host_cap for the cap on
 * connections per host. */
static int
multi_init(gcs_loop *l)
{
	if (l->multi != NULL)
		return 0;
	gcs_curl_global_init();
	if ((l->multi = curl_multi_init()) == NULL)
		return -1;
	if (curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_socket) !=
	        CURLM_OK ||
	    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l) != CURLM_OK ||
	    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_timer) !=
	        CURLM_OK ||
	    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l) != CURLM_OK ||
	    curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS,
	        (long)GCS_LOOP_CONNS) != CURLM_OK ||
	    curl_multi_setopt(l->multi, CURLMOPT_PIPELINING,
	        (long)CURLPIPE_MULTIPLEX) != CURLM_OK) {
		curl_multi_cleanup(l->multi);
		l->multi = NULL;
		return -1;
	}
	return 0;
}

static void
ready_push(gcs_loop *l, gcs_task *t)
{
	t->next = NULL;
	if (l->ready_tail != NULL)
		l->ready_tail->next = t;
	else
		l->ready = t;
	l->ready_tail = t;
}

/* Transfers that ended: their tasks become ready. */
static void
collect_done(gcs_loop *l)
{
	CURLMsg *m;
	gcs_task *t;
	char *p;
	int left;

	while ((m = curl_multi_info_read(l->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		p = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
		t = (gcs_task *)(void *)p;
		if (t == NULL)
			continue;
		t->curl_rc = m->data.result;
		ready_push(l, t);
	}
}

/*
 * PIPEWAIT makes a transfer wait for a connection that may multiplex only
 * while the host's protocol is unknown.  Once libcurl 7.88 knows the host
 * speaks HTTP/2, a burst of transfers that finds no usable connection
 * (the one it had got a GOAWAY, or the next is still in its handshake)
 * opens a connection each: 59 to a restarted front, measured.  So once an
 * https answer came over HTTP/2 the loop caps connections per host at
 * GCS_LOOP_H2_CONNS (libcurl queues the others until a stream is free);
 * an https answer over HTTP/1.1 lifts the cap, as HTTP/1.1 needs a
 * connection per transfer in flight.  Plain http (an emulator, the
 * metadata server) is HTTP/1.1 only and changes nothing, so it is never
 * capped.  One storage host per loop makes a per-loop cap a per-host one.
 */
static void
loop_host_cap(gcs_loop *l, CURL *h)
{
	char *scheme = NULL;
	long ver = 0, cap;

	if (curl_easy_getinfo(h, CURLINFO_SCHEME, &scheme) != CURLE_OK ||
	    scheme == NULL || strcasecmp(scheme, "https") != 0 ||
	    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver) != CURLE_OK ||
	    ver == 0)
		return;
	cap = ver == CURL_HTTP_VERSION_2_0 ? GCS_LOOP_H2_CONNS : 0;
	if (cap != l->host_cap &&
	    curl_multi_setopt(l->multi, CURLMOPT_MAX_HOST_CONNECTIONS, cap) ==
	        CURLM_OK)
		l->host_cap = cap;
}

CURLcode
gcs_loop_perform(CURL *h)
{
	gcs_task *t = tl_task;
	gcs_loop *l;
	CURLcode rc;

	if (t == NULL) {
		/* Connections it makes are its own, not a loop's. */
		curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, NULL);
		curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, NULL);
		return curl_easy_perform(h);
	}
	l = t->loop;
	if (multi_init(l) != 0)
		return CURLE_OUT_OF_MEMORY;
	/* A connection made now belongs to L's cache and keeps these. */
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, l);
	curl_easy_setopt(h, CURLOPT_PRIVATE, (char *)t);
	if (curl_multi_add_handle(l->multi, h) != CURLM_OK) {
		curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
		return CURLE_OUT_OF_MEMORY;
	}
	t->curl_rc = CURLE_OK;
	task_yield(t); /* until collect_done */
	rc = t->curl_rc;
	if (rc == CURLE_OK)
		loop_host_cap(l, h);
	curl_multi_remove_handle(l->multi, h);
	curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
	return rc;
}

/* ---- objects kept for a loop's tasks ---- */

void *
gcs_loop_cache_take(void (*free_fn)(void *))
{
	gcs_loop *l = tl_task ? tl_task->loop : NULL;
	void *obj;
	int i;

	if (l == NULL)
		return NULL;
	for (i = l->ncache - 1; i >= 0; i--) {
		if (l->cache[i].free_fn != free_fn)
			continue;
		obj = l->cache[i].obj;
		l->ncache--;
		memmove(&l->cache[i], &l->cache[i + 1],
		    (size_t)(l->ncache - i) * sizeof(l->cache[0]));
		return obj;
	}
	return NULL;
}

int
gcs_loop_cache_put(void *obj, void (*free_fn)(void *))
{
	gcs_loop *l = tl_task ? tl_task->loop : NULL;

	if (l == NULL || l->ncache == GCS_LOOP_CACHE_MAX)
		return -1;
	l->cache[l->ncache].obj = obj;
	l->cache[l->ncache].free_fn = free_fn;
	l->ncache++;
	return 0;
}

/* ---- waiting on a file descriptor ---- */

static void
sleeper_remove(gcs_loop *l, gcs_task *t)
{
	gcs_task **p;

	for (p = &l->sleepers; *p != NULL; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			t->next = NULL;
			return;
		}
}

static void
sleeper_add(gcs_loop *l, gcs_task *t)
{
	gcs_task **p;

	for (p = &l->sleepers; *p != NULL && (*p)->wake_ms <= t->wake_ms;
	     p = &(*p)->next)
		;
	t->next = *p;
	*p = t;
}

/* An event on a gcs_loop_wait_fd fd: its waiter goes on; with none, the
 * fd (a kept connection between requests) was closed by its peer, or
 * sent what nobody asked for: stop watching it, and say so. */
static void
raw_event(gcs_loop *l, int fd)
{
	gcs_task *t = l->fdwait[fd];

	if (t != NULL) {
		l->fdwait[fd] = NULL;
		sleeper_remove(l, t);
		t->fd_ready = true;
		ready_push(l, t);
		return;
	}
	reg_set(l, fd, &l->reg[fd], 0);
	l->reg[fd] = REG_RAW | REG_HUP;
}

int
gcs_loop_wait_fd(int fd, bool out, int64_t deadline_ms)
{
	gcs_task *t = tl_task;
	unsigned char *slot;
	unsigned want = out ? REG_IN | REG_OUT : REG_IN;
	struct pollfd p;
	int64_t left;
	int rc;

	if (t == NULL) {
		p.fd = fd;
		p.events = out ? POLLOUT : POLLIN;
		for (;;) {
			left = deadline_ms - util_mono_ms();
			if (left < 0)
				left = 0;
			rc = poll(&p, 1,
			    left > INT32_MAX ? INT32_MAX : (int)left);
			if (rc >= 0 || errno != EINTR)
				break;
		}
		return rc > 0 ? 1 : rc;
	}
	slot = reg_slot(t->loop, fd);
	if (slot == NULL)
		return -1;
	if (!(*slot & REG_RAW))
		*slot = 0; /* ours now: whatever the table says of an earlier
			      fd of that number is stale (reg_set then ADDs,
			      or MODs what epoll still holds) */
	if ((*slot & (REG_IN | REG_OUT)) != want || !(*slot & REG_RAW)) {
		if (reg_set(t->loop, fd, slot, want) != 0)
			return -1;
		*slot |= REG_RAW;
	}
	t->loop->fdwait[fd] = t;
	t->fd_ready = false;
	t->wake_ms = deadline_ms;
	sleeper_add(t->loop, t);
	task_yield(t); /* until raw_event, or the deadline */
	slot = &t->loop->reg[fd];
	if (!t->fd_ready)
		t->loop->fdwait[fd] = NULL;
	/* Back to reading only: level-triggered EPOLLOUT fires at once. */
	if (out && (*slot & REG_OUT)) {
		reg_set(t->loop, fd, slot, REG_IN);
		*slot |= REG_RAW;
	}
	return t->fd_ready ? 1 : 0;
}

void
gcs_loop_fd_forget(int fd)
{
	gcs_loop *l = tl_task ? tl_task->loop : NULL;

	if (l == NULL || fd < 0 || fd >= l->nreg || !(l->reg[fd] & REG_RAW))
		return;
	if (l->reg[fd] & (REG_IN | REG_OUT)) {
		l->ctls++;
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	}
	l->reg[fd] = 0;
	l->fdwait[fd] = NULL;
}

bool
gcs_loop_fd_hung_up(int fd)
{
	gcs_loop *l = tl_task ? tl_task->loop : NULL;

	return l != NULL && fd >= 0 && fd < l->nreg &&
	    (l->reg[fd] & REG_HUP) != 0;
}

/* ---- sleeping ---- */

bool
gcs_loop_in_task(void)
{
	return tl_task != NULL;
}

void
gcs_loop_sleep(int64_t ms)
{
	gcs_task *t = tl_task;
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
	task_yield(t);
}

/* ---- the loop ---- */

gcs_loop *
gcs_loop_new(void)
{
	gcs_loop *l = calloc(1, sizeof(*l));
	struct epoll_event ev;

	if (l == NULL)
		return NULL;
	l->curl_due = -1;
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
	gcs_loop_free(l);
	return NULL;
}

void
gcs_loop_free(gcs_loop *l)
{
	gcs_task *t;

	if (l == NULL)
		return;
	while ((t = l->spare) != NULL) {
		l->spare = t->next;
		task_unmap(t);
	}
	while (l->ncache > 0) {
		l->ncache--;
		l->cache[l->ncache].free_fn(l->cache[l->ncache].obj);
	}
	if (l->multi != NULL)
		curl_multi_cleanup(l->multi);
	free(l->reg);
	free(l->fdwait);
	if (l->wakefd >= 0)
		close(l->wakefd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
}

int
gcs_loop_watch(gcs_loop *l, int fd, void (*fn)(void *arg), void *arg)
{
	struct epoll_event ev;

	if (l->nwatch >= GCS_LOOP_WATCH_MAX)
		return -1;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		return -1;
	l->watch[l->nwatch++] = (loop_watch){ fd, fn, arg };
	return 0;
}

void
gcs_loop_wake(gcs_loop *l)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(l->wakefd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

int
gcs_loop_spawn(gcs_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg))
{
	gcs_task *t = l->spare;

	if (t != NULL) {
		l->spare = t->next;
		l->nspare--;
	} else if ((t = task_new(l)) == NULL)
		return -1;
	t->fn = fn;
	t->arg = arg;
	t->done = done;
	t->finished = false;
	t->detached = false;
	t->next = NULL;
	l->live++;
	if (task_enter(t))
		return 1;
	t->detached = true;
	return 0;
}

int
gcs_loop_tasks(const gcs_loop *l)
{
	return l->live;
}

static void
dispatch(gcs_loop *l, const struct epoll_event *ev)
{
	int fd = ev->data.fd, i, running, flags = 0;
	uint64_t v;

	if (fd == l->wakefd) {
		while (read(l->wakefd, &v, sizeof(v)) > 0)
			;
		return;
	}
	for (i = 0; i < l->nwatch; i++)
		if (l->watch[i].fd == fd) {
			l->watch[i].fn(l->watch[i].arg);
			return;
		}
	if (fd >= 0 && fd < l->nreg && (l->reg[fd] & REG_RAW)) {
		raw_event(l, fd);
		return;
	}
	if (l->multi == NULL)
		return;
	if (fd >= 0 && fd < l->nreg && (l->reg[fd] & REG_IDLE)) {
		/* A connection no transfer uses became readable: its peer
		 * closed it.  Stop watching; libcurl will drop it. */
		reg_set(l, fd, &l->reg[fd], 0);
		return;
	}
	if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
		flags |= CURL_CSELECT_IN;
	if (ev->events & EPOLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (ev->events & EPOLLERR)
		flags |= CURL_CSELECT_ERR;
	curl_multi_socket_action(l->multi, fd, flags, &running);
}

int
gcs_loop_run_once(gcs_loop *l, int timeout_ms)
{
	struct epoll_event ev[GCS_LOOP_EVENTS];
	int64_t now = 0, due = -1;
	gcs_task *t;
	int n, i, running;

	/* The clock is read only when a timer is set (a loop that serves
	 * only mem:// requests has none). */
	if (l->curl_due >= 0)
		due = l->curl_due;
	if (l->sleepers != NULL && (due < 0 || l->sleepers->wake_ms < due))
		due = l->sleepers->wake_ms;
	if (due >= 0 && due - (now = util_mono_ms()) < timeout_ms)
		timeout_ms = due <= now ? 0 : (int)(due - now);
	if (l->ready != NULL || timeout_ms < 0)
		timeout_ms = 0;
	n = epoll_wait(l->epfd, ev, GCS_LOOP_EVENTS, timeout_ms);
	for (i = 0; i < n; i++)
		dispatch(l, &ev[i]);
	if (l->curl_due >= 0 || l->sleepers != NULL)
		now = util_mono_ms();
	if (l->multi != NULL) {
		if (l->curl_due >= 0 && l->curl_due <= now) {
			l->curl_due = -1;
			curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT,
			    0, &running);
		}
		collect_done(l);
	}
	while ((t = l->sleepers) != NULL && t->wake_ms <= now) {
		l->sleepers = t->next;
		ready_push(l, t);
	}
	/* Tasks made ready now run now; any they make ready (none: a task
	 * only becomes ready through libcurl or a timer) wait a round. */
	t = l->ready;
	l->ready = l->ready_tail = NULL;
	while (t != NULL) {
		gcs_task *next = t->next;

		t->next = NULL;
		task_enter(t);
		t = next;
	}
	return n < 0 ? 0 : n;
}
