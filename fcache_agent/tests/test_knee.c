/* SPDX-License-Identifier: Apache-2.0 */
/* The knee of a hit-ratio-against-window curve: a curve that flattens has
 * one where Kneedle puts it; a line, a flat curve and a curve whose bend
 * is below min_gain get the smallest window; bad input is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>

#include "alloc/knee.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Window hours against hit ratio, rising fast then flat.  Normalised,
 * the distances above the chord are (Python, 4 places)
 *   0, .2597, .5765, .7371, .7626, .7038, .591, .4782, .2391, 0
 * so the knee is the 12-hour window, index 4. */
static void
test_clear_knee(void **state)
{
  const double x[] = { 1, 2, 4, 8, 12, 24, 36, 48, 72, 96 };
  const double y[] = { .10, .30, .55, .70, .75, .80, .81, .82, .83, .84 };
  size_t k = 99;

  assert_int_equal(fc_knee_point(x, y, LEN(x), 0.05, &k), 0);
  assert_int_equal(k, 4);
  /* The same bend is no knee to a caller asking for more than .7626. */
  assert_int_equal(fc_knee_point(x, y, LEN(x), 0.77, &k), 0);
  assert_int_equal(k, 0);
  /* Scaling either axis does not move it. */
  double x2[LEN(x)], y2[LEN(y)];
  for (size_t i = 0; i < LEN(x); i++) {
    x2[i] = x[i] * 3600 + 5;
    y2[i] = y[i] * 100 - 3;
  }
  assert_int_equal(fc_knee_point(x2, y2, LEN(x), 0.05, &k), 0);
  assert_int_equal(k, 4);
}

/* 1 - 2^-x roughly: distances 0, .4, .55, .58, .54, ... -> index 3. */
static void
test_saturating_curve(void **state)
{
  const double x[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
  const double y[] = { 0, .5, .75, .88, .94, .97, .98, .99, .995, .998, 1 };
  size_t k;

  assert_int_equal(fc_knee_point(x, y, LEN(x), 0.05, &k), 0);
  assert_int_equal(k, 3);
}

/* A straight line, even with min_gain 0: nothing is above the chord but
 * rounding. */
static void
test_line_has_no_knee(void **state)
{
  double x[50], y[50];
  size_t k = 99;

  for (int i = 0; i < 50; i++) {
    x[i] = 0.7 * i + 1;
    y[i] = 0.013 * x[i] + 0.1;
  }
  assert_int_equal(fc_knee_point(x, y, 50, 0.05, &k), 0);
  assert_int_equal(k, 0);
  k = 99;
  assert_int_equal(fc_knee_point(x, y, 50, 0.0, &k), 0);
  assert_int_equal(k, 0);
}

/* Flat, two points, and a curve that bends the wrong way (convex: it only
 * pays at the largest window, which is all below the chord). */
static void
test_no_knee_shapes(void **state)
{
  const double x[] = { 1, 2, 3, 4, 5 };
  const double flat[] = { .4, .4, .4, .4, .4 };
  const double convex[] = { 0, .01, .04, .2, 1 };
  size_t k = 99;

  assert_int_equal(fc_knee_point(x, flat, 5, 0.05, &k), 0);
  assert_int_equal(k, 0);
  k = 99;
  assert_int_equal(fc_knee_point(x, convex, 5, 0.05, &k), 0);
  assert_int_equal(k, 0);
  k = 99;
  assert_int_equal(fc_knee_point(x, convex, 2, 0.0, &k), 0);
  assert_int_equal(k, 0);
}

static void
test_bad_input(void **state)
{
  const double x[] = { 1, 2, 3 };
  const double same[] = { 1, 2, 2 };
  const double down[] = { 1, 3, 2 };
  const double y[] = { 0, .5, .6 };
  const double nan_y[] = { 0, NAN, .6 };
  size_t k;

  assert_int_equal(fc_knee_point(x, y, 1, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, y, 0, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(same, y, 3, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(down, y, 3, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, nan_y, 3, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, y, 3, 1.0, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, y, 3, -0.1, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, y, 3, NAN, &k), -EINVAL);
  assert_int_equal(fc_knee_point(NULL, y, 3, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, NULL, 3, 0.05, &k), -EINVAL);
  assert_int_equal(fc_knee_point(x, y, 3, 0.05, NULL), -EINVAL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_clear_knee),
    cmocka_unit_test(test_saturating_curve),
    cmocka_unit_test(test_line_has_no_knee),
    cmocka_unit_test(test_no_knee_shapes),
    cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
