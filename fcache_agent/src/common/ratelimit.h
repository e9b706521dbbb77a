/* SPDX-License-Identifier: Apache-2.0 */
/* Migration rate limit (CloudCache §5.2): a byte budget per period
 * (100 ms) shared by background and on-demand transfers.  When the budget
 * is spent the sender sleeps until the next period; on-demand blocks are
 * simply first in line when it wakes.  0 bytes/s means unlimited. */
#ifndef FCACHE_RATELIMIT_H
#define FCACHE_RATELIMIT_H

#include <stdint.h>

#define FC_RATELIMIT_PERIOD_NS 100000000ull

struct fc_ratelimit {
  uint64_t budget;           /* bytes per period; 0 = unlimited */
  uint64_t period_start_ns;
  uint64_t used;
  uint64_t (*now_ns)(void);  /* injectable clock for tests */
  void (*sleep_ns)(uint64_t ns);
};

void fc_ratelimit_init(struct fc_ratelimit *rl, uint64_t bytes_per_sec);
/* How long to wait before `bytes` may be sent (0 = now); charges the
 * budget when it returns 0. */
uint64_t fc_ratelimit_reserve(struct fc_ratelimit *rl, uint64_t bytes);
/* Sleep as needed, then charge. */
void fc_ratelimit_take(struct fc_ratelimit *rl, uint64_t bytes);
uint64_t fc_monotonic_ns(void);

#endif
