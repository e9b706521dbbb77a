/* SPDX-License-Identifier: Apache-2.0 */
/* The strategies' table, by enum fc_strategy, and their names as the
 * control socket and the logs spell them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strategy.h"

static const struct fc_strategy_desc *const strategies[FC_STRAT_COUNT] = {
  [FC_STRAT_NONE] = &fc_strategy_none,
  [FC_STRAT_CACHEMIOR] = &fc_strategy_cachemior,
  [FC_STRAT_FIREPAN] = &fc_strategy_firepan,
  [FC_STRAT_FIREPAN_IF] = &fc_strategy_firepan_if,
  [FC_STRAT_CLOUDCACHE] = &fc_strategy_cloudcache,
  [FC_STRAT_HYBRID] = &fc_strategy_hybrid,
};

const struct fc_strategy_desc *
fc_strategy(enum fc_strategy s)
{
  return (unsigned)s < FC_STRAT_COUNT ? strategies[s] : &fc_strategy_none;
}

const char *
fc_strategy_name(enum fc_strategy s)
{
  return (unsigned)s < FC_STRAT_COUNT ? strategies[s]->name : "?";
}

int
fc_strategy_parse(const char *s, enum fc_strategy *out)
{
  for (unsigned i = 0; i < FC_STRAT_COUNT; i++)
    if (!strcmp(s, strategies[i]->name)) {
      *out = (enum fc_strategy)i;
      return 0;
    }
  return -EINVAL;
}

void
fc_strategy_names(char *buf, size_t len)
{
  size_t used = 0;

  buf[0] = '\0';
  for (unsigned i = 0; i < FC_STRAT_COUNT && used < len; i++) {
    int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", strategies[i]->name);
    if (n < 0)
      return;
    used += (size_t)n;
  }
}
