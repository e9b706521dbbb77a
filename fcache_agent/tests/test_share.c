/* SPDX-License-Identifier: Apache-2.0 */
/* Cache shares from predicted RWSS: the cases worked out by hand, then
 * random hosts checked against the rules of share.h (never above the
 * capacity or a limit, cut in proportion when over, all spare handed out
 * or every taker at its limit when proportional). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "alloc/share.h"

#define U FC_SHARE_UNKNOWN

static void
compute(const struct fc_share_demand *d, size_t n, uint64_t cap, double headroom,
        enum fc_spare_mode mode, uint64_t *share)
{
  assert_int_equal(fc_share_compute(d, n, cap, headroom, mode, share), 0);
}

/* Wants 100 and 300 in 1000: the 600 spare splits 1:3, 150 and 450. */
static void
test_under_capacity(void **state)
{
  const struct fc_share_demand d[] = { { 100, 1000 }, { 300, 1000 } };
  uint64_t s[2];

  compute(d, 2, 1000, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 250);
  assert_int_equal(s[1], 750);
  compute(d, 2, 1000, 0.0, FC_SPARE_IDLE, s);
  assert_int_equal(s[0], 100);
  assert_int_equal(s[1], 300);
}

/* Limit 150 on the first: round 1 gives it 50 of its 150 and the other
 * 450; round 2 the other takes the last 100 alone: 150 and 850. */
static void
test_spare_respects_limits(void **state)
{
  const struct fc_share_demand d[] = { { 100, 150 }, { 300, 1000 } };
  const struct fc_share_demand both_small[] = { { 100, 150 }, { 300, 400 } };
  uint64_t s[2];

  compute(d, 2, 1000, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 150);
  assert_int_equal(s[1], 850);
  /* Both at their limits, 450 stays idle. */
  compute(both_small, 2, 1000, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 150);
  assert_int_equal(s[1], 400);
}

/* Spare of 2 among wants 3, 3, 3: 2 * 3 / 9 rounds to 0 for all, so one
 * block each from the largest want, lowest index first: 4, 4, 3. */
static void
test_spare_leftover_blocks(void **state)
{
  const struct fc_share_demand d[] = { { 3, 100 }, { 3, 100 }, { 3, 100 } };
  uint64_t s[3];

  compute(d, 3, 11, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 4);
  assert_int_equal(s[1], 4);
  assert_int_equal(s[2], 3);
}

/* Wants 100 and 300 in 100: 25 and 75.  Wants 4, 4, 5 in 10: floors
 * 40/13 = 3, 3, 50/13 = 3 leave 1 for the largest, 5: 3, 3, 4.  Wants
 * 5, 5, 5 in 10: 3 each and the 1 left to the first: 4, 3, 3. */
static void
test_over_capacity(void **state)
{
  const struct fc_share_demand a[] = { { 100, 1000 }, { 300, 1000 } };
  const struct fc_share_demand b[] = { { 4, 9 }, { 4, 9 }, { 5, 9 } };
  const struct fc_share_demand c[] = { { 5, 9 }, { 5, 9 }, { 5, 9 } };
  uint64_t s[3];

  compute(a, 2, 100, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 25);
  assert_int_equal(s[1], 75);
  compute(b, 3, 10, 0.0, FC_SPARE_IDLE, s);
  assert_int_equal(s[0], 3);
  assert_int_equal(s[1], 3);
  assert_int_equal(s[2], 4);
  compute(c, 3, 10, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 4);
  assert_int_equal(s[1], 3);
  assert_int_equal(s[2], 3);
  /* No flash at all. */
  compute(c, 3, 0, 0.0, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0] + s[1] + s[2], 0);
}

/* No prediction yet: the volume wants its limit (500); the other takes
 * the spare up to its own limit, 1000, and 500 stays idle. */
static void
test_unknown_prediction(void **state)
{
  const struct fc_share_demand d[] = { { U, 500 }, { 100, 1000 } };
  const struct fc_share_demand over[] = { { U, 3000 }, { 1000, 1000 } };
  uint64_t s[2];

  compute(d, 2, 2000, 0.1, FC_SPARE_IDLE, s);
  assert_int_equal(s[0], 500);
  assert_int_equal(s[1], 110);
  compute(d, 2, 2000, 0.1, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 500);
  assert_int_equal(s[1], 1000);
  /* Wants 3000 and 1000 in 2000: 1500 and 500. */
  compute(over, 2, 2000, 0.1, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 1500);
  assert_int_equal(s[1], 500);
}

/* Predicted 0 wants 0 and takes no spare: cache would not help it. */
static void
test_zero_demand(void **state)
{
  const struct fc_share_demand none[] = { { 0, 1000 }, { 0, 1000 } };
  const struct fc_share_demand one[] = { { 0, 1000 }, { 100, 1000 } };
  uint64_t s[2];

  compute(none, 2, 1000, 0.1, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 0);
  assert_int_equal(s[1], 0);
  compute(one, 2, 5000, 0.1, FC_SPARE_PROPORTIONAL, s);
  assert_int_equal(s[0], 0);
  assert_int_equal(s[1], 1000);
  compute(NULL, 0, 5000, 0.1, FC_SPARE_PROPORTIONAL, NULL);
}

