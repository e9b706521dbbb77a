/* SPDX-License-Identifier: Apache-2.0 */
/* The knee of a rising curve that flattens: hit ratio against RWSS window
 * size (CloudCache §4.1, Figure 3), where a larger window stops paying for
 * the cache it takes.  Kneedle's rule: normalise both axes to [0, 1] and
 * take the point farthest above the chord from the first point to the
 * last.  A curve with no clear knee (that distance below min_gain) gets
 * the smallest window, as the paper advises: it saves cache for volumes
 * that have a knee. */
#ifndef FCACHE_ALLOC_KNEE_H
#define FCACHE_ALLOC_KNEE_H

#include <stddef.h>

/* The minimum gain the agent and fcache-replay ask for: a bend smaller
 * than 5 % of the normalised curve is no knee. */
#define FC_KNEE_MIN_GAIN 0.05

/* x strictly increasing, n >= 2; min_gain in [0, 1) (0.05 is a good
 * default).  The knee's index in *knee; -EINVAL on bad input. */
int fc_knee_point(const double *x, const double *y, size_t n, double min_gain,
                  size_t *knee);

#endif
