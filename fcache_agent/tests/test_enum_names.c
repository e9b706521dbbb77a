/* SPDX-License-Identifier: Apache-2.0 */
/* common/enum_names: a table read both ways, and the modules' typed
 * name/parse pairs over it agreeing with each other for every value of
 * their enum (a name per value, each name parsed back to its value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "alloc/predict.h"
#include "alloc/share.h"
#include "alloc/staging.h"
#include "common/enum_names.h"
#include "engine/volume.h"
#include "origin/origin_move.h"

static const char *const names[] = { "zero", NULL, "two" };

static void
test_table_both_ways(void **state)
{
  (void)state;
  assert_string_equal(fc_enum_name(names, FC_NAMES_COUNT(names), 0), "zero");
  assert_string_equal(fc_enum_name(names, FC_NAMES_COUNT(names), 2), "two");
  /* A gap and a value past the end have no name. */
  assert_string_equal(fc_enum_name(names, FC_NAMES_COUNT(names), 1), "?");
  assert_string_equal(fc_enum_name(names, FC_NAMES_COUNT(names), 3), "?");
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), "two"), 2);
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), "zero"), 0);
  /* Exact names only: no prefix, no other case, no NULL. */
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), "tw"), -EINVAL);
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), "Two"), -EINVAL);
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), "?"), -EINVAL);
  assert_int_equal(fc_enum_parse(names, FC_NAMES_COUNT(names), NULL), -EINVAL);
}

/* For each value 0..n-1: a name, not "?", that parses back to it; and
 * value n has none. */
#define ROUND_TRIP(type, fn, n)                                         \
  do {                                                                  \
    for (unsigned v = 0; v < (n); v++) {                                \
      type got;                                                         \
      const char *name = fn##_name((type)v);                            \
      assert_string_not_equal(name, "?");                               \
      assert_int_equal(fn##_parse(name, &got), 0);                      \
      assert_int_equal(got, v);                                         \
    }                                                                   \
    assert_string_equal(fn##_name((type)(n)), "?");                     \
  } while (0)

static void
test_modules_round_trip(void **state)
{
  (void)state;
  ROUND_TRIP(enum fc_write_policy, fc_write_policy, FC_WRITE_BACK + 1);
  ROUND_TRIP(enum fc_admission, fc_admission, FC_ADMIT_RWS + 1);
  ROUND_TRIP(enum fc_move_scheme, fc_move_scheme, FC_MOVE_NR_SCHEMES);
  ROUND_TRIP(enum fc_spare_mode, fc_spare_mode, FC_SPARE_IDLE + 1);
  ROUND_TRIP(enum fc_predictor_kind, fc_predictor, FC_PRED_DEXP_SELF + 1);
  ROUND_TRIP(enum fc_staging_kind, fc_staging_kind, FC_STAGING_HYBRID + 1);
  assert_string_equal(fc_write_policy_name(FC_WRITE_BACK), "write_back");
  assert_string_equal(fc_move_scheme_name(FC_MOVE_NR_SCHEMES - 1), "dbt_capped");
  assert_string_equal(fc_staging_kind_name(FC_STAGING_DATA), "data");
  assert_string_equal(fc_move_state_name(FC_MOVE_ABORTED), "aborted");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_table_both_ways),
    cmocka_unit_test(test_modules_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