/* 10 % headroom, rounded up to whole blocks: 30 -> 33 (30 * 0.1 is
 * 3.0000000000000004 in binary, which must not make 34), 7 -> 7.7 -> 8,
 * 1000 -> 1100 capped by its limit at 1050, and 0 -> 0. */
static void
test_headroom(void **state)
{
  const struct fc_share_demand d[] = { { 30, 1000 }, { 7, 1000 }, { 1000, 1050 },
                                       { 0, 1000 } };
  const struct fc_share_demand big[] = { { (1ull << 60) + 1, UINT64_MAX } };
  uint64_t s[4];

  compute(d, 4, 1u << 20, 0.10, FC_SPARE_IDLE, s);
  assert_int_equal(s[0], 33);
  assert_int_equal(s[1], 8);
  assert_int_equal(s[2], 1050);
  assert_int_equal(s[3], 0);
  /* Headroom 0: the prediction itself, exact above 2^53. */
  compute(big, 1, UINT64_MAX, 0.0, FC_SPARE_IDLE, s);
  assert_int_equal(s[0], (1ull << 60) + 1);
}

static void
test_bad_input(void **state)
{
  const struct fc_share_demand d[] = { { 1, 2 } };
  uint64_t s[1];

  assert_int_equal(fc_share_compute(NULL, 1, 10, 0.1, FC_SPARE_IDLE, s), -EINVAL);
  assert_int_equal(fc_share_compute(d, 1, 10, 0.1, FC_SPARE_IDLE, NULL), -EINVAL);
  assert_int_equal(fc_share_compute(d, 1, 10, -0.1, FC_SPARE_IDLE, s), -EINVAL);
  assert_int_equal(fc_share_compute(d, 1, 10, NAN, FC_SPARE_IDLE, s), -EINVAL);
  assert_int_equal(fc_share_compute(d, 1, 10, INFINITY, FC_SPARE_IDLE, s), -EINVAL);
  assert_int_equal(fc_share_compute(d, 1, 10, 0.1, (enum fc_spare_mode)5, s), -EINVAL);
}

static void
test_names(void **state)
{
  enum fc_spare_mode m;

  assert_string_equal(fc_spare_mode_name(FC_SPARE_PROPORTIONAL), "proportional");
  assert_string_equal(fc_spare_mode_name(FC_SPARE_IDLE), "idle");
  assert_string_equal(fc_spare_mode_name((enum fc_spare_mode)9), "?");
  assert_int_equal(fc_spare_mode_parse("idle", &m), 0);
  assert_int_equal(m, FC_SPARE_IDLE);
  assert_int_equal(fc_spare_mode_parse("proportional", &m), 0);
  assert_int_equal(m, FC_SPARE_PROPORTIONAL);
  assert_int_equal(fc_spare_mode_parse("spare", &m), -EINVAL);
}

static uint64_t
rnd(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Random hosts against the rules, with the wants recomputed here. */
static void
test_random_hosts(void **state)
{
  uint64_t seed = 0x5eed, s[16], want[16];
  struct fc_share_demand d[16];

  for (int round = 0; round < 3000; round++) {
    size_t n = 1 + rnd(&seed) % 16;
    uint64_t cap = rnd(&seed) % 5000, sum = 0, wsum = 0;
    enum fc_spare_mode mode = rnd(&seed) & 1 ? FC_SPARE_IDLE : FC_SPARE_PROPORTIONAL;
    bool all_at_limit = true;

    for (size_t i = 0; i < n; i++) {
      d[i].limit = rnd(&seed) % 1000;
      d[i].predicted = rnd(&seed) % 7 == 0 ? U : rnd(&seed) % 1200;
      want[i] = d[i].predicted == U ? d[i].limit : d[i].predicted;
      if (want[i] > d[i].limit)
        want[i] = d[i].limit;
      wsum += want[i];
    }
    compute(d, n, cap, 0.0, mode, s);
    for (size_t i = 0; i < n; i++) {
      assert_true(s[i] <= d[i].limit);
      sum += s[i];
      if (wsum > cap)
        assert_true(s[i] <= want[i]);
      else if (mode == FC_SPARE_IDLE)
        assert_int_equal(s[i], want[i]);
      else
        assert_true(s[i] >= want[i]);
      if (want[i] > 0 && s[i] < d[i].limit)
        all_at_limit = false;
    }
    assert_true(sum <= cap);
    if (wsum > cap)
      assert_int_equal(sum, cap);
    else if (mode == FC_SPARE_PROPORTIONAL)
      assert_true(sum == cap || all_at_limit);
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_under_capacity),
    cmocka_unit_test(test_spare_respects_limits),
    cmocka_unit_test(test_spare_leftover_blocks),
    cmocka_unit_test(test_over_capacity),
    cmocka_unit_test(test_unknown_prediction),
    cmocka_unit_test(test_zero_demand),
    cmocka_unit_test(test_headroom),
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_random_hosts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
