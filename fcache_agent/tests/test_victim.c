/* SPDX-License-Identifier: Apache-2.0 */
/* The replacement rule shared by the agent and fcache-replay
 * (alloc/victim): the volume most over its share gives first, ties in
 * turn from the cursor, the skipped, the empty and (unless under_ok) the
 * ones at or under their share never; the least under with under_ok. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "alloc/victim.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static void
test_most_over_first(void **state)
{
  /* Excess: +1, +500, -10, +40. */
  struct fc_victim_cand c[] = {
    { .used = 11, .share = 10 }, { .used = 600, .share = 100 },
    { .used = 0, .share = 10 }, { .used = 50, .share = 10 },
  };
  struct fc_victim_cursor cur = { 0 };
  size_t i = 99;

  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
  assert_int_equal(i, 1);
  assert_int_equal(cur.next, 2);
  /* Wherever the cursor is, excess decides. */
  cur.next = 3;
  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
  assert_int_equal(i, 1);
  /* The caller skips it (busy, or it had no clean block): the next. */
  c[1].skip = true;
  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
  assert_int_equal(i, 3);
  c[3].skip = true;
  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
  assert_int_equal(i, 0);
  c[0].skip = true;
  /* Only one under its share is left: nobody may give. */
  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), -ENOENT);
}

/* Equal excess: round robin from the cursor, so equals give in turn. */
static void
test_ties_take_turns(void **state)
{
  struct fc_victim_cand c[] = {
    { .used = 20, .share = 10 }, { .used = 5, .share = 10 },
    { .used = 30, .share = 20 }, { .used = 110, .share = 100 },
  };
  struct fc_victim_cursor cur = { 0 };
  size_t seen[4] = { 0 }, i;

  for (int k = 0; k < 9; k++) {
    assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
    seen[i]++;
  }
  assert_int_equal(seen[0], 3);
  assert_int_equal(seen[1], 0);
  assert_int_equal(seen[2], 3);
  assert_int_equal(seen[3], 3);
  /* A cursor past the end (a member left) still works. */
  cur.next = 17;
  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), 0);
  assert_int_equal(i, 2);   /* 17 % 4 = 1, the next over is 2 */
}

/* under_ok (shares that overcommit the cache): the least under goes, a
 * volume with nothing never. */
static void
test_under_ok_takes_least_under(void **state)
{
  struct fc_victim_cand c[] = {
    { .used = 5, .share = 100 }, { .used = 90, .share = 100 },
    { .used = 0, .share = 1 },
  };
  struct fc_victim_cursor cur = { 0 };
  size_t i;

  assert_int_equal(fc_victim_pick(c, LEN(c), false, &cur, &i), -ENOENT);
  assert_int_equal(fc_victim_pick(c, LEN(c), true, &cur, &i), 0);
  assert_int_equal(i, 1);
  assert_true(fc_victim_may_give(&c[0], true));
  assert_false(fc_victim_may_give(&c[0], false));
  assert_false(fc_victim_may_give(&c[2], true));
  /* At its share exactly: not over. */
  struct fc_victim_cand at = { .used = 7, .share = 7 };
  assert_false(fc_victim_may_give(&at, false));
  assert_true(fc_victim_may_give(&at, true));
}

/* Counts near 2^62 compare without wrapping. */
static void
test_large_counts(void **state)
{
  const uint64_t big = 1ull << 62;
  struct fc_victim_cand c[] = {
    { .used = big + 1, .share = 0 }, { .used = big + 2, .share = 0 },
    { .used = 3, .share = big },
  };
  struct fc_victim_cursor cur = { 0 };
  size_t i;

  assert_int_equal(fc_victim_pick(c, LEN(c), true, &cur, &i), 0);
  assert_int_equal(i, 1);
}

static void
test_bad_input(void **state)
{
  struct fc_victim_cand c[] = { { .used = 2, .share = 1 } };
  struct fc_victim_cursor cur = { 0 };
  size_t i;

  assert_int_equal(fc_victim_pick(NULL, 1, false, &cur, &i), -EINVAL);
  assert_int_equal(fc_victim_pick(c, 1, false, NULL, &i), -EINVAL);
  assert_int_equal(fc_victim_pick(c, 1, false, &cur, NULL), -EINVAL);
  assert_int_equal(fc_victim_pick(NULL, 0, false, &cur, &i), -ENOENT);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_most_over_first),
    cmocka_unit_test(test_ties_take_turns),
    cmocka_unit_test(test_under_ok_takes_least_under),
    cmocka_unit_test(test_large_counts),
    cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
