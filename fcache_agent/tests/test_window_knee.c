/* SPDX-License-Identifier: Apache-2.0 */
/* The window chosen online (alloc/window_knee): synthetic access streams
 * whose reuse times, hence whose hit-ratio-against-window curve and its
 * knee, are known; the bounds; too short a history; a stream that
 * overflows the sampled table; and a volume whose reuse time changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "alloc/window_knee.h"

/* nblocks blocks (from first), each accessed every period_s seconds, one
 * block after another spread evenly over the period, from t0_s for
 * dur_s seconds.  Every access after a block's first has a reuse time of
 * exactly period_s. */
static uint64_t
cycle(struct fc_wknee *w, uint64_t first, uint64_t nblocks, uint32_t period_s,
      uint64_t t0_s, uint64_t dur_s)
{
  uint64_t step_ms = (uint64_t)period_s * 1000 / nblocks, t = t0_s * 1000;

  for (uint64_t k = 0; t < (t0_s + dur_s) * 1000; k++, t += step_ms)
    fc_wknee_access(w, first + k % nblocks, t);
  return t;
}

/* Reuse time 6 s: the curve is 0 up to 4 s and flat from 8 s, the knee
 * is 8 s, the first candidate that holds the reuse. */
static void
test_step_curve_knee_at_reuse_time(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 0;
  uint64_t end;

  assert_int_equal(fc_wknee_new(128, &w), 0);
  end = cycle(w, 0, 300, 6, 0, 300);
  assert_true(fc_wknee_hit_ratio(w, 2) == 0.0);         /* 4 s */
  assert_true(fc_wknee_hit_ratio(w, 3) > 0.97);         /* 8 s: all but the first */
  assert_true(fc_wknee_hit_ratio(w, 3) == fc_wknee_hit_ratio(w, 7));
  assert_int_equal(fc_wknee_choose(w, 1, 128, end, &win), 0);
  assert_int_equal(win, 8);
  /* The bounds: a lower bound above the knee wins (a flat curve gets
   * the smallest candidate)... */
  assert_int_equal(fc_wknee_choose(w, 16, 128, end, &win), 0);
  assert_int_equal(win, 16);
  /* ...an upper bound below it leaves a flat curve, the smallest too. */
  assert_int_equal(fc_wknee_choose(w, 1, 4, end, &win), 0);
  assert_int_equal(win, 1);
  /* Bounds that are no powers of two: the candidates inside them. */
  assert_int_equal(fc_wknee_choose(w, 3, 100, end, &win), 0);
  assert_int_equal(win, 8);
  assert_int_equal(fc_wknee_choose(w, 0, 100, end, &win), -EINVAL);
  assert_int_equal(fc_wknee_choose(w, 9, 8, end, &win), -EINVAL);
  fc_wknee_free(w);
}

/* Three populations, each of many blocks (the sample is of blocks, so
 * a population must have enough of them to be in it): 70 % of the
 * accesses reuse within 2 s, 20 % after 100 s (bucket 128), 10 % never.
 * The curve jumps at 2 s and rises a little at 128 s; the knee is 2 s,
 * where a longer window stops paying for the cache it takes. */
static void
test_three_populations(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 0;
  uint64_t t = 0, scan = 1u << 30;
  double two, all;

  assert_int_equal(fc_wknee_new(256, &w), 0);
  /* Per 10 ms: 7 hot accesses (1050 blocks, round every 1.5 s), 2 warm
   * (20,000 blocks, every 100 s), 1 of a scan. */
  for (uint64_t k = 0; t < 1000 * 1000; k++, t += 10) {
    for (unsigned i = 0; i < 7; i++)
      fc_wknee_access(w, (k * 7 + i) % 1050, t);
    for (unsigned i = 0; i < 2; i++)
      fc_wknee_access(w, 100000 + (k * 2 + i) % 20000, t);
    fc_wknee_access(w, scan++, t);
  }
  two = fc_wknee_hit_ratio(w, 1);
  all = fc_wknee_hit_ratio(w, 7);
  print_message("hit ratio at 2 s %.3f, at 128 s %.3f\n", two, all);
  assert_true(two > 0.55 && two < 0.85);
  assert_true(all - two > 0.1 && all - two < 0.3);
  assert_true(fc_wknee_hit_ratio(w, 6) - two < 0.02);   /* nothing at 4..64 s */
  assert_int_equal(fc_wknee_choose(w, 1, 256, t, &win), 0);
  assert_int_equal(win, 2);
  fc_wknee_free(w);
}

/* No reuse at all (a scan): no knee, the smallest candidate. */
static void
test_scan_gets_the_smallest(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 0;
  uint64_t t;

  assert_int_equal(fc_wknee_new(64, &w), 0);
  for (t = 0; t < 100 * 1000; t += 10)
    fc_wknee_access(w, t, t);
  assert_true(fc_wknee_hit_ratio(w, 6) == 0.0);
  assert_int_equal(fc_wknee_choose(w, 2, 64, t, &win), 0);
  assert_int_equal(win, 2);
  fc_wknee_free(w);
}

