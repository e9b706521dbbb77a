/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the cache-engine unit tests: scratch directories,
 * deterministic pseudo-random data, and a runner that gives each test its
 * own process and a time limit, so that a deadlock in the code under test
 * fails that one test instead of hanging `make check`. */
#ifndef FCACHE_TESTUTIL_H
#define FCACHE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static inline const char *
tu_tmpdir(void)
{
  const char *tmp = getenv("TMPDIR");

  return tmp && *tmp ? tmp : "/tmp";
}

/* A fresh private directory under $TMPDIR (or /tmp), named after the
 * process so that tu_run_isolated can clean up after a killed test. */
static inline void
tu_mkdtemp(char *dir, size_t len)
{
  snprintf(dir, len, "%s/fcache-test-%ld-XXXXXX", tu_tmpdir(), (long)getpid());
  assert_non_null(mkdtemp(dir));
}

/* Remove a flat directory made by tu_mkdtemp and everything in it. */
static inline void
tu_rmrf(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *de;

  if (!d)
    return;
  while ((de = readdir(d))) {
    char p[512];

    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static inline void
tu_path(char *out, size_t len, const char *dir, const char *name)
{
  int n = snprintf(out, len, "%s/%s", dir, name);

  assert_true(n > 0 && (size_t)n < len);
}

/* xorshift64*: deterministic, so a failure reproduces. */
static inline uint64_t
tu_rand(uint64_t *s)
{
  uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline void
tu_fill(void *buf, size_t len, uint64_t *seed)
{
  unsigned char *p = buf;

  for (size_t i = 0; i < len; i++) {
    if (i % 8 == 0) {
      uint64_t r = tu_rand(seed);
      size_t k = len - i < 8 ? len - i : 8;
      memcpy(p + i, &r, k);
    }
  }
}

/* Create (or replace) a file of exactly `len` bytes with these contents. */
static inline void
tu_write_file(const char *path, const void *data, size_t len)
{
  FILE *f = fopen(path, "wb");

  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* Read `len` bytes at `off` of a file through its own descriptor. */
static inline void
tu_read_file(const char *path, void *data, size_t len, off_t off)
{
  FILE *f = fopen(path, "rb");

  assert_non_null(f);
  assert_int_equal(fseeko(f, off, SEEK_SET), 0);
  assert_int_equal(fread(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* Run every test in a child process of its own, killed after timeout_s
 * seconds.  Returns the number of tests that failed, crashed or timed out
 * (0 on success), suitable as main()'s return value.  TU_FILTER=substring
 * in the environment runs only the tests whose name contains it. */
static inline int
tu_run_isolated(const char *group, const struct CMUnitTest *tests, size_t n,
                unsigned timeout_s)
{
  const char *filter = getenv("TU_FILTER");
  int failed = 0;
  size_t ran = 0;

  for (size_t i = 0; i < n; i++) {
    pid_t pid;
    int status;

    if (filter && *filter && !strstr(tests[i].name, filter))
      continue;
    ran++;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      alarm(timeout_s);
      exit(_cmocka_run_group_tests(group, &tests[i], 1, NULL, NULL) ? 1 : 0);
    }
    while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
      ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      continue;
    failed++;
    /* A killed child left its scratch directories behind. */
    if (WIFSIGNALED(status)) {
      char pat[256];
      glob_t g;

      snprintf(pat, sizeof pat, "%s/fcache-test-%ld-*", tu_tmpdir(), (long)pid);
      if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t k = 0; k < g.gl_pathc; k++)
          tu_rmrf(g.gl_pathv[k]);
        globfree(&g);
      }
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      printf("[  TIMEOUT ] %s: no result after %u s (probable deadlock)\n",
             tests[i].name, timeout_s);
    else if (WIFSIGNALED(status))
      printf("[  CRASHED ] %s: killed by signal %d\n", tests[i].name,
             WTERMSIG(status));
    else
      printf("[  FAILED  ] %s (exit status %d)\n", tests[i].name,
             WEXITSTATUS(status));
  }
  printf("[==========] %s: %zu test(s) in separate processes, %d failed.\n",
         group, ran, failed);
  fflush(stdout);
  return failed;
}

#endif
