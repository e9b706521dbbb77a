/* SPDX-License-Identifier: Apache-2.0 */
/* RWSS prediction and the outlier filter, against series worked out by
 * hand (the arithmetic is in the comments; a few longer ones were checked
 * with a Python transcription of the same rules). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "alloc/predict.h"

#define EPS 1e-9

static void
assert_near(double got, double want)
{
  if (fabs(got - want) > EPS * (1.0 + fabs(want)))
    fail_msg("got %.12g, want %.12g", got, want);
}

static void
test_bad_input(void **state)
{
  struct fc_predictor p;

  assert_int_equal(fc_predictor_init(&p, (enum fc_predictor_kind)9, 0.3, 0.3), -EINVAL);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, 0.0, 0.3), -EINVAL);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, 1.5, 0.3), -EINVAL);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, NAN, 0.3), -EINVAL);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP, 0.3, 0.0), -EINVAL);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP, 0.3, -1.0), -EINVAL);
  /* The kinds that do not use a parameter do not check it. */
  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, 1.0, -7.0), 0);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_LAST, 0.0, 0.0), 0);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP_SELF, 0.0, 0.0), 0);
  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP_SELF, 9.0, 9.0), 0);
}

static void
test_names(void **state)
{
  enum fc_predictor_kind k;
  const enum fc_predictor_kind all[] = { FC_PRED_LAST, FC_PRED_EXP, FC_PRED_EXP_SELF,
                                         FC_PRED_DEXP, FC_PRED_DEXP_SELF };

  for (unsigned i = 0; i < 5; i++) {
    assert_int_equal(fc_predictor_parse(fc_predictor_name(all[i]), &k), 0);
    assert_int_equal(k, all[i]);
  }
  assert_string_equal(fc_predictor_name(FC_PRED_EXP_SELF), "exp_self");
  assert_string_equal(fc_predictor_name((enum fc_predictor_kind)42), "?");
  assert_int_equal(fc_predictor_parse("Exp", &k), -EINVAL);
  assert_int_equal(fc_predictor_parse("", &k), -EINVAL);
}

static void
test_last(void **state)
{
  struct fc_predictor p;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_LAST, 0, 0), 0);
  assert_near(fc_predictor_next(&p), 0);
  assert_near(fc_predictor_observe(&p, 10), 10);
  assert_near(fc_predictor_observe(&p, 20), 20);
  assert_near(fc_predictor_observe(&p, 15), 15);
  assert_near(fc_predictor_next(&p), 15);
  assert_int_equal(p.observed, 3);
}

/* alpha 0.3: level 100; 100 + 0.3 * (200 - 100) = 130;
 * 130 + 0.3 * (50 - 130) = 106. */
static void
test_exp(void **state)
{
  struct fc_predictor p;
  double a, b;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, 0.3, 0.9), 0);
  assert_near(fc_predictor_observe(&p, 100), 100);
  assert_near(fc_predictor_observe(&p, 200), 130);
  assert_near(fc_predictor_observe(&p, 50), 106);
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.3);
}

/* alpha = beta = 0.5 on 10, 20, 26, 40:
 *  10: level 10, trend 0                         -> 10
 *  20: level 20, trend 20 - 10 = 10              -> 30
 *  26: level .5*26 + .5*(20+10) = 28,
 *      trend .5*(28-20) + .5*10 = 9              -> 37
 *  40: level .5*40 + .5*(28+9) = 38.5,
 *      trend .5*(38.5-28) + .5*9 = 9.75          -> 48.25 */
static void
test_dexp(void **state)
{
  struct fc_predictor p;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP, 0.5, 0.5), 0);
  assert_near(fc_predictor_observe(&p, 10), 10);
  assert_near(fc_predictor_observe(&p, 20), 30);
  assert_near(fc_predictor_observe(&p, 26), 37);
  assert_near(fc_predictor_observe(&p, 40), 48.25);
  assert_near(fc_predictor_next(&p), 48.25);
}

/* A falling trend predicts below zero: the prediction stops at 0.
 *  100, 10: level 10, trend -90                  -> -80, so 0
 *  0: level .5*0 + .5*(10-90) = -40,
 *     trend .5*(-40-10) + .5*(-90) = -70         -> -110, so 0
 * Bad observations count as 0. */
