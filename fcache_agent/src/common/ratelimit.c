/* SPDX-License-Identifier: Apache-2.0 */
#include <time.h>

#include "ratelimit.h"

uint64_t
fc_monotonic_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
real_sleep(uint64_t ns)
{
  struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

  while (nanosleep(&ts, &ts) == -1)
    ;
}

void
fc_ratelimit_init(struct fc_ratelimit *rl, uint64_t bytes_per_sec)
{
  rl->budget = bytes_per_sec / (1000000000ull / FC_RATELIMIT_PERIOD_NS);
  if (bytes_per_sec && rl->budget == 0)
    rl->budget = 1;
  rl->now_ns = fc_monotonic_ns;
  rl->sleep_ns = real_sleep;
  rl->period_start_ns = rl->now_ns();
  rl->used = 0;
}

uint64_t
fc_ratelimit_reserve(struct fc_ratelimit *rl, uint64_t bytes)
{
  uint64_t now = rl->now_ns();

  if (!rl->budget)
    return 0;
  if (now - rl->period_start_ns >= FC_RATELIMIT_PERIOD_NS) {
    uint64_t periods = (now - rl->period_start_ns) / FC_RATELIMIT_PERIOD_NS;

    rl->period_start_ns += periods * FC_RATELIMIT_PERIOD_NS;
    /* Overshoot is carried as debt, so the long-run rate is exact; an
     * unused budget is not carried, so an idle spell buys no burst that
     * would hurt the neighbours the limit protects. */
    rl->used = rl->used > periods * rl->budget ? rl->used - periods * rl->budget : 0;
  }
  if (rl->used < rl->budget) {
    rl->used += bytes;
    return 0;
  }
  return rl->period_start_ns + FC_RATELIMIT_PERIOD_NS - now;
}

void
fc_ratelimit_take(struct fc_ratelimit *rl, uint64_t bytes)
{
  uint64_t wait;

  while ((wait = fc_ratelimit_reserve(rl, bytes)) != 0)
    rl->sleep_ns(wait);
}
