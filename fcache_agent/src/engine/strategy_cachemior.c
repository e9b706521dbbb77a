/* SPDX-License-Identifier: Apache-2.0 */
/* cachemior (FirepanIF paper §3.1): the source sends its hot list, block
 * addresses only, at the switchover; the destination's warmer reads those
 * blocks from the shared storage, hottest first, skipping any the VM
 * brought in itself.  No cache data crosses between the hosts, so the
 * origin must be current: dirty blocks are written back at the switch. */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_cachemior = {
  .name = "cachemior",
  .summary = "send the hot list; the destination preloads it from storage",
  .flush_at_switch = true,
  .list = FC_SWITCH_LIST_ALL,
  .preload = true,
};