static void
test_clamped_at_zero(void **state)
{
  struct fc_predictor p;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP, 0.5, 0.5), 0);
  fc_predictor_observe(&p, 100);
  assert_near(fc_predictor_observe(&p, 10), 0);
  assert_near(fc_predictor_observe(&p, 0), 0);
  assert_near(p.cand[0].level, -40);
  assert_near(p.cand[0].trend, -70);

  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP, 0.5, 0.5), 0);
  assert_near(fc_predictor_observe(&p, -5), 0);
  assert_near(fc_predictor_observe(&p, NAN), 0);
  assert_near(fc_predictor_observe(&p, 8), 4);
}

/* EXP_SELF on 100, 200, 50: every alpha predicts 100 for the 2nd window
 * (error 100, squared 10000); then alpha a predicts 100 + 100 a against 50,
 * so the smallest alpha, 0.05, wins:
 *   0.05: 0.9 * 10000 + (50 - 105)^2 = 12025, next 105 + .05 * -55 = 102.25
 *   0.30: 0.9 * 10000 + (50 - 130)^2 = 15400 */
static void
test_exp_self_picks_smallest_error(void **state)
{
  struct fc_predictor p;
  double a, b;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP_SELF, 0, 0), 0);
  assert_int_equal(p.nr_cands, 19);
  /* Before any error the paper's alpha is in use. */
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.3);
  assert_near(fc_predictor_observe(&p, 100), 100);
  assert_near(fc_predictor_observe(&p, 200), 130);
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.3);       /* all tied at 10000 */
  assert_near(fc_predictor_observe(&p, 50), 102.25);
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.05);
  assert_near(p.cand[p.best].sq_err, 12025);
  for (unsigned i = 0; i < p.nr_cands; i++)
    if (fabs(p.cand[i].alpha - 0.3) < EPS)
      assert_near(p.cand[i].sq_err, 15400);
}

/* A steady ramp: EXP lags a ramp by (1 - a) / a steps' worth, so the
 * largest alpha wins; after 0, 10, ..., 190 the 0.95 candidate's level is
 * 189.473684... (the Python transcription). */
static void
test_exp_self_ramp(void **state)
{
  struct fc_predictor p;
  double a;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_EXP_SELF, 0, 0), 0);
  for (int i = 0; i < 20; i++)
    fc_predictor_observe(&p, 10.0 * i);
  fc_predictor_params(&p, &a, NULL);
  assert_near(a, 0.95);
  assert_near(fc_predictor_next(&p), 189.47368421052633);
}

/* Holt starts every candidate on the exact slope of a ramp, so all are
 * perfect from the 3rd window on and tie: the paper's 0.3, 0.3 stays, and
 * predicts the next step.  On an irregular series the grid's (0.4, 0.9)
 * wins (the Python transcription gives 202.816 for the next window). */
static void
test_dexp_self(void **state)
{
  struct fc_predictor p;
  const double irregular[] = { 100, 200, 50, 300, 120 };
  double a, b;

  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP_SELF, 0, 0), 0);
  assert_int_equal(p.nr_cands, 81);
  for (int i = 0; i < 20; i++)
    fc_predictor_observe(&p, 10.0 * i);
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.3);
  assert_near(b, 0.3);
  assert_near(fc_predictor_next(&p), 200);

  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP_SELF, 0, 0), 0);
  for (int i = 0; i < 5; i++)
    fc_predictor_observe(&p, irregular[i]);
  fc_predictor_params(&p, &a, &b);
  assert_near(a, 0.4);
  assert_near(b, 0.9);
  assert_near(fc_predictor_next(&p), 202.816);
}

/* Replaying the same observations rebuilds the same state (the agent's
 * restart path). */
static void
test_replay_rebuilds(void **state)
{
  struct fc_predictor p, q;
  const double xs[] = { 5, 9, 4, 12, 30, 7, 8 };

  assert_int_equal(fc_predictor_init(&p, FC_PRED_DEXP_SELF, 0, 0), 0);
  assert_int_equal(fc_predictor_init(&q, FC_PRED_DEXP_SELF, 0, 0), 0);
  for (int i = 0; i < 7; i++)
    fc_predictor_observe(&p, xs[i]);
  for (int i = 0; i < 7; i++)
    fc_predictor_observe(&q, xs[i]);
  assert_memory_equal(&p, &q, sizeof p);
}

