/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "predict.h"
#include "common/enum_names.h"

/* Self-tuning weighs a candidate's past errors down by this much per
 * window: an error ten windows old counts a third as much as today's, so
 * the choice follows a workload that changes its pace (a busy season)
 * within a couple of weeks of daily windows, while one odd window does
 * not flip it. */
#define ERR_DISCOUNT 0.9

/* The paper's fixed parameters: the self-tuning kinds start from them and
 * keep them until another candidate has done strictly better. */
#define DEFAULT_ALPHA 0.3
#define DEFAULT_BETA 0.3

/* EXP_SELF's alphas: 0.05, 0.10, ..., 0.95. */
#define EXP_GRID 19u
/* DEXP_SELF's alphas and betas: 0.1, 0.2, ..., 0.9 each. */
#define DEXP_GRID 9u

_Static_assert(DEXP_GRID * DEXP_GRID <= FC_PRED_BANK, "the bank holds the grid");
_Static_assert(EXP_GRID <= FC_PRED_BANK, "the bank holds the grid");

static bool
smoothing_param_ok(double v)
{
  return isfinite(v) && v > 0.0 && v <= 1.0;
}

static void
add_cand(struct fc_predictor *p, double alpha, double beta)
{
  struct fc_pred_cand *c = &p->cand[p->nr_cands++];

  memset(c, 0, sizeof *c);
  c->alpha = alpha;
  c->beta = beta;
}

int
fc_predictor_init(struct fc_predictor *p, enum fc_predictor_kind kind,
                  double alpha, double beta)
{
  switch (kind) {
  case FC_PRED_LAST:
  case FC_PRED_EXP_SELF:
  case FC_PRED_DEXP_SELF:
    break;
  case FC_PRED_EXP:
    if (!smoothing_param_ok(alpha))
      return -EINVAL;
    break;
  case FC_PRED_DEXP:
    if (!smoothing_param_ok(alpha) || !smoothing_param_ok(beta))
      return -EINVAL;
    break;
  default:
    return -EINVAL;
  }
  memset(p, 0, sizeof *p);
  p->kind = kind;
  switch (kind) {
  case FC_PRED_LAST:
    /* Smoothing with alpha 1 is the last value: one code path for all. */
    add_cand(p, 1.0, 0.0);
    break;
  case FC_PRED_EXP:
    add_cand(p, alpha, 0.0);
    break;
  case FC_PRED_DEXP:
    add_cand(p, alpha, beta);
    break;
  case FC_PRED_EXP_SELF:
    for (unsigned i = 0; i < EXP_GRID; i++) {
      add_cand(p, 0.05 * (i + 1), 0.0);
      if (fabs(p->cand[i].alpha - DEFAULT_ALPHA) < 1e-9)
        p->best = i;
    }
    break;
  case FC_PRED_DEXP_SELF:
    for (unsigned a = 0; a < DEXP_GRID; a++)
      for (unsigned b = 0; b < DEXP_GRID; b++) {
        add_cand(p, 0.1 * (a + 1), 0.1 * (b + 1));
        if (fabs(p->cand[p->nr_cands - 1].alpha - DEFAULT_ALPHA) < 1e-9 &&
            fabs(p->cand[p->nr_cands - 1].beta - DEFAULT_BETA) < 1e-9)
          p->best = p->nr_cands - 1;
      }
    break;
  }
  return 0;
}

static bool
is_double(enum fc_predictor_kind kind)
{
  return kind == FC_PRED_DEXP || kind == FC_PRED_DEXP_SELF;
}

/* A cache demand below zero means nothing: a falling trend is cut at 0.
 * A rising one is cut at FC_DEMAND_MAX: Holt's trend carries the level
 * past any observation. */
static double
cand_prediction(const struct fc_pred_cand *c)
{
  double v = c->level + c->trend;

  if (!(v > 0.0))
    return 0.0;
  return v < FC_DEMAND_MAX ? v : FC_DEMAND_MAX;
}

/* Holt's method starts from the first observation with no trend, and
 * takes the trend from the first two, as the usual initialisation does:
 * smoothing a trend of zero towards the real one would take windows. */
static void
cand_update(struct fc_pred_cand *c, bool holt, unsigned observed, double x)
{
  double prev_level = c->level;

  if (observed == 0) {
    c->level = x;
    c->trend = 0.0;
  } else if (!holt) {
    c->level += c->alpha * (x - c->level);
  } else if (observed == 1) {
    c->level = x;
    c->trend = x - prev_level;
  } else {
    c->level = c->alpha * x + (1.0 - c->alpha) * (c->level + c->trend);
    c->trend = c->beta * (c->level - prev_level) + (1.0 - c->beta) * c->trend;
  }
}

/* A negative or non-finite observation can only be a bug upstream; taking
 * it as 0 keeps one bad window from poisoning every later prediction.  One
 * above FC_DEMAND_MAX (a damaged state file) is taken as the maximum. */
double
fc_predictor_observe(struct fc_predictor *p, double observed)
{
  double x = isfinite(observed) && observed > 0.0 ?
             (observed < FC_DEMAND_MAX ? observed : FC_DEMAND_MAX) : 0.0;
  bool holt = is_double(p->kind);

  for (unsigned i = 0; i < p->nr_cands; i++) {
    struct fc_pred_cand *c = &p->cand[i];

    if (p->observed > 0) {
      double err = x - cand_prediction(c);

      c->sq_err = ERR_DISCOUNT * c->sq_err + err * err;
    }
    cand_update(c, holt, p->observed, x);
  }
  /* Strictly smaller: a tie keeps the candidate in use. */
  for (unsigned i = 0; i < p->nr_cands; i++)
    if (p->cand[i].sq_err < p->cand[p->best].sq_err)
      p->best = i;
  p->observed++;
  p->last = x;
  return fc_predictor_next(p);
}

double
fc_predictor_next(const struct fc_predictor *p)
{
  if (p->observed == 0 || p->nr_cands == 0)
    return 0.0;
  return cand_prediction(&p->cand[p->best]);
}

void
fc_predictor_params(const struct fc_predictor *p, double *alpha, double *beta)
{
  const struct fc_pred_cand *c = &p->cand[p->best];

  if (alpha)
    *alpha = p->nr_cands ? c->alpha : 0.0;
  if (beta)
    *beta = p->nr_cands ? c->beta : 0.0;
}

static const char *const kind_names[] = {
  [FC_PRED_LAST] = "last",
  [FC_PRED_EXP] = "exp",
  [FC_PRED_EXP_SELF] = "exp_self",
  [FC_PRED_DEXP] = "dexp",
  [FC_PRED_DEXP_SELF] = "dexp_self",
};

FC_DEFINE_ENUM_NAMES(fc_predictor, enum fc_predictor_kind, kind_names)
