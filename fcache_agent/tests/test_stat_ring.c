/* SPDX-License-Identifier: Apache-2.0 */
/* The per-minute ring behind the hit-ratio windows (common/stat_ring.c):
 * which snapshot starts a window, the step between snapshots, a day's
 * wrap-around, and counters or a clock that go back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "common/stat_ring.h"

static int
setup(void **state)
{
  struct fc_stat_ring *r = calloc(1, sizeof *r);

  assert_non_null(r);
  assert_int_equal(fc_stat_ring_init(r), 0);
  *state = r;
  return 0;
}

static int
teardown(void **state)
{
  fc_stat_ring_free(*state);
  free(*state);
  return 0;
}

static void
empty_ring_covers_nothing(void **state)
{
  struct fc_stat_window w = fc_stat_ring_window(*state, 1000, 300, 50, 50);

  assert_int_equal(w.covered_s, 0);
  assert_int_equal(w.hits, 0);
  assert_int_equal(w.misses, 0);
}

/* One snapshot per step: an offer less than a step after the newest is
 * ignored, so a sampler ticking every 15 s keeps one a minute. */
static void
offers_within_a_step_are_ignored(void **state)
{
  struct fc_stat_ring *r = *state;

  assert_true(fc_stat_ring_offer(r, 100, 1, 1));
  assert_false(fc_stat_ring_offer(r, 115, 2, 2));
  assert_false(fc_stat_ring_offer(r, 159, 3, 3));
  assert_true(fc_stat_ring_offer(r, 160, 4, 4));
  assert_int_equal(r->n, 2);
}

/* Ten minutes, each with 10 hits and 30 misses more than the one before:
 * the 5-minute window holds exactly five of them, the hour all ten. */
static void
windows_start_at_the_oldest_snapshot_inside(void **state)
{
  struct fc_stat_ring *r = *state;
  struct fc_stat_window w;

  for (uint64_t m = 0; m <= 10; m++)
    assert_true(fc_stat_ring_offer(r, 1000 + m * 60, m * 10, m * 30));
  /* Now is 20 s after the last snapshot, with 4 hits more. */
  w = fc_stat_ring_window(r, 1620, 300, 104, 300);
  /* Oldest inside 300 s of 1620: the snapshot at 1360 (minute 6). */
  assert_int_equal(w.covered_s, 260);
  assert_int_equal(w.hits, 104 - 60);
  assert_int_equal(w.misses, 300 - 180);
  w = fc_stat_ring_window(r, 1620, 3600, 104, 300);
  /* The ring is younger than an hour: it covers what it has. */
  assert_int_equal(w.covered_s, 620);
  assert_int_equal(w.hits, 104);
  assert_int_equal(w.misses, 300);
}

/* More than a day of snapshots: the oldest fall off, the day window
 * starts a day back and the ring never holds more than its slots. */
static void
a_day_wraps_around(void **state)
{
  struct fc_stat_ring *r = *state;
  uint64_t steps = FC_STAT_RING_SLOTS + 100, now;
  struct fc_stat_window w;

  for (uint64_t m = 0; m < steps; m++)
    assert_true(fc_stat_ring_offer(r, m * 60, m, 2 * m));
  assert_int_equal(r->n, FC_STAT_RING_SLOTS);
  now = (steps - 1) * 60;
  w = fc_stat_ring_window(r, now, 86400, steps - 1, 2 * (steps - 1));
  assert_int_equal(w.covered_s, 86400);
  assert_int_equal(w.hits, 1440);
  assert_int_equal(w.misses, 2880);
  w = fc_stat_ring_window(r, now, 300, steps - 1, 2 * (steps - 1));
  assert_int_equal(w.covered_s, 300);
  assert_int_equal(w.hits, 5);
}

/* Counters below the newest snapshot (the engine started them again) or
 * a clock that went back: the ring starts again, and no window reports
 * a negative (wrapped) delta. */
static void
counters_going_back_restart_the_ring(void **state)
{
  struct fc_stat_ring *r = *state;
  struct fc_stat_window w;

  assert_true(fc_stat_ring_offer(r, 0, 500, 500));
  assert_true(fc_stat_ring_offer(r, 60, 600, 600));
  assert_true(fc_stat_ring_offer(r, 120, 5, 7));
  assert_int_equal(r->n, 1);
  w = fc_stat_ring_window(r, 130, 300, 9, 7);
  assert_int_equal(w.hits, 4);
  assert_int_equal(w.misses, 0);
  assert_int_equal(w.covered_s, 10);
  assert_true(fc_stat_ring_offer(r, 60, 9, 9));
  assert_int_equal(r->n, 1);
  /* Counters asked about below the start snapshot: zero, not a wrap. */
  w = fc_stat_ring_window(r, 70, 300, 1, 1);
  assert_int_equal(w.hits, 0);
  assert_int_equal(w.misses, 0);
}

static void
clear_forgets_every_snapshot(void **state)
{
  struct fc_stat_ring *r = *state;

  assert_true(fc_stat_ring_offer(r, 0, 1, 1));
  assert_true(fc_stat_ring_offer(r, 60, 2, 2));
  fc_stat_ring_clear(r);
  assert_int_equal(fc_stat_ring_window(r, 61, 300, 3, 3).covered_s, 0);
  /* The first offer after a clear is kept at once. */
  assert_true(fc_stat_ring_offer(r, 61, 3, 3));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(empty_ring_covers_nothing, setup, teardown),
    cmocka_unit_test_setup_teardown(offers_within_a_step_are_ignored, setup, teardown),
    cmocka_unit_test_setup_teardown(windows_start_at_the_oldest_snapshot_inside, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(a_day_wraps_around, setup, teardown),
    cmocka_unit_test_setup_teardown(counters_going_back_restart_the_ring, setup, teardown),
    cmocka_unit_test_setup_teardown(clear_forgets_every_snapshot, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
