/* SPDX-License-Identifier: Apache-2.0 */
/* Reuse working set trackers: the exact tracker's sizes against counts
 * worked out by hand, its memory coming back after a burst, and the
 * sampled tracker against the exact one on generated traces (zipf reuse,
 * a scan through a hot set, a working set that drifts), where it must stay
 * within 2 % and under its memory bound.
 *
 * FC_RWS_BENCH=1 in the environment runs the comparison at 1M-4M distinct
 * blocks a window instead of the quick sizes, and prints the figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/rws.h"

#define MIB (1024u * 1024u)

static void
test_bad_input(void **state)
{
  struct fc_rws *t = NULL;

  assert_int_equal(fc_rws_new((enum fc_rws_mode)7, MIB, &t), -EINVAL);
  assert_int_equal(fc_rws_new(FC_RWS_SAMPLED, 4095, &t), -EINVAL);
  assert_int_equal(fc_rws_new(FC_RWS_SAMPLED, 0, &t), -EINVAL);
  assert_null(t);
  /* The exact tracker has no bound to check. */
  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &t), 0);
  fc_rws_free(t);
  fc_rws_free(NULL);
}

/* Block b accessed b + 1 times, for b = 0..9: |RWS_n| = blocks with at
 * least n + 1 accesses = 10 - n, and 1 + 2 + ... + 10 = 55 accesses. */
static void
test_exact_counts(void **state)
{
  struct fc_rws *t;
  struct fc_rws_sizes sz;

  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &t), 0);
  for (uint64_t b = 0; b < 10; b++)
    for (uint64_t k = 0; k <= b; k++)
      fc_rws_access(t, 1000 + b * 77);
  fc_rws_close_window(t, &sz);
  for (unsigned n = 0; n <= FC_RWS_MAX_N; n++)
    assert_int_equal(sz.blocks[n], 10 - n);
  assert_int_equal(sz.accesses, 55);
  assert_true(fc_rws_sample_rate(t) == 1.0);

  /* The next window starts empty. */
  fc_rws_access(t, 5);
  fc_rws_close_window(t, &sz);
  assert_int_equal(sz.blocks[0], 1);
  assert_int_equal(sz.blocks[1], 0);
  assert_int_equal(sz.accesses, 1);
  fc_rws_close_window(t, &sz);
  assert_int_equal(sz.blocks[0], 0);
  assert_int_equal(sz.accesses, 0);
  fc_rws_free(t);
}

/* Counts saturate at 255 instead of wrapping to 0 (which would also mark
 * the slot empty); block 0 and UINT64_MAX are blocks like any other. */
static void
test_exact_saturates(void **state)
{
  struct fc_rws *t;
  struct fc_rws_sizes sz;

  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &t), 0);
  for (unsigned k = 0; k < 1000; k++) {
    fc_rws_access(t, 0);
    fc_rws_access(t, UINT64_MAX);
  }
  fc_rws_access(t, 3);
  fc_rws_close_window(t, &sz);
  assert_int_equal(sz.blocks[0], 3);
  for (unsigned n = 1; n <= FC_RWS_MAX_N; n++)
    assert_int_equal(sz.blocks[n], 2);
  assert_int_equal(sz.accesses, 2001);
  fc_rws_free(t);
}

/* A burst of 200k blocks grows the table; two quiet windows later the
 * memory is back near the start, and the counts were right all along. */
static void
test_exact_grows_and_shrinks(void **state)
{
  struct fc_rws *t;
  struct fc_rws_sizes sz;
  size_t start, burst;

  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &t), 0);
  start = fc_rws_memory(t);
  for (uint64_t b = 0; b < 200000; b++) {
    fc_rws_access(t, b);
    if (b % 3 == 0)
      fc_rws_access(t, b);
  }
  burst = fc_rws_memory(t);
  assert_true(burst >= 200000 * 9);
  fc_rws_close_window(t, &sz);
  assert_int_equal(sz.blocks[0], 200000);
  assert_int_equal(sz.blocks[1], 66667);
  assert_int_equal(sz.blocks[2], 0);
  assert_int_equal(sz.accesses, 266667);

  for (uint64_t b = 0; b < 100; b++)
    fc_rws_access(t, b);
  fc_rws_close_window(t, &sz);
  assert_int_equal(sz.blocks[0], 100);
  assert_true(fc_rws_memory(t) <= start);
  print_message("exact: %zu bytes at start, %zu after 200k blocks, %zu after "
                "a window of 100\n", start, burst, fc_rws_memory(t));
  fc_rws_free(t);
}