static void
test_outlier_bad_input(void **state)
{
  struct fc_outlier_filter f;

  assert_int_equal(fc_outlier_filter_init(&f, 0, 5), -EINVAL);
  assert_int_equal(fc_outlier_filter_init(&f, FC_OUTLIER_MAX_N + 1, 5), -EINVAL);
  assert_int_equal(fc_outlier_filter_init(&f, 20, 1.0), -EINVAL);
  assert_int_equal(fc_outlier_filter_init(&f, 20, NAN), -EINVAL);
  assert_int_equal(fc_outlier_filter_init(&f, 20, INFINITY), -EINVAL);
  assert_int_equal(fc_outlier_filter_init(&f, FC_OUTLIER_MAX_N, 5), 0);
}

/* n = 4, lambda = 2: after 10, 10, 10 the mean with 100 is
 * (30 + 100) / 4 = 32.5 and 100 > 2 * 32.5: fed 32.5.  The history keeps
 * the 100, so the next 10 sees (10 + 10 + 100 + 10) / 4 = 32.5 and passes. */
static void
test_outlier_replaced(void **state)
{
  struct fc_outlier_filter f;
  bool r;

  assert_int_equal(fc_outlier_filter_init(&f, 4, 2), 0);
  for (int i = 0; i < 3; i++) {
    assert_near(fc_outlier_filter_apply(&f, 10, &r), 10);
    assert_false(r);
  }
  assert_near(fc_outlier_filter_apply(&f, 100, &r), 32.5);
  assert_true(r);
  assert_near(fc_outlier_filter_apply(&f, 10, &r), 10);
  assert_false(r);
  /* Window of 4: 10, 100, 10 and 70 -> 47.5, and 70 < 95. */
  assert_near(fc_outlier_filter_apply(&f, 70, NULL), 70);
  /* 100 has left: 10, 70, 10 and 200 -> 72.5, 200 > 145. */
  fc_outlier_filter_apply(&f, 10, NULL);
  assert_near(fc_outlier_filter_apply(&f, 200, &r), 72.5);
  assert_true(r);
}

/* With k <= lambda values nothing is an outlier: 1 then 1000 passes
 * (mean 500.5).  The history wraps round its ring without trouble. */
static void
test_outlier_first_windows_pass(void **state)
{
  struct fc_outlier_filter f;
  bool r;

  assert_int_equal(fc_outlier_filter_init(&f, 20, 5), 0);
  assert_near(fc_outlier_filter_apply(&f, 1, &r), 1);
  assert_near(fc_outlier_filter_apply(&f, 1000, &r), 1000);
  assert_false(r);

  assert_int_equal(fc_outlier_filter_init(&f, 3, 1.5), 0);
  for (unsigned i = 0; i < 3 * FC_OUTLIER_MAX_N; i++)
    assert_near(fc_outlier_filter_apply(&f, 7, NULL), 7);
  /* (7 + 7 + 100) / 3 = 38, 100 > 57. */
  assert_near(fc_outlier_filter_apply(&f, 100, &r), 38);
  assert_true(r);
}

/* The paper's n = 20, lambda = 5, a volume at 1 that rises to 10 for good:
 *  1st: (19 * 1 + 10) / 20 = 1.45, 10 > 7.25 -> 1.45
 *  2nd: (18 + 20) / 20 = 1.9,  10 > 9.5      -> 1.9
 *  3rd: (17 + 30) / 20 = 2.35, 10 < 11.75    -> 10
 * A single burst among ones is cut, and so is the one after it. */
static void
test_outlier_lasting_rise_accepted(void **state)
{
  struct fc_outlier_filter f;
  bool r;

  assert_int_equal(fc_outlier_filter_init(&f, 20, 5), 0);
  for (int i = 0; i < 20; i++)
    fc_outlier_filter_apply(&f, 1, NULL);
  assert_near(fc_outlier_filter_apply(&f, 10, &r), 1.45);
  assert_near(fc_outlier_filter_apply(&f, 10, &r), 1.9);
  assert_true(r);
  assert_near(fc_outlier_filter_apply(&f, 10, &r), 10);
  assert_false(r);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_last),
    cmocka_unit_test(test_exp),
    cmocka_unit_test(test_dexp),
    cmocka_unit_test(test_clamped_at_zero),
    cmocka_unit_test(test_exp_self_picks_smallest_error),
    cmocka_unit_test(test_exp_self_ramp),
    cmocka_unit_test(test_dexp_self),
    cmocka_unit_test(test_replay_rebuilds),
    cmocka_unit_test(test_outlier_bad_input),
    cmocka_unit_test(test_outlier_replaced),
    cmocka_unit_test(test_outlier_first_windows_pass),
    cmocka_unit_test(test_outlier_lasting_rise_accepted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
