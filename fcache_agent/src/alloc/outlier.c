/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "predict.h"

int
fc_outlier_filter_init(struct fc_outlier_filter *f, unsigned n, double lambda)
{
  if (n < 1 || n > FC_OUTLIER_MAX_N || !isfinite(lambda) || !(lambda > 1.0))
    return -EINVAL;
  memset(f, 0, sizeof *f);
  f->n = n;
  f->lambda = lambda;
  return 0;
}

/* The mean is over x and the n - 1 observations before it (fewer at the
 * start), as in the paper.  Over k <= lambda values the mean is at least
 * x / k >= x / lambda, so nothing is flagged: the first windows of a new
 * volume pass as they are.
 *
 * The history keeps the raw observations, not the replaced values.  With
 * replaced values the mean creeps up by about x / n a window, so a lasting
 * rise of more than lambda times -- a volume that idled for its first days
 * and then starts its real work -- would be cut for some n windows (17 at
 * n = 20, lambda = 5, for a tenfold rise), starving it of cache.  With raw
 * values that rise is accepted at its 3rd window, while a one-window burst
 * is still cut.  The price: a burst that recurs within n windows gets
 * through from about its third time, as a real periodic demand should.
 *
 * A negative or non-finite x (a bug upstream) counts as 0, as in the
 * predictor, so that it does not stay in the history for n windows; one
 * above FC_DEMAND_MAX (a damaged state file) as that maximum. */
double
fc_outlier_filter_apply(struct fc_outlier_filter *f, double x, bool *replaced)
{
  unsigned older = f->len < f->n - 1 ? f->len : f->n - 1;
  double sum, mean, fed;
  bool out = false;

  if (!isfinite(x) || x < 0.0)
    x = 0.0;
  else if (x > FC_DEMAND_MAX)
    x = FC_DEMAND_MAX;
  sum = fed = x;
  for (unsigned k = 1; k <= older; k++)
    sum += f->hist[(f->pos + FC_OUTLIER_MAX_N - k) % FC_OUTLIER_MAX_N];
  mean = sum / (older + 1);
  if (x > f->lambda * mean) {
    fed = mean;
    out = true;
  }
  f->hist[f->pos] = x;
  f->pos = (f->pos + 1) % FC_OUTLIER_MAX_N;
  if (f->len < FC_OUTLIER_MAX_N)
    f->len++;
  if (replaced)
    *replaced = out;
  return fed;
}
