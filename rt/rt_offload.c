/*
 * rt_offload.c: rt_offload (rt.h), the runtime's one way to run blocking
 * work for a task: a small pool of threads, grown on demand, that runs
 * each job and then resumes the task that asked, on its own loop
 * (rt_task_resume_remote).
 *
 * A job lives on its task's stack: the task is suspended until the job is
 * done, and the pool's thread touches the job no more once it has resumed
 * the task.
 */
#include <pthread.h>
#include <stdlib.h>

#include "rt_int.h"

#define OFFLOAD_MAX 1024 /* rt_offload_size's bound */

typedef struct job {
	void (*fn)(void *);
	void *arg;
	rt_task *task;
	struct job *next;
} job;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t work;
	job *head, *tail;
	int queued;  /* jobs in the queue */
	int idle;    /* threads waiting for a job */
	int size;    /* threads at most; 0: RT_OFFLOAD_THREADS */
	int nthread; /* started, not yet joined */
	bool stop;
	pthread_t thread[OFFLOAD_MAX];
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER };

static void *
pool_main(void *arg)
{
	job *j;
	rt_task *t;

	(void)arg;
	pthread_mutex_lock(&pool.mu);
	for (;;) {
		if ((j = pool.head) != NULL) {
			pool.head = j->next;
			if (pool.head == NULL)
				pool.tail = NULL;
			pool.queued--;
			pthread_mutex_unlock(&pool.mu);
			j->fn(j->arg);
			t = j->task; /* J is gone once T runs */
			rt_task_resume_remote(t);
			pthread_mutex_lock(&pool.mu);
			continue;
		}
		if (pool.stop)
			break;
		pool.idle++;
		pthread_cond_wait(&pool.work, &pool.mu);
		pool.idle--;
	}
	pthread_mutex_unlock(&pool.mu);
	return NULL;
}

/* Queue J; 0, or -1 when no thread runs nor could be started (J is then
 * not queued).  POOL.mu held. */
static int
pool_queue(job *j)
{
	int size = pool.size > 0 ? pool.size : RT_OFFLOAD_THREADS;

	if (pool.queued >= pool.idle && pool.nthread < size &&
	    pthread_create(&pool.thread[pool.nthread], NULL, pool_main, NULL) ==
	        0)
		pool.nthread++;
	if (pool.nthread == 0)
		return -1;
	j->next = NULL;
	if (pool.tail != NULL)
		pool.tail->next = j;
	else
		pool.head = j;
	pool.tail = j;
	pool.queued++;
	pthread_cond_signal(&pool.work);
	return 0;
}

void
rt_offload(void (*fn)(void *arg), void *arg)
{
	job j = { fn, arg, rt_tl_task, NULL };
	int rc;

	if (j.task == NULL) {
		fn(arg);
		return;
	}
	pthread_mutex_lock(&pool.mu);
	rc = pool.stop ? -1 : pool_queue(&j);
	pthread_mutex_unlock(&pool.mu);
	if (rc != 0) {
		fn(arg);
		return;
	}
	/* Resumed by the pool's thread once FN has returned; the loop takes
	 * remote resumes only after this task has yielded. */
	rt_task_yield(j.task);
}

void
rt_offload_size(int n)
{
	pthread_mutex_lock(&pool.mu);
	pool.size = n < 1 ? 1 : n > OFFLOAD_MAX ? OFFLOAD_MAX : n;
	pthread_mutex_unlock(&pool.mu);
}

void
rt_offload_stop(void)
{
	int i, n;

	pthread_mutex_lock(&pool.mu);
	pool.stop = true;
	pthread_cond_broadcast(&pool.work);
	n = pool.nthread;
	pthread_mutex_unlock(&pool.mu);
	for (i = 0; i < n; i++)
		pthread_join(pool.thread[i], NULL);
	pthread_mutex_lock(&pool.mu);
	pool.nthread = 0;
	pool.stop = false;
	pthread_mutex_unlock(&pool.mu);
}
