/* SPDX-License-Identifier: Apache-2.0 */
/* The monotonic clock in the units the agent's timers and status use. */
#ifndef FCACHE_CLOCK_H
#define FCACHE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
fc_now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Microseconds from t0 to t1, 0 if t1 is not later. */
static inline uint64_t
fc_us_between(const struct timespec *t0, const struct timespec *t1)
{
  int64_t us = ((int64_t)t1->tv_sec - t0->tv_sec) * 1000000 +
               ((int64_t)t1->tv_nsec - t0->tv_nsec) / 1000;

  return us > 0 ? (uint64_t)us : 0;
}

#endif
