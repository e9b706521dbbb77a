/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>

#include "knee.h"

/* Below this the "distance" is rounding of a straight line, not a knee;
 * it keeps min_gain = 0 from picking a point of a line at random. */
#define ROUNDING 1e-9

int
fc_knee_point(const double *x, const double *y, size_t n, double min_gain,
              size_t *knee)
{
  double ymin, ymax, xspan, yspan, y0, ylast, best = 0.0;
  size_t at = 0;

  if (!x || !y || !knee || n < 2 || !isfinite(min_gain) || min_gain < 0.0 ||
      min_gain >= 1.0)
    return -EINVAL;
  ymin = ymax = y[0];
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i]) || (i > 0 && !(x[i] > x[i - 1])))
      return -EINVAL;
    ymin = fmin(ymin, y[i]);
    ymax = fmax(ymax, y[i]);
  }
  xspan = x[n - 1] - x[0];
  yspan = ymax - ymin;
  /* A flat curve: no window pays more than another. */
  if (!(yspan > 0.0) || !isfinite(xspan) || !isfinite(yspan)) {
    *knee = 0;
    return 0;
  }
  y0 = (y[0] - ymin) / yspan;
  ylast = (y[n - 1] - ymin) / yspan;
  for (size_t i = 1; i + 1 < n; i++) {
    double xn = (x[i] - x[0]) / xspan;
    double yn = (y[i] - ymin) / yspan;
    double above = yn - (y0 + (ylast - y0) * xn);

    if (above > best) {
      best = above;
      at = i;
    }
  }
  *knee = best >= min_gain && best > ROUNDING ? at : 0;
  return 0;
}