/* While the window fits its table, the sampled tracker is exact. */
static void
test_sampled_exact_when_small(void **state)
{
  struct fc_rws *s, *e;
  struct fc_rws_sizes ss, es;

  assert_int_equal(fc_rws_new(FC_RWS_SAMPLED, 4096, &s), 0);
  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &e), 0);
  for (uint64_t b = 0; b < 300; b++)
    for (uint64_t k = 0; k <= b % 4; k++) {
      fc_rws_access(s, b * 4096);
      fc_rws_access(e, b * 4096);
    }
  assert_true(fc_rws_sample_rate(s) == 1.0);
  assert_true(fc_rws_memory(s) <= 4096);
  fc_rws_close_window(s, &ss);
  fc_rws_close_window(e, &es);
  assert_memory_equal(&ss, &es, sizeof ss);
  assert_int_equal(ss.blocks[0], 300);
  assert_int_equal(ss.blocks[3], 75);
  fc_rws_free(s);
  fc_rws_free(e);
}

/* Too many blocks for the table: the rate falls, and starts at 1 again at
 * the next window. */
static void
test_sampled_rate_restarts(void **state)
{
  struct fc_rws *s;
  struct fc_rws_sizes sz;

  assert_int_equal(fc_rws_new(FC_RWS_SAMPLED, 4096, &s), 0);
  for (uint64_t b = 0; b < 100000; b++)
    fc_rws_access(s, b);
  assert_true(fc_rws_sample_rate(s) < 0.01);
  assert_true(fc_rws_memory(s) <= 4096);
  fc_rws_close_window(s, &sz);
  /* A few hundred samples: within 20 % is all one can ask. */
  assert_true(sz.blocks[0] > 80000 && sz.blocks[0] < 120000);
  assert_int_equal(sz.blocks[1], 0);
  assert_int_equal(sz.accesses, 100000);
  assert_true(fc_rws_sample_rate(s) == 1.0);
  fc_rws_access(s, 1);
  fc_rws_close_window(s, &sz);
  assert_int_equal(sz.blocks[0], 1);
  fc_rws_free(s);
}

/* Trace generators, deterministic from a seed. */

struct rng {
  uint64_t s;
};

