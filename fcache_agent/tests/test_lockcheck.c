/* SPDX-License-Identifier: Apache-2.0 */
/* The test build's held-lock assertions (common/lockcheck.c): what each
 * mutex call records for the calling thread, that a condition wait keeps
 * the record, that another thread's lock is not ours, and that a broken
 * contract aborts naming the function, file, line and lock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/lockcheck.h"

#ifndef FC_LOCKCHECK
#error "the unit tests are built with FC_LOCKCHECK (Makefile, SAN_FLAGS)"
#endif

static void
lock_and_unlock_are_recorded(void **state)
{
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, n = PTHREAD_MUTEX_INITIALIZER;

  FC_ASSERT_NOT_HELD(&m);
  assert_int_equal(pthread_mutex_lock(&m), 0);
  FC_ASSERT_HELD(&m);
  FC_ASSERT_NOT_HELD(&n);
  assert_int_equal(pthread_mutex_lock(&n), 0);
  FC_ASSERT_HELD(&n);
  /* Released out of order: the other stays recorded. */
  assert_int_equal(pthread_mutex_unlock(&m), 0);
  FC_ASSERT_NOT_HELD(&m);
  FC_ASSERT_HELD(&n);
  assert_int_equal(pthread_mutex_unlock(&n), 0);
  FC_ASSERT_NOT_HELD(&n);
}

static void
trylock_and_timedlock_are_recorded(void **state)
{
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  struct timespec ts;

  assert_int_equal(pthread_mutex_trylock(&m), 0);
  FC_ASSERT_HELD(&m);
  assert_int_equal(pthread_mutex_unlock(&m), 0);
  FC_ASSERT_NOT_HELD(&m);
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 5;
  assert_int_equal(pthread_mutex_timedlock(&m, &ts), 0);
  FC_ASSERT_HELD(&m);
  assert_int_equal(pthread_mutex_unlock(&m), 0);
  FC_ASSERT_NOT_HELD(&m);
}

/* The other thread's view of a mutex the main thread holds. */
static void *
other_thread(void *arg)
{
  pthread_mutex_t *m = arg;
  struct timespec ts;

  FC_ASSERT_NOT_HELD(m);
  /* Failed attempts record nothing. */
  if (pthread_mutex_trylock(m) != EBUSY)
    return "trylock of a held mutex did not fail";
  clock_gettime(CLOCK_REALTIME, &ts);
  if (pthread_mutex_timedlock(m, &ts) != ETIMEDOUT)
    return "timedlock of a held mutex did not time out";
  FC_ASSERT_NOT_HELD(m);
  return NULL;
}

static void
another_threads_lock_is_not_ours(void **state)
{
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_t t;
  void *res;

  assert_int_equal(pthread_mutex_lock(&m), 0);
  assert_int_equal(pthread_create(&t, NULL, other_thread, &m), 0);
  assert_int_equal(pthread_join(t, &res), 0);
  assert_null(res);
  FC_ASSERT_HELD(&m);
  assert_int_equal(pthread_mutex_unlock(&m), 0);
}

static void
a_condition_wait_keeps_the_record(void **state)
{
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  struct timespec ts;

  assert_int_equal(pthread_mutex_lock(&m), 0);
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  /* libc releases and retakes m inside, unseen by the wrappers; the
   * thread holds m again when the wait returns. */
  assert_int_equal(pthread_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
  FC_ASSERT_HELD(&m);
  assert_int_equal(pthread_mutex_unlock(&m), 0);
  FC_ASSERT_NOT_HELD(&m);
}

/* Runs fn in a child and returns what it wrote to stderr; the child must
 * have died of SIGABRT. */
static void
child_aborts(void (*fn)(void), char *out, size_t len)
{
  int fds[2];
  pid_t pid;
  int status;
  ssize_t n, got = 0;

  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    fn();
    _exit(0);
  }
  close(fds[1]);
  while (got < (ssize_t)len - 1 && (n = read(fds[0], out + got, len - 1 - got)) > 0)
    got += n;
  out[got] = '\0';
  close(fds[0]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGABRT);
}

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;

static void
needs_the_lock_locked(void)
{
  FC_ASSERT_HELD(&shared);
}

static void
must_not_hold_it(void)
{
  pthread_mutex_lock(&shared);
  FC_ASSERT_NOT_HELD(&shared);
}

static void
a_broken_contract_aborts_naming_it(void **state)
{
  char msg[512];

  child_aborts(needs_the_lock_locked, msg, sizeof msg);
  assert_non_null(strstr(msg, "test_lockcheck.c:"));
  assert_non_null(strstr(msg, "needs_the_lock_locked"));
  assert_non_null(strstr(msg, "&shared is not held by this thread"));

  child_aborts(must_not_hold_it, msg, sizeof msg);
  assert_non_null(strstr(msg, "must_not_hold_it"));
  assert_non_null(strstr(msg, "&shared is already held by this thread"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(lock_and_unlock_are_recorded),
    cmocka_unit_test(trylock_and_timedlock_are_recorded),
    cmocka_unit_test(another_threads_lock_is_not_ours),
    cmocka_unit_test(a_condition_wait_keeps_the_record),
    cmocka_unit_test(a_broken_contract_aborts_naming_it),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
