/* SPDX-License-Identifier: Apache-2.0 */
/* The test build's record of which mutexes each thread holds, kept by
 * wrappers around the pthread mutex calls (the sanitizer builds link with
 * -Wl,--wrap=pthread_mutex_lock,... so a call in the agent's code to
 * pthread_mutex_lock reaches __wrap_pthread_mutex_lock, and
 * __real_pthread_mutex_lock is libc's).  Calls made inside libc or a
 * shared library (libnbd, gnutls) are not wrapped; they lock their own
 * mutexes, which the agent never asserts on.
 *
 * pthread_cond_wait and pthread_cond_timedwait release and retake the
 * mutex inside libc, unseen by the wrappers.  The record stays: the
 * waiting thread is blocked for the whole time it does not hold the
 * mutex, so it can assert nothing then, and it holds the mutex again
 * before the wait returns.
 *
 * Compiled only with FC_LOCKCHECK (the sanitizer builds); in the release
 * build this file is empty and nothing is wrapped. */
#ifdef FC_LOCKCHECK

#include "common/lockcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The most one thread holds at once: a ucache barrier takes all 256
 * stripes (FC_STRIPES) and a few locks around them.  An overflow aborts
 * rather than forgets. */
#define HELD_MAX 512

/* The one piece of thread-local state in the agent, and only in the test
 * build: which mutexes this thread holds is a property of the thread,
 * which is exactly what the assertions ask about, and no lock of its own
 * is needed to read it. */
static _Thread_local const pthread_mutex_t *held[HELD_MAX];
static _Thread_local int nheld;

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __real_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m);
int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);

static int find(const pthread_mutex_t *m)
{
  for (int i = nheld - 1; i >= 0; i--)
    if (held[i] == m)
      return i;
  return -1;
}

static void record(const pthread_mutex_t *m)
{
  if (nheld == HELD_MAX) {
    fprintf(stderr, "lockcheck: thread holds more than %d mutexes\n", HELD_MAX);
    abort();
  }
  held[nheld++] = m;
}

static void forget(const pthread_mutex_t *m)
{
  int i = find(m);
  if (i < 0)
    return;  /* locked where no wrapper saw it */
  for (; i < nheld - 1; i++)
    held[i] = held[i + 1];
  nheld--;
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
  int rc = __real_pthread_mutex_lock(m);
  if (rc == 0)
    record(m);
  return rc;
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
  int rc = __real_pthread_mutex_trylock(m);
  if (rc == 0)
    record(m);
  return rc;
}

int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
  int rc = __real_pthread_mutex_timedlock(m, abstime);
  if (rc == 0)
    record(m);
  return rc;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
  forget(m);
  return __real_pthread_mutex_unlock(m);
}

void fc_lockcheck_assert(const pthread_mutex_t *m, int want_held, const char *expr,
                         const char *func, const char *file, int line)
{
  if ((find(m) >= 0) == !!want_held)
    return;
  fprintf(stderr, "%s:%d: %s: lock assertion failed: %s %s\n", file, line, func, expr,
          want_held ? "is not held by this thread" : "is already held by this thread");
  abort();
}

#endif
