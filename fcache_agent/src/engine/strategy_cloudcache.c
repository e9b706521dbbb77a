/* SPDX-License-Identifier: Apache-2.0 */
/* cloudcache (CloudCache §5.2): no write-back at the switchover; the
 * source lists its dirty blocks, which the destination fetches on demand
 * when the VM misses on one, while the cache follows in the background
 * under the rate limit. */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_cloudcache = {
  .name = "cloudcache",
  .summary = "fetch dirty blocks on demand; copy the cache in the "
             "background, rate-limited",
  .list = FC_SWITCH_LIST_DIRTY,
  .on_demand = true,
  .background_copy = true,
};
