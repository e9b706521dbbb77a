/* Admission staging (CloudCache's address staging area): a block is
 * admitted to the cache only on its second miss while it is still staged,
 * so one-off scans do not flush the reuse working set.  The stage is a
 * fixed two-way set-associative table of recently missed oblocks; a new
 * miss replaces the older of the two candidates, which approximates FIFO
 * at 8 bytes per slot and O(1) per miss, with no allocation after init.
 * Not thread-safe: the volume's lock protects it. */
#ifndef FCACHE_STAGING_H
#define FCACHE_STAGING_H

#include <stdbool.h>
#include <stdint.h>
#include "common/types.h"

struct fc_staging {
  uint64_t *slots;       /* oblock + 1; 0 = empty */
  uint32_t mask;         /* nr_slots - 1, nr_slots a power of two >= 2 */
  uint8_t *age;          /* per set: which way was written last */
};

int fc_staging_init(struct fc_staging *st, uint32_t window);
void fc_staging_destroy(struct fc_staging *st);
/* Record a miss; true if this oblock was already staged (admit it now). */
bool fc_staging_miss(struct fc_staging *st, oblock_t ob);

#endif
