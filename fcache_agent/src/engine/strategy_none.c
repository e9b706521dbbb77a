/* SPDX-License-Identifier: Apache-2.0 */
/* none: the cache stays behind; the destination starts cold (the papers'
 * NoCacheMigration baseline).  Its dirty blocks reach the origin at the
 * switchover, since the destination reads the origin from then on. */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_none = {
  .name = "none",
  .summary = "move nothing: the destination's cache starts cold",
  .flush_at_switch = true,
  .list = FC_SWITCH_LIST_NONE,
};
