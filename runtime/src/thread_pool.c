/*===- thread_pool.c - A fixed pool of threads for kernel work items ------===*
 *
 * attn_thread_pool_parallel_for splits [0, n) into chunks that threads take
 * one at a time from an atomic counter: work items can cost very different
 * amounts (under a causal mask the last query tile does all the work of the
 * first several), so a static split would leave threads idle. Chunks are
 * guided: each takes 1/(2 x threads) of the items left, so that the first
 * ones cost next to nothing in taking and the last ones are single items,
 * which the threads finish at about the same time.
 *
 * Each call is a job on the caller's stack, queued for the workers; the
 * caller takes chunks of its own job too, so a call always finishes even
 * when every worker is busy elsewhere (several host threads sharing a pool,
 * or a parallel_for nested inside a task). Before returning, the caller
 * takes its job off the queue and waits, on a condition variable, until no
 * worker is still inside it.
 *
 * A pool made on a team (attn_thread_pool_create_on_team) has no queue and
 * no workers of its own: each call hands its job to the team's fork-join
 * call, whose threads run the same chunk loop.
 *===----------------------------------------------------------------------===*/
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct job {
  attn_task_fn task;
  void *task_ctx;
  int64_t n;
  int64_t share;        /* a chunk is the items left / share, at least one */
  _Atomic int64_t next; /* the first index no thread has taken yet */
  /* Under the pool's lock: */
  int workers_inside;
  bool queued;
  struct job *next_job;
} job;

struct attn_thread_pool {
  pthread_mutex_t lock;
  pthread_cond_t job_queued;  /* workers wait here for work */
  pthread_cond_t worker_left; /* callers wait here for their job's workers */
  job *queue;                 /* oldest first */
  bool stopping;
  int32_t size;        /* threads running a call's chunks, caller included */
  int32_t num_workers; /* size - 1; 0 on a team */
  pthread_t *workers;
  attn_team_run_fn team_run; /* set: calls run on this team instead */
  void *team_ctx;
};

/* Takes and runs chunks until none is left. A compare-and-swap rather than a
 * fetch-add, so that the counter never runs past n (and never wraps for an n
 * near INT64_MAX). */
static void run_chunks(job *j) {
  int64_t begin = atomic_load_explicit(&j->next, memory_order_relaxed);
  for (;;) {
    if (begin >= j->n)
      return;
    int64_t take = (j->n - begin) / j->share;
    int64_t end = begin + (take > 0 ? take : 1);
    if (atomic_compare_exchange_weak(&j->next, &begin, end)) {
      j->task(j->task_ctx, begin, end);
      begin = atomic_load_explicit(&j->next, memory_order_relaxed);
    }
  }
}

static void run_team_chunks(void *j) { run_chunks(j); }

static bool has_chunks_left(job *j) { return atomic_load(&j->next) < j->n; }

/* Call with the lock held. */
static void unqueue(attn_thread_pool *pool, job *j) {
  job **link = &pool->queue;
  while (*link && *link != j)
    link = &(*link)->next_job;
  if (*link)
    *link = j->next_job;
  j->queued = false;
}

/* The oldest job with chunks left; jobs found exhausted on the way are taken
 * off the queue. Call with the lock held. */
static job *next_open_job(attn_thread_pool *pool) {
  while (pool->queue && !has_chunks_left(pool->queue)) {
    pool->queue->queued = false;
    pool->queue = pool->queue->next_job;
  }
  job *j = pool->queue;
  while (j && !has_chunks_left(j))
    j = j->next_job;
  return j;
}

static void *worker_main(void *arg) {
  attn_thread_pool *pool = arg;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    job *j;
    while (!pool->stopping && !(j = next_open_job(pool)))
      pthread_cond_wait(&pool->job_queued, &pool->lock);
    if (pool->stopping)
      break;
    ++j->workers_inside;
    pthread_mutex_unlock(&pool->lock);
    run_chunks(j);
    pthread_mutex_lock(&pool->lock);
    if (--j->workers_inside == 0)
      pthread_cond_broadcast(&pool->worker_left);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

static void stop_workers(attn_thread_pool *pool, int32_t started) {
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->job_queued);
  pthread_mutex_unlock(&pool->lock);
  for (int32_t i = 0; i < started; ++i)
    pthread_join(pool->workers[i], NULL);
}

