/* SPDX-License-Identifier: Apache-2.0 */
/* Warm restart after a process crash.  The cache's clean metadata
 * records are kept current while the agent runs (metadata.h), but not
 * synced: after a power cut a clean record may name a block whose data
 * never reached the disk.  After a process crash (kill -9, an abort) the
 * kernel's page cache still holds every write the agent made, in order,
 * so the records are exactly as current as the agent left them.  The two
 * cases are told apart by the kernel's boot id, recorded next to the
 * metadata when the agent starts: the same id at the next start means no
 * reboot in between, and the clean blocks are served warm. */
#ifndef FCACHE_UCACHE_WARM_H
#define FCACHE_UCACHE_WARM_H

#include <stdbool.h>
#include <stddef.h>

/* <state_dir>/cache.boot */
void uc_warm_marker_path(const char *state_dir, char *buf, size_t len);
/* Does the marker name this boot?  False when absent or unreadable. */
bool uc_warm_same_boot(const char *marker);
/* Record this boot in the marker (after recovery, before RUNNING). */
int uc_warm_arm(const char *marker);

#endif
