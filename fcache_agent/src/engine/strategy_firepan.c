/* SPDX-License-Identifier: Apache-2.0 */
/* firepan (FirepanIF paper §3.2): the cache is copied host to host while
 * the VM is paused, before it resumes on the destination, which then
 * starts with all of it, dirty blocks included (nothing is written
 * back). */
#include "strategy.h"

const struct fc_strategy_desc fc_strategy_firepan = {
  .name = "firepan",
  .summary = "copy the whole cache while the VM is paused",
  .copy_before_switch = true,
  .list = FC_SWITCH_LIST_NONE,
  .copy_may_reorder = true,
};
