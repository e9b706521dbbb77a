/* SPDX-License-Identifier: Apache-2.0 */
/* hybrid (fcache's own): CloudCache's on-demand fetch for every cached
 * block, not only the dirty ones, with the background copy hottest
 * first: a miss on any block the source held is served from its cache,
 * never from the shared storage, and nothing is written back at the
 * switch. */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_hybrid = {
  .name = "hybrid",
  .summary = "fetch any cached block on demand; copy the cache in the "
             "background, hottest first",
  .list = FC_SWITCH_LIST_ALL,
  .on_demand = true,
  .background_copy = true,
};
