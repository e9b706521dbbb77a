/* SPDX-License-Identifier: Apache-2.0 */
/* Device-mapper devices through libdevmapper: create, reload, suspend,
 * resume, remove, query, message.  Generic; the cache target's own table
 * and status live in dm_cache.h.
 *
 * libdevmapper is not thread-safe for node operations: callers serialise
 * (the agent calls these under its lock).  udev synchronisation is off --
 * the agent must work where no udev runs (inside UML, in containers) -- so
 * libdevmapper makes the /dev/mapper nodes itself. */
#ifndef FCACHE_DM_DEV_H
#define FCACHE_DM_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_DM_NAME_MAX 128
#define FC_DM_UUID_MAX 129

struct fc_dm_target {
  uint64_t start, len;          /* sectors */
  const char *type;
  const char *params;
};

struct fc_dm_info {
  bool exists;
  bool suspended;
  bool inactive_table;          /* a table loaded, not yet resumed */
  int open_count;
  uint32_t major, minor;
  char uuid[FC_DM_UUID_MAX];
};

/* Once, before any other call. */
void fc_dm_setup(void);

int fc_dm_create(const char *name, const char *uuid, const struct fc_dm_target *t,
                 unsigned nr, char *err, size_t errlen);
/* Load a new inactive table; it takes effect at the next resume. */
int fc_dm_reload(const char *name, const struct fc_dm_target *t, unsigned nr,
                 char *err, size_t errlen);
int fc_dm_suspend(const char *name, char *err, size_t errlen);
int fc_dm_resume(const char *name, char *err, size_t errlen);
int fc_dm_remove(const char *name, char *err, size_t errlen);
/* info->exists is false (and 0 returned) for a device that is not there. */
int fc_dm_info(const char *name, struct fc_dm_info *info);
/* The params of the first target of the live table's status / table. */
int fc_dm_status(const char *name, char *params, size_t len, char *err, size_t errlen);
/* A dm-clone's hydration: regions hydrated, of total, being hydrated now;
 * *failed when its metadata failed (then the counts are left alone).  0,
 * -EPROTO for a status line not dm-clone's, or fc_dm_status's error. */
int fc_dm_clone_status(const char *name, uint64_t *hydrated, uint64_t *total,
                       uint64_t *hydrating, bool *failed);
/* Give dm-clone device clone a moment without the I/O of the device above
 * it, which it needs to copy at all (it copies only while none of that
 * I/O is in flight): suspend above (its I/O waits there), wake the
 * clone's worker, resume once the copies it started stop growing, at most
 * max_ms later.  *copying: the copies in flight at the resume.  0, or
 * -errno and why (a failed suspend did nothing; a failed resume leaves
 * above suspended). */
int fc_dm_clone_pulse(const char *above, const char *clone, unsigned max_ms,
                      uint64_t *copying, char *err, size_t errlen);
int fc_dm_table(const char *name, char *params, size_t len, char *err, size_t errlen);
int fc_dm_message(const char *name, const char *msg, char *err, size_t errlen);
/* Call fn for every device-mapper device; stops at the first non-zero. */
int fc_dm_list(int (*fn)(void *ctx, const char *name), void *ctx);

#endif