/* Fewer than three candidates the volume was followed long enough to
 * measure: no choice yet.  Nothing seen: none either. */
static void
test_too_short_a_history(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 77;

  assert_int_equal(fc_wknee_new(64, &w), 0);
  assert_int_equal(fc_wknee_choose(w, 1, 64, 1000000, &win), -EAGAIN);
  cycle(w, 0, 10, 1, 0, 3);
  assert_int_equal(fc_wknee_choose(w, 1, 64, 3000, &win), -EAGAIN);  /* 1, 2 */
  assert_int_equal(fc_wknee_choose(w, 1, 64, 4000, &win), 0);        /* 1, 2, 4 */
  assert_int_equal(fc_wknee_choose(w, 8, 64, 20000, &win), -EAGAIN); /* 8, 16 */
  fc_wknee_free(w);
}

/* Many more blocks than the table follows: sampling keeps the estimate
 * (every block reused once after 6 s: hit ratio 1/2 at 8 s) and the knee,
 * in the same memory. */
static void
test_sampling_keeps_the_curve(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 0;
  size_t mem;
  uint64_t t = 0;

  assert_int_equal(fc_wknee_new(64, &w), 0);
  mem = fc_wknee_memory(w);
  /* The figure doc/reference/allocation.rst states. */
  assert_int_equal(mem, 49448);
  /* 200,000 blocks a second: block b at t and again at t + 6 s. */
  for (uint64_t s = 0; s < 80; s++) {
    for (uint64_t i = 0; i < 200000; i += 1) {
      uint64_t ms = s * 1000 + i / 200;

      fc_wknee_access(w, s * 200000 + i, ms);
      if (s >= 6)
        fc_wknee_access(w, (s - 6) * 200000 + i, ms);
    }
    t = (s + 1) * 1000;
  }
  print_message("hit ratio at 8 s %.3f\n", fc_wknee_hit_ratio(w, 3));
  assert_true(fc_wknee_hit_ratio(w, 2) < 0.01);
  assert_true(fc_wknee_hit_ratio(w, 3) > 0.40 && fc_wknee_hit_ratio(w, 3) < 0.52);
  assert_int_equal(fc_wknee_choose(w, 1, 64, t, &win), 0);
  assert_int_equal(win, 8);
  assert_int_equal(fc_wknee_memory(w), mem);
  fc_wknee_free(w);
}

/* A full table first forgets the blocks not seen for longer than the
 * longest window (their next access is a miss at every window anyway),
 * without sampling fewer, and every block it keeps is still found after
 * the table is rebuilt in place. */
static void
test_full_table_forgets_the_old_first(void **state)
{
  struct fc_wknee *w;

  assert_int_equal(fc_wknee_new(10, &w), 0);
  for (uint64_t b = 0; b < 3000; b++)
    fc_wknee_access(w, b, 0);
  /* 20 s later the table fills at the 73rd new block: the 3000 go. */
  for (uint64_t b = 10000; b < 10100; b++)
    fc_wknee_access(w, b, 20000);
  for (uint64_t b = 10000; b < 10100; b++)
    fc_wknee_access(w, b, 22000);
  /* Forgotten: first accesses again, not reuses after 23 s. */
  for (uint64_t b = 0; b < 2900; b++)
    fc_wknee_access(w, b, 23000);
  assert_true(fc_wknee_hit_ratio(w, 0) == 0.0);
  assert_true(fc_wknee_hit_ratio(w, 1) == 100.0 / 6100);
  assert_true(fc_wknee_hit_ratio(w, 31) == 100.0 / 6100);
  fc_wknee_free(w);
}

/* The reuse time grows from 6 s to 40 s: the counters halve at every
 * choice, so the knee follows, from 8 s to 64 s, within a few choices. */
static void
test_knee_follows_a_change(void **state)
{
  struct fc_wknee *w;
  uint32_t win = 0;
  uint64_t t;
  int choices = 0;

  assert_int_equal(fc_wknee_new(256, &w), 0);
  t = cycle(w, 0, 300, 6, 0, 300);
  assert_int_equal(fc_wknee_choose(w, 1, 256, t, &win), 0);
  assert_int_equal(win, 8);
  for (uint64_t at = 300; win != 64 && choices < 10; at += 120, choices++) {
    t = cycle(w, 10000, 300, 40, at, 120);
    assert_int_equal(fc_wknee_choose(w, 1, 256, t, &win), 0);
  }
  assert_int_equal(win, 64);
  assert_true(choices <= 3);
  fc_wknee_free(w);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_step_curve_knee_at_reuse_time),
    cmocka_unit_test(test_three_populations),
    cmocka_unit_test(test_scan_gets_the_smallest),
    cmocka_unit_test(test_too_short_a_history),
    cmocka_unit_test(test_sampling_keeps_the_curve),
    cmocka_unit_test(test_full_table_forgets_the_old_first),
    cmocka_unit_test(test_knee_follows_a_change),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
