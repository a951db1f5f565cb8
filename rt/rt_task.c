/*
 * rt_task.c: tasks of the runtime (rt.h): coroutines and their stacks.
 *
 * Tasks are coroutines, each on an mmap'ed stack with a guard page below
 * it.  A task is only ever entered from its loop's thread, on that
 * thread's own stack (from rt_loop_spawn or rt_loop_run_once), and it
 * returns there when it yields; so tasks never migrate between threads
 * and thread-local state stays valid in them.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_int.h"

#ifdef RT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

__thread rt_task *rt_tl_task;

/*
 * Switching stacks.  On x86-64 a task switch saves the callee-saved
 * registers and the SSE/x87 control words on the stack it leaves and
 * stores that stack pointer (rt_switch, below); ucontext elsewhere.
 * glibc's swapcontext also saves and restores the signal mask, a system
 * call on every switch, four times per storage request: the loops'
 * threads never change their mask, so there is nothing to keep.
 */
#if defined(RT_ASM_SWITCH)
/* Save the caller's state on its stack and its stack pointer in FROM->sp,
 * then continue the context whose stack pointer is TO->sp. */
void rt_switch(rt_ctx *from, rt_ctx *to);
/* Where a new task's first switch lands: calls rt_task_start(rbx). */
void rt_trampoline(void);
__asm__(".text\n"
        ".globl rt_switch\n"
        ".type rt_switch,@function\n"
        "rt_switch:\n"
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
        ".size rt_switch,.-rt_switch\n"
        ".globl rt_trampoline\n"
        ".type rt_trampoline,@function\n"
        "rt_trampoline:\n"
        "	movq %rbx, %rdi\n"
        "	call rt_task_start\n"
        "	ud2\n"
        ".size rt_trampoline,.-rt_trampoline\n");
#endif

void rt_task_start(rt_task *t);
#if !defined(RT_ASM_SWITCH)
static void task_main(void);
#endif

/* From the context saved in FROM to the one in TO. */
static inline void
ctx_switch(rt_ctx *from, rt_ctx *to)
{
#if defined(RT_ASM_SWITCH)
	rt_switch(from, to);
#else
	swapcontext(from, to);
#endif
}

/* Make T's context start in rt_task_start(T) on its own stack. */
static int
ctx_init(rt_task *t)
{
#if defined(RT_ASM_SWITCH)
	uint64_t *sp = (uint64_t *)(void *)(t->stack + t->stack_len);
	uint32_t mxcsr;
	uint16_t fpucw;

	/* The frame rt_switch pops, top of the stack first: the return
	 * address (the trampoline), rbp, rbx (T), r12-r15, the control
	 * words.  Its `ret` leaves the stack pointer at the 16-byte aligned
	 * top, as the ABI wants it before the trampoline's call. */
	__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(fpucw));
	*--sp = (uint64_t)(uintptr_t)rt_trampoline;
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

void
rt_task_unmap(rt_task *t)
{
	if (t->map != NULL)
		munmap(t->map, t->map_len);
	free(t);
}

rt_task *
rt_task_new(rt_loop *l)
{
	long page = sysconf(_SC_PAGESIZE);
	rt_task *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	if (page <= 0)
		page = 4096;
	t->loop = l;
	t->map_len = RT_TASK_STACK + (size_t)page;
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
	t->stack_len = RT_TASK_STACK;
	if (ctx_init(t) != 0)
		goto fail;
	return t;
fail:
	rt_task_unmap(t);
	return NULL;
}

bool
rt_task_enter(rt_task *t)
{
	rt_loop *l = t->loop;
	rt_task *prev = rt_tl_task;
	rt_ctx here;
#ifdef RT_ASAN
	void *fake = NULL;
#endif

	/* HERE outlives every use: T switches back to it before this call
	 * returns, and each entry sets it anew. */
	// cppcheck-suppress autoVariables
	t->back = &here;
	rt_tl_task = t;
#ifdef RT_ASAN
	__sanitizer_start_switch_fiber(&fake, t->stack, t->stack_len);
#endif
	ctx_switch(&here, &t->ctx);
#ifdef RT_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
	rt_tl_task = prev;
	if (!t->finished)
		return false;
	__atomic_sub_fetch(&l->live, 1, __ATOMIC_RELEASE);
	if (t->detached && t->done != NULL)
		t->done(t->arg);
	t->fn = NULL;
	t->arg = NULL;
	if (l->nspare < RT_TASKS_SPARE) {
		t->next = l->spare;
		l->spare = t;
		l->nspare++;
	} else
		rt_task_unmap(t);
	return true;
}

void
rt_task_yield(rt_task *t)
{
#ifdef RT_ASAN
	__sanitizer_start_switch_fiber(&t->asan_fake, t->back_bottom,
	    t->back_size);
#endif
	ctx_switch(&t->ctx, t->back);
#ifdef RT_ASAN
	__sanitizer_finish_switch_fiber(t->asan_fake, &t->back_bottom,
	    &t->back_size);
#endif
}

/* Every task starts here once, and runs one FN per entry after a
 * finish: a finished task is parked in rt_task_yield until reused.  Not
 * static: the x86-64 trampoline calls it. */
void
rt_task_start(rt_task *t)
{
#ifdef RT_ASAN
	__sanitizer_finish_switch_fiber(NULL, &t->back_bottom, &t->back_size);
#endif
	for (;;) {
		t->fn(t->arg);
		t->finished = true;
		rt_task_yield(t);
	}
}

#if !defined(RT_ASM_SWITCH)
static void
task_main(void)
{
	rt_task_start(rt_tl_task);
}
#endif

int
rt_loop_spawn(rt_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg))
{
	rt_task *t = l->spare;

	if (t != NULL) {
		l->spare = t->next;
		l->nspare--;
	} else if ((t = rt_task_new(l)) == NULL)
		return -1;
	t->fn = fn;
	t->arg = arg;
	t->done = done;
	t->finished = false;
	t->detached = false;
	t->deadline_ms = 0;
	t->next = NULL;
	__atomic_add_fetch(&l->live, 1, __ATOMIC_RELEASE);
	if (rt_task_enter(t))
		return 1;
	t->detached = true;
	return 0;
}

/* A new task rather than a spare: the spares are the loop thread's. */
int
rt_loop_spawn_remote(rt_loop *l, void (*fn)(void *arg), void *arg,
    void (*done)(void *arg))
{
	rt_task *t = rt_task_new(l);

	if (t == NULL)
		return -1;
	t->fn = fn;
	t->arg = arg;
	t->done = done;
	t->detached = true;
	__atomic_add_fetch(&l->live, 1, __ATOMIC_RELEASE);
	rt_task_resume_remote(t);
	return 0;
}

int
rt_loop_tasks(const rt_loop *l)
{
	return __atomic_load_n(&l->live, __ATOMIC_ACQUIRE);
}

void
rt_task_deadline_set(int64_t ms)
{
	if (rt_tl_task != NULL)
		rt_tl_task->deadline_ms = ms;
}

int64_t
rt_task_deadline(void)
{
	return rt_tl_task != NULL ? rt_tl_task->deadline_ms : 0;
}

bool
rt_in_task(void)
{
	return rt_tl_task != NULL;
}

rt_task *
rt_task_self(void)
{
	return rt_tl_task;
}

rt_loop *
rt_loop_self(void)
{
	return rt_tl_task != NULL ? rt_tl_task->loop : NULL;
}

void
rt_task_suspend(void)
{
	rt_task_yield(rt_tl_task);
}

void
rt_task_resume(rt_task *t)
{
	rt_ready_push(t->loop, t);
}
