/* SPDX-License-Identifier: Apache-2.0 */
/* HEC's admission (Yang et al., cited as [33] by CloudCache), as the
 * paper reimplemented it for comparison (§4.4.2):
 *  - Touch Count: every 4 MiB region ever touched is remembered (a bitmap
 *    in HEC: no window, no bound); a missed block is admitted when its
 *    region was touched before;
 *  - Selective Sequential Rejection: a sequence of contiguous requests
 *    longer than 4 MiB is a scan, and its blocks past 4 MiB are not
 *    admitted.
 * Its demand (the allocation's input) is the distinct blocks of a window
 * that both rules would admit: sim.c feeds only those to the tracker. */
#include "replay_priv.h"

void
rp_hec_request(struct rp_hec *h, uint64_t first, uint64_t n)
{
  if (first != h->seq_next)
    h->seq_blocks = 0;
  h->seq_base = h->seq_blocks;
  h->seq_blocks += n;
  h->seq_next = first + n;
}

bool
rp_hec_block(struct rp_hec *h, const struct fc_replay_config *c, uint64_t block,
             uint64_t i)
{
  uint64_t per_region = HEC_REGION_BYTES / c->block_size;
  bool touched = rp_u64set_test_and_set(&h->touched,
                                        block / (per_region ? per_region : 1));
  uint64_t seq_bytes = (h->seq_base + i + 1) * c->block_size;

  return touched && seq_bytes <= HEC_SEQ_BYTES;
}
