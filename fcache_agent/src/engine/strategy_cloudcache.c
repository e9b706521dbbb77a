/* SPDX-License-Identifier: Apache-2.0 */
/* cloudcache (CloudCache §5.2): no write-back at the switchover; the
 * source lists its dirty blocks, which the destination fetches on demand
 * when the VM misses on one, while the reuse working set follows in the
 * background, most recent first, under the rate limit, and the source
 * frees each block as it moves (Figure 11's other variants: the agent's
 * cloudcache_variant). */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_cloudcache = {
  .name = "cloudcache",
  .summary = "fetch dirty blocks on demand; copy the reuse working set in "
             "the background, rate-limited",
  .list = FC_SWITCH_LIST_DIRTY,
  .on_demand = true,
  .background_copy = true,
  .background_variant = true,
};
