/* SPDX-License-Identifier: Apache-2.0 */
/* RWSS prediction for the next window (CloudCache §4.2): last value,
 * exponential smoothing and double exponential smoothing, each with fixed
 * parameters (alpha = beta = 0.3 in the paper) or self-tuning, and the
 * outlier filter that runs before any of them.  A predictor's whole state
 * follows from the observations fed to it, so a restarted agent rebuilds
 * it by feeding the persisted history again. */
#ifndef FCACHE_ALLOC_PREDICT_H
#define FCACHE_ALLOC_PREDICT_H

#include <stdbool.h>

enum fc_predictor_kind {
  FC_PRED_LAST,         /* the last observation */
  FC_PRED_EXP,          /* exponential smoothing, fixed alpha */
  FC_PRED_EXP_SELF,     /* exponential smoothing, self-tuning alpha */
  FC_PRED_DEXP,         /* double exponential (Holt), fixed alpha, beta */
  FC_PRED_DEXP_SELF,    /* double exponential, self-tuning alpha, beta */
};

/* Self-tuning keeps a bank of candidate parameters running side by side
 * and predicts with the one whose past error is smallest. */
#define FC_PRED_BANK 81u

struct fc_pred_cand {
  double alpha, beta;
  double level, trend;
  double sq_err;        /* discounted squared one-step error so far */
};

struct fc_predictor {
  enum fc_predictor_kind kind;
  unsigned observed;    /* observations fed so far */
  double last;
  unsigned nr_cands;
  unsigned best;
  struct fc_pred_cand cand[FC_PRED_BANK];
};

/* The largest demand, in blocks, that the filter and the predictors take
 * in or give out: a larger one is taken as this.  Observations are block
 * counts of one volume's window, far below it (2^40 blocks are 4 PiB at 4
 * KiB); what exceeds it comes from a damaged state file (a history value
 * of 1e308), and passed on it would make the callers' conversions to an
 * integer undefined (a share in blocks, bytes in volume-show).  Times any
 * block size up to 8 MiB it still fits an int64 of bytes. */
#define FC_DEMAND_MAX 1099511627776.0   /* 2^40 */

/* alpha, beta in (0, 1]; used by the fixed kinds, ignored by the others. */
int fc_predictor_init(struct fc_predictor *p, enum fc_predictor_kind kind,
                      double alpha, double beta);
/* Feed the observation of the window that just ended; returns the
 * prediction for the next window, in [0, FC_DEMAND_MAX]. */
double fc_predictor_observe(struct fc_predictor *p, double observed);
/* The current prediction for the next window; 0 before any observation. */
double fc_predictor_next(const struct fc_predictor *p);
/* The parameters in use now (the best candidate's when self-tuning). */
void fc_predictor_params(const struct fc_predictor *p, double *alpha, double *beta);

const char *fc_predictor_name(enum fc_predictor_kind kind);
/* "last", "exp", "exp_self", "dexp", "dexp_self"; -EINVAL otherwise. */
int fc_predictor_parse(const char *name, enum fc_predictor_kind *out);

#define FC_OUTLIER_MAX_N 64u

/* An observation more than lambda times the mean of the last n
 * observations (itself included) is replaced by that mean (the paper:
 * n = 20, lambda = 5).  The history holds the observations as they came,
 * before replacement, so a lasting rise (a volume that starts real work
 * after idling) is accepted after a few windows (outlier.c says why). */
struct fc_outlier_filter {
  unsigned n;
  double lambda;
  unsigned len, pos;
  double hist[FC_OUTLIER_MAX_N];
};

/* n in [1, FC_OUTLIER_MAX_N], lambda > 1; -EINVAL otherwise. */
int fc_outlier_filter_init(struct fc_outlier_filter *f, unsigned n, double lambda);
/* The value to feed the predictor: x (cut to [0, FC_DEMAND_MAX]), or the
 * mean if x is an outlier (*replaced set accordingly; replaced may be
 * NULL). */
double fc_outlier_filter_apply(struct fc_outlier_filter *f, double x, bool *replaced);

#endif
