/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the dmcache engine: shared by dm_engine.c (devices, attach,
 * adoption) and dm_migr*.c (live migration).  Not for other modules. */
#ifndef FCACHE_DM_PRIV_H
#define FCACHE_DM_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"
#include "engine/engine.h"
#include "dm_cache.h"
#include "dm_dev.h"
#include "flash_pool.h"

#define FC_SECTOR 512u

struct fc_host;
struct fc_volume;
struct fc_dm_migr;
struct fc_dm_move;

struct fc_dm_engine {
  struct fc_flash_pool pool;
  char pool_path[FC_PATH_MAX + 32];
  uint64_t block_sectors;
};

struct fc_dmvol {
  char name[FC_DM_NAME_MAX], meta[FC_DM_NAME_MAX], data[FC_DM_NAME_MAX];
  uint64_t origin_sectors;
  dev_t origin_dev, data_dev;
  /* /sys/.../stat sectors at attach or adoption: the byte counters are
   * deltas from here, what this cache sent to origin and flash. */
  uint64_t base[4];
  struct fc_dm_migr *migr;      /* a live migration's state (dm_migr_priv.h) */
  struct fc_dm_move *move;      /* the running or last volume-move (dm_move.c) */
  char export_path[sizeof "/dev/mapper/" + 95];   /* /dev/mapper/<name> */
};

/* Live migration with the kernel data path (dm_migr*.c). */
extern const struct fc_engine_migr_ops fc_dm_migr_ops;
/* volume-move with dm-clone (dm_move.c). */
extern const struct fc_engine_move_ops fc_dm_move_ops;

#define DME(host) ((struct fc_dm_engine *)(host)->engine)
#define DV(v) ((struct fc_dmvol *)(v)->priv)

/* ---- a volume's devices (dm_volume.c) ---- */

/* The devices' names: "<dm_prefix>-<id>", "...-cmeta", "...-cdata". */
void fc_dmv_names(const struct fc_host *host, const char *id, struct fc_dmvol *dv);
/* Build the three devices.  fresh: a new cache (metadata zeroed first);
 * otherwise the devices are re-created over the flash as it was (after
 * a host restart), keeping the cache warm. */
int fc_dmv_build(struct fc_host *host, struct fc_volume *v, bool fresh, char *err,
                 size_t errlen);
/* v->export_uri: the cache device's /dev/mapper path. */
void fc_dmv_set_export(struct fc_volume *v);
/* A device with one of our names that we did not create: -EEXIST. */
int fc_dmv_check_not_foreign(const struct fc_dmvol *dv, char *err, size_t errlen);
/* "FCACHE-<tag>-<role>" and the flash pool owner "<id>/<role>". */
void fc_dmv_uuid(uint64_t tag, const char *role, char *buf, size_t len);
void fc_dmv_owner(const char *id, const char *role, char *buf, size_t len);
/* A dm-linear device over the owner <id>/<role>'s flash segments. */
/* The same, unless a device of ours has that name already (a restart). */
int fc_dmv_ensure_linear(struct fc_host *host, struct fc_volume *v, const char *name,
                         const char *role, char *err, size_t errlen);
int fc_dmv_create_linear(struct fc_host *host, struct fc_volume *v, const char *name,
                         const char *role, char *err, size_t errlen);
/* Zero the first 4 KiB of the owner's flash: a dm-cache or dm-era table
 * then formats fresh metadata there. */
int fc_dmv_zero_first_block(struct fc_host *host, const char *owner, char *err,
                            size_t errlen);
/* The cache target line over the volume's devices. */
int fc_dmv_cache_params(struct fc_host *host, struct fc_volume *v, enum fc_dmc_mode mode,
                        const char *policy, char *buf, size_t len, char *err,
                        size_t errlen);
/* Replace the live table of name by t (one target): load, suspend unless
 * suspended, resume.  The old table is gone when this returns: a cache
 * table's suspend has written its dirty bits and hints. */
