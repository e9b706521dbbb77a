/* SPDX-License-Identifier: Apache-2.0 */
/* An absolute CLOCK_REALTIME deadline `ms` from now, the form
 * pthread_cond_timedwait takes. */
#ifndef FCACHE_DEADLINE_H
#define FCACHE_DEADLINE_H

#include <time.h>

static inline struct timespec
fc_deadline_ms(unsigned long ms)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

#endif
