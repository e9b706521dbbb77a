/* Admission staging: a block is admitted on its second miss while still
 * staged, the admitted entry is forgotten, and a window's worth of other
 * misses pushes old entries out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>

#include "ucache/staging.h"

/* The stage under test; teardown frees it even when an assertion fails. */
static struct fc_staging stage;

static int
teardown(void **state)
{
  fc_staging_destroy(&stage);
  return 0;
}

static bool
miss(struct fc_staging *st, uint64_t ob)
{
  return fc_staging_miss(st, to_oblock(ob));
}

static void
test_first_miss_not_admitted(void **state)
{
  struct fc_staging *const st = &stage;

  assert_int_equal(fc_staging_init(st, 64), 0);
  assert_false(miss(st, 5));
  assert_false(miss(st, 6));
  fc_staging_destroy(st);
  assert_null(st->slots);
  assert_null(st->age);
}

static void
test_second_miss_admits(void **state)
{
  struct fc_staging *const st = &stage;

  assert_int_equal(fc_staging_init(st, 64), 0);
  assert_false(miss(st, 5));
  assert_true(miss(st, 5));
  fc_staging_destroy(st);
}

static void
test_oblock_zero(void **state)
{
  struct fc_staging *const st = &stage;

  assert_int_equal(fc_staging_init(st, 64), 0);
  assert_false(miss(st, 0));
  assert_true(miss(st, 0));
  fc_staging_destroy(st);
}

/* Once admitted the oblock is no longer staged: the next miss (after an
 * eviction, say) starts over. */
static void
test_admitted_entry_is_cleared(void **state)
{
  struct fc_staging *const st = &stage;

  assert_int_equal(fc_staging_init(st, 64), 0);
  assert_false(miss(st, 9));
  assert_true(miss(st, 9));
  assert_false(miss(st, 9));
  assert_true(miss(st, 9));
  fc_staging_destroy(st);
}

/* Each set has two ways, so two interleaved blocks never push each other
 * out, whatever sets they hash to. */
static void
test_two_blocks_coexist(void **state)
{
  for (uint64_t a = 0; a < 200; a++) {
    struct fc_staging *const st = &stage;
    uint64_t b = a * 31 + 1000;

    assert_int_equal(fc_staging_init(st, 4), 0);
    assert_false(miss(st, a));
    assert_false(miss(st, b));
    assert_true(miss(st, a));
    assert_true(miss(st, b));
    fc_staging_destroy(st);
  }
}

/* The smallest stage (one set of two) is FIFO: a third block pushes out
 * the first. */
static void
test_tiny_window_fifo(void **state)
{
  for (uint32_t window = 0; window <= 2; window++) {
    struct fc_staging *const st = &stage;

    assert_int_equal(fc_staging_init(st, window), 0);
    assert_false(miss(st, 1));
    assert_false(miss(st, 2));
    assert_false(miss(st, 3));        /* replaces 1 */
    assert_false(miss(st, 1));        /* 1 was forgotten; replaces 2 */
    assert_true(miss(st, 3));
    assert_true(miss(st, 1));
    fc_staging_destroy(st);
  }
}

/* A block that comes back before a window's worth of other misses is
 * admitted (almost always: a set may overflow), one that comes back after
 * many windows of other misses is not. */
static void
test_capacity_pressure_forgets(void **state)
{
  const uint32_t window = 256;
  struct fc_staging *const st = &stage;
  unsigned admitted = 0;

  assert_int_equal(fc_staging_init(st, window), 0);
  for (uint64_t ob = 0; ob < window / 4; ob++)
    assert_false(miss(st, ob));
  for (uint64_t ob = 0; ob < window / 4; ob++)
    admitted += miss(st, ob);
  assert_true(admitted >= window / 4 * 9 / 10);

  for (uint64_t ob = 1000; ob < 1000 + window / 4; ob++)
    assert_false(miss(st, ob));
  for (uint64_t ob = 1000000; ob < 1000000 + 16 * window; ob++)
    miss(st, ob);
  for (uint64_t ob = 1000; ob < 1000 + window / 4; ob++)
    assert_false(miss(st, ob));
  fc_staging_destroy(st);
}

/* After an admission frees one way of a set, the next miss in that set
 * should take the free way and keep the other staged block. */
static void
test_admission_frees_a_way(void **state)
{
  struct fc_staging *const st = &stage;

  assert_int_equal(fc_staging_init(st, 2), 0);   /* a single set */
  assert_false(miss(st, 1));
  assert_false(miss(st, 2));
  assert_true(miss(st, 2));         /* 2 admitted: its way is empty now */
  assert_false(miss(st, 3));        /* must land in 2's empty way... */
  assert_true(miss(st, 1));         /* ...so 1 is still staged */
  fc_staging_destroy(st);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_first_miss_not_admitted, teardown),
    cmocka_unit_test_teardown(test_second_miss_admits, teardown),
    cmocka_unit_test_teardown(test_oblock_zero, teardown),
    cmocka_unit_test_teardown(test_admitted_entry_is_cleared, teardown),
    cmocka_unit_test_teardown(test_two_blocks_coexist, teardown),
    cmocka_unit_test_teardown(test_tiny_window_fifo, teardown),
    cmocka_unit_test_teardown(test_capacity_pressure_forgets, teardown),
    cmocka_unit_test_teardown(test_admission_frees_a_way, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