static uint64_t
rng_next(struct rng *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double
rng_unit(struct rng *r)
{
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* A rank in [0, n) whose popularity falls as rank^-0.9: the inverse of
 * the continuous power law's distribution, close enough to zipf for a
 * skewed reuse pattern. */
static uint64_t
zipf_rank(struct rng *r, uint64_t n)
{
  const double e = 1.0 - 0.9;
  double top = pow((double)n + 1.0, e) - 1.0;
  double x = pow(1.0 + rng_unit(r) * top, 1.0 / e) - 1.0;
  uint64_t k = (uint64_t)x;

  return k < n ? k : n - 1;
}

enum trace_kind { TRACE_ZIPF, TRACE_SCAN, TRACE_DRIFT };

struct trace {
  const char *name;
  enum trace_kind kind;
  uint64_t distinct;      /* the footprint the trace draws from */
  uint64_t per_window;    /* accesses a window */
};

struct gen {
  struct rng rng;
  uint64_t scan_pos;
};

static uint64_t
trace_block(const struct trace *tr, struct gen *g, unsigned window)
{
  switch (tr->kind) {
  case TRACE_ZIPF:
    return zipf_rank(&g->rng, tr->distinct) * 8;
  case TRACE_SCAN:
    /* Half the accesses scan a disk from start to end (a backup), never
     * reused in the window; the others reuse a hot tenth. */
    if (rng_next(&g->rng) & 1)
      return (1ull << 40) + g->scan_pos++;
    return zipf_rank(&g->rng, tr->distinct / 10) * 8;
  case TRACE_DRIFT:
    /* Uniform over a range that slides a quarter of itself each window:
     * two accesses a block on average, some once, some many times. */
    return (window * (tr->distinct / 4) + rng_next(&g->rng) % tr->distinct) * 8;
  }
  return 0;
}

struct error_sum {
  double wss, rwss1, rwss2;
  unsigned windows;
};

static double
rel_err(uint64_t est, uint64_t exact)
{
  if (exact == 0)
    return est == 0 ? 0.0 : 1.0;
  return fabs((double)est - (double)exact) / (double)exact;
}

/* Feed one trace to both trackers; add up the relative errors per window
 * and check the sampled tracker's memory every 64k accesses. */
static void
compare_trace(const struct trace *tr, unsigned windows, size_t max_bytes,
              uint64_t seed, struct error_sum *all)
{
  struct fc_rws *s, *e;
  struct fc_rws_sizes ss, es;
  struct gen g = { .rng = { seed }, .scan_pos = 0 };
  struct error_sum mine = { 0 };
  size_t peak_sampled = 0, peak_exact = 0;
  double min_rate = 1.0;

  assert_int_equal(fc_rws_new(FC_RWS_SAMPLED, max_bytes, &s), 0);
  assert_int_equal(fc_rws_new(FC_RWS_EXACT, 0, &e), 0);
  for (unsigned w = 0; w < windows; w++) {
    for (uint64_t i = 0; i < tr->per_window; i++) {
      uint64_t b = trace_block(tr, &g, w);

      fc_rws_access(s, b);
      fc_rws_access(e, b);
      if ((i & 0xffff) == 0) {
        assert_true(fc_rws_memory(s) <= max_bytes);
        if (fc_rws_memory(s) > peak_sampled)
          peak_sampled = fc_rws_memory(s);
      }
    }
    if (fc_rws_memory(e) > peak_exact)
      peak_exact = fc_rws_memory(e);
    if (fc_rws_sample_rate(s) < min_rate)
      min_rate = fc_rws_sample_rate(s);
    fc_rws_close_window(s, &ss);
    fc_rws_close_window(e, &es);
    assert_int_equal(ss.accesses, es.accesses);
    mine.wss += rel_err(ss.blocks[0], es.blocks[0]);
    mine.rwss1 += rel_err(ss.blocks[1], es.blocks[1]);
    mine.rwss2 += rel_err(ss.blocks[2], es.blocks[2]);
    mine.windows++;
  }
  print_message("%-6s WSS %8.0f RWSS_1 %8.0f (last window)  MARE WSS %.2f %% "
                "RWSS_1 %.2f %% RWSS_2 %.2f %%  rate >= %.4f  memory: sampled "
                "%zu B, exact %zu B\n", tr->name, (double)es.blocks[0],
                (double)es.blocks[1], 100 * mine.wss / mine.windows,
                100 * mine.rwss1 / mine.windows, 100 * mine.rwss2 / mine.windows,
                min_rate, peak_sampled, peak_exact);
  all->wss += mine.wss;
  all->rwss1 += mine.rwss1;
  all->rwss2 += mine.rwss2;
  all->windows += mine.windows;
  fc_rws_free(s);
  fc_rws_free(e);
}

static void
test_sampled_error_bound(void **state)
{
  /* The quick sizes (working sets of 0.7M-0.9M blocks) keep the test to a
   * few seconds under ASan while staying far above what 1 MiB holds (~87k
   * blocks); the bench's are 2.3M-3.3M. */
  const struct trace quick[] = {
    { "zipf", TRACE_ZIPF, 4000000, 2000000 },
    { "scan", TRACE_SCAN, 1000000, 1600000 },
    { "drift", TRACE_DRIFT, 1000000, 2000000 },
  };
  const struct trace bench[] = {
    { "zipf", TRACE_ZIPF, 16000000, 6000000 },
    { "scan", TRACE_SCAN, 4000000, 6000000 },
    { "drift", TRACE_DRIFT, 3000000, 6000000 },
  };
  const char *env = getenv("FC_RWS_BENCH");
  bool big = env && *env && strcmp(env, "0");
  const struct trace *traces = big ? bench : quick;
  unsigned windows = big ? 8 : 3;
  struct error_sum all = { 0 };

  for (unsigned i = 0; i < 3; i++)
    compare_trace(&traces[i], windows, MIB, 42 + i, &all);
  print_message("all    MARE WSS %.2f %% RWSS_1 %.2f %% RWSS_2 %.2f %% over %u "
                "windows, 1 MiB bound\n", 100 * all.wss / all.windows,
                100 * all.rwss1 / all.windows, 100 * all.rwss2 / all.windows,
                all.windows);
  assert_true(all.wss / all.windows <= 0.02);
  assert_true(all.rwss1 / all.windows <= 0.02);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_exact_counts),
    cmocka_unit_test(test_exact_saturates),
    cmocka_unit_test(test_exact_grows_and_shrinks),
    cmocka_unit_test(test_sampled_exact_when_small),
    cmocka_unit_test(test_sampled_rate_restarts),
    cmocka_unit_test(test_sampled_error_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