static void free_pool(attn_thread_pool *pool) {
  pthread_cond_destroy(&pool->worker_left);
  pthread_cond_destroy(&pool->job_queued);
  pthread_mutex_destroy(&pool->lock);
  free(pool->workers);
  free(pool);
}

attn_status attn_thread_pool_create(int32_t num_threads,
                                    attn_thread_pool **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_thread_pool_create: out is NULL");
  *out = NULL;
  if (num_threads <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    num_threads = online > 0 && online < INT32_MAX ? (int32_t)online : 1;
  }
  attn_thread_pool *pool = calloc(1, sizeof(*pool));
  if (!pool)
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "attn_thread_pool_create: out of memory");
  pool->size = num_threads;
  pool->num_workers = num_threads - 1;
  pool->workers = calloc((size_t)num_threads, sizeof(pthread_t));
  if (!pool->workers) {
    free(pool);
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "attn_thread_pool_create: out of memory for %d threads",
                     num_threads);
  }
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->job_queued, NULL);
  pthread_cond_init(&pool->worker_left, NULL);
  for (int32_t i = 0; i < pool->num_workers; ++i) {
    int error = pthread_create(&pool->workers[i], NULL, worker_main, pool);
    if (error) {
      stop_workers(pool, i);
      free_pool(pool);
      return attn_fail(ATTN_ERROR_INTERNAL,
                       "attn_thread_pool_create: cannot start thread %d of "
                       "%d: %s",
                       i + 1, num_threads - 1, strerror(error));
    }
  }
  *out = pool;
  return ATTN_OK;
}

attn_status attn_thread_pool_create_on_team(int32_t num_threads,
                                            attn_team_run_fn run,
                                            void *team_ctx,
                                            attn_thread_pool **out) {
  if (!out)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_thread_pool_create_on_team: out is NULL");
  *out = NULL;
  if (!run)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_thread_pool_create_on_team: run is NULL");
  if (num_threads < 1)
    return attn_fail(ATTN_ERROR_INVALID_ARGUMENT,
                     "attn_thread_pool_create_on_team: num_threads is %d but "
                     "a team has at least 1 thread",
                     num_threads);
  attn_thread_pool *pool = calloc(1, sizeof(*pool));
  if (!pool)
    return attn_fail(ATTN_ERROR_OUT_OF_MEMORY,
                     "attn_thread_pool_create_on_team: out of memory");
  pool->size = num_threads;
  pool->team_run = run;
  pool->team_ctx = team_ctx;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->job_queued, NULL);
  pthread_cond_init(&pool->worker_left, NULL);
  *out = pool;
  return ATTN_OK;
}

void attn_thread_pool_destroy(attn_thread_pool *pool) {
  if (!pool)
    return;
  stop_workers(pool, pool->num_workers);
  free_pool(pool);
}

int32_t attn_thread_pool_size(const attn_thread_pool *pool) {
  return pool ? pool->size : 1;
}

void attn_thread_pool_parallel_for(void *pool_ptr, int64_t n, attn_task_fn task,
                                   void *task_ctx) {
  attn_thread_pool *pool = pool_ptr;
  if (n <= 0)
    return;
  if (!pool || pool->size == 1 || n == 1) {
    task(task_ctx, 0, n);
    return;
  }
  job j = {.task = task,
           .task_ctx = task_ctx,
           .n = n,
           .share = 2 * (int64_t)pool->size,
           .workers_inside = 0,
           .queued = true,
           .next_job = NULL};
  atomic_init(&j.next, 0);

  if (pool->team_run) {
    int32_t team = n < pool->size ? (int32_t)n : pool->size;
    pool->team_run(pool->team_ctx, team, run_team_chunks, &j);
    return;
  }

  pthread_mutex_lock(&pool->lock);
  job **tail = &pool->queue;
  while (*tail)
    tail = &(*tail)->next_job;
  *tail = &j;
  pthread_cond_broadcast(&pool->job_queued);
  pthread_mutex_unlock(&pool->lock);

  run_chunks(&j);

  /* Every chunk is taken; once no worker is inside, every chunk is done and
   * the job, on this stack, may go. */
  pthread_mutex_lock(&pool->lock);
  if (j.queued)
    unqueue(pool, &j);
  while (j.workers_inside > 0)
    pthread_cond_wait(&pool->worker_left, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
}