int fc_dmv_swap(const char *name, const struct fc_dm_target *t, char *err, size_t errlen);
/* The volume's export as a cache table in mode with policy. */
int fc_dmv_load_cache(struct fc_host *host, struct fc_volume *v, enum fc_dmc_mode mode,
                      const char *policy, char *err, size_t errlen);
/* Write every dirty block back with the cleaner policy (the table stays
 * cleaner; reload it to go on).  -EIO with the count if it cannot. */
int fc_dmv_drain(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen);
int fc_dmv_status(const struct fc_dmvol *dv, struct fc_dmc_status *st, char *err,
                  size_t errlen);

/* The volume is being detached: remove what a migration added (the
 * dm-era metadata device and its flash).  Under host->lock. */
void fc_dm_migr_detach(struct fc_host *host, struct fc_volume *v);
void fc_dm_migr_free(struct fc_dm_migr *dm);
/* volume-show: a hybrid migration's copy into this volume while the
 * cache still reads from the source (dm_migr_hybrid.c); nothing after. */
void fc_dm_migr_volume_json(struct fc_dm_migr *dm, json_t *o);
/* -EBUSY and why while hybrid's clone is still under the cache: nothing
 * may reload the cache over its data device until the clone is gone. */
int fc_dm_migr_busy(struct fc_volume *v, char *err, size_t errlen);
/* Start-up, for a volume marked by an unfinished migration: take up
 * hybrid's copy into it if this agent died mid-hydration.  1 taken up
 * (the volume serves; volume-show says what is left), 0 nothing of the
 * kind, -errno and why. */
int fc_dm_migr_recover(struct fc_host *host, struct fc_volume *v, char *err,
                       size_t errlen);
/* Start-up after a host reboot, before the volume's devices are built:
 * true if v was the destination of a hybrid migration whose clone was
 * still under its cache (its dm-clone metadata still has its flash).  Its
 * cache must then be built over the clone again (fc_dm_migr_rebuild),
 * never straight over its data segment, where the blocks not copied yet
 * are not. */
bool fc_dm_migr_needs_clone(struct fc_host *host, struct fc_volume *v);
/* Build that stack: the metadata and data segments, the clone over its
 * metadata (the hydration bitmap kept), a new relay device, the cache over
 * the clone; then as fc_dm_migr_recover.  0, or -errno and why (nothing
 * serves the volume then). */
int fc_dm_migr_rebuild(struct fc_host *host, struct fc_volume *v, char *err,
                       size_t errlen);
/* Start-up after a host reboot, a volume marked out:<migration> (past its
 * switchover): its metadata and data segments, and its export as an
 * error table, as the freeze left them.  0, or -errno and why. */
int fc_dm_migr_rebuild_frozen(struct fc_host *host, struct fc_volume *v, char *err,
                              size_t errlen);

/* ---- block devices (dm_engine.c) ---- */

/* The size and device number of the block device at path. */
int fc_dm_blockdev_size(const char *path, uint64_t *bytes, dev_t *rdev, char *err,
                        size_t errlen);
/* The same for a device a volume may use as its origin: path must pass
 * origin_prefixes (origin/origin_policy.h). */
int fc_dm_checked_blockdev(struct fc_host *host, const char *path, uint64_t *bytes,
                           dev_t *rdev, char *err, size_t errlen);

/* ---- volume-move (dm_move.c) ---- */

/* At start-up, before the cache device is adopted or rebuilt: a move
 * recorded for v gets its clone back (rebuilt over its metadata after a
 * reboot), v's origin device becomes the clone, and the move goes on.
 * 0 when none was recorded. */
int fc_dm_move_adopt(struct fc_host *host, struct fc_volume *v, char *err,
                     size_t errlen);
/* The device name belongs to v's move (its clone or its metadata). */
bool fc_dm_move_claims(const struct fc_dmvol *dv, const char *name);
/* Detach, after the cache device is removed: remove a failed move's
 * devices and record. */
int fc_dm_move_detach(struct fc_host *host, struct fc_volume *v, char *err,
                      size_t errlen);
/* Stop watching the move and free it; not under host->lock. */
void fc_dm_move_free(struct fc_dm_move *mv);

#endif
