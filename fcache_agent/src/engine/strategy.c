/* SPDX-License-Identifier: Apache-2.0 */
/* The strategies' names, as the control socket and the logs spell them. */
#include <errno.h>
#include <string.h>

#include "engine.h"

static const char *const strategy_names[] = {
  "none", "cachemior", "firepan", "firepan_if", "cloudcache", "hybrid",
};

const char *
fc_strategy_name(enum fc_strategy s)
{
  return (unsigned)s < FC_STRAT_COUNT ? strategy_names[s] : "?";
}

int
fc_strategy_parse(const char *s, enum fc_strategy *out)
{
  for (unsigned i = 0; i < FC_STRAT_COUNT; i++)
    if (!strcmp(s, strategy_names[i])) {
      *out = (enum fc_strategy)i;
      return 0;
    }
  return -EINVAL;
}
