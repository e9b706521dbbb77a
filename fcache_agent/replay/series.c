/* SPDX-License-Identifier: Apache-2.0 */
/* A volume's per-window series (observed and predicted demand). */
#include <errno.h>
#include <stdlib.h>

#include "replay_priv.h"

int
rp_dvec_push(struct rp_dvec *d, double x)
{
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    double *v = realloc(d->v, cap * sizeof *v);

    if (!v)
      return -ENOMEM;
    d->v = v;
    d->cap = cap;
  }
  d->v[d->n++] = x;
  return 0;
}
