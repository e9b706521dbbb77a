/* SPDX-License-Identifier: Apache-2.0 */
/* firepan_if (FirepanIF paper §3.3): the copy runs after the switchover
 * while the VM runs on the destination, which bypasses its cache until
 * the copy ends; blocks the VM writes meanwhile are invalidated in the
 * arriving copy.  The VM reads the origin during the copy, so the
 * source's dirty blocks are written back at the switch. */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_firepan_if = {
  .name = "firepan_if",
  .summary = "copy the cache after the switchover, behind an invalidation "
             "filter",
  .flush_at_switch = true,
  .list = FC_SWITCH_LIST_NONE,
  .background_copy = true,
  .invalidation_filter = true,
  .copy_may_reorder = true,
};
