/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache's side of live migration (engine.h).  The kernel serves the
 * VM; the agent moves cache blocks between the hosts' cache data devices
 * (cache block n at sector n * block_size) and writes the destination's
 * metadata with cache_restore.  doc/reference/dmcache.rst has the why; in short:
 *
 * Source.  Freezing swaps the export's table for an `error` table (the VM
 * has left: a stray request fails instead of diverging).  The cache
 * table's suspend writes dirty bits and smq hints to the metadata, which
 * no table then holds, so cache_dump can read it: that dump is the block
 * list, hottest (highest smq level) first.  A write_back volume whose
 * destination reads the origin is drained with the cleaner policy in
 * between (the hints are taken from the dump before the drain: the
 * cleaner's own suspend drops them).
 *
 * Destination.  Until the switchover the export is a linear table over
 * the origin, or an error table for a write_back volume (whose source may
 * hold dirty blocks): the hypervisor reads the disk when it starts the
 * destination QEMU, and that read must neither wait for the switchover
 * nor see older data.  The hypervisor keeps the guest paused until the
 * switchover (the kernel cannot hold writes and let reads pass).  At the
 * switchover the export gets its final table:
 *   none        a cache table over the fresh metadata;
 *   firepan     blocks copied before the switchover are written at their
 *               cache block offsets and cache_restore'd with their dirty
 *               bits before COMPLETE; the cache table loads them;
 *   firepan_if, cachemior
 *               a dm-era table over the origin, so the VM runs uncached
 *               while the blocks arrive (from the source, or preloaded
 *               from the origin) and the kernel records every block it
 *               writes.  Then: cache_restore the arrived blocks, swap the
 *               era table for a passthrough cache table (the kernel
 *               invalidates on any later write), invalidate_cblocks what
 *               era_invalidate lists, reload in the volume's mode.
 *   hybrid      (a preview, "experimental": true) the cache_restore'd
 *               list over a dm-clone whose source is a kernel NBD device
 *               the agent answers with the migration's FETCHes: a block
 *               not copied yet is read from the source's frozen cache
 *               while the VM waits, and the clone copies the rest
 *               (dm_migr_hybrid.c).
 * cloudcache needs the same plus its own list of blocks: refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dm_engine.h"
#include "dm_migr_priv.h"
#include "common/invfilter.h"

struct fc_dm_migr *
dm_migr_state(struct fc_engine_migr *m)
{
  return DV(m->vol)->migr;
}

void
dm_migr_xml_path(struct fc_engine_migr *m, const char *what, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s.%s.xml", m->host->volumes_dir, m->volume_id, what);
}

void
dm_migr_dev_path(const char *name, char *buf, size_t len)
{
  snprintf(buf, len, "/dev/mapper/%s", name);
}

/* One block at a page-aligned bounce buffer: the devices are opened
 * O_DIRECT (the kernel's cache writes bypass their page cache, so a
 * buffered read could return an old page). */
int
dm_migr_block_io(int fd, bool write, void *data, uint64_t bs, uint64_t off)
{
  void *buf;
  ssize_t n;
  int r = 0;

  if (posix_memalign(&buf, 4096, bs))
    return -ENOMEM;
  if (write)
    memcpy(buf, data, bs);
  n = write ? pwrite(fd, buf, bs, (off_t)off) : pread(fd, buf, bs, (off_t)off);
  if (n < 0)
    r = -errno;
  else if ((uint64_t)n != bs)
    r = -EIO;
  if (!r && !write)
    memcpy(data, buf, bs);
  free(buf);
  return r;
}

struct fc_dm_migr *
dm_migr_state_new(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_migr *st = calloc(1, sizeof *st);

  if (!st)
    return NULL;
  pthread_mutex_init(&st->lock, NULL);
  st->bs = DME(host)->block_sectors * FC_SECTOR;
  st->nr_oblocks = DV(v)->origin_sectors * FC_SECTOR / st->bs;
  st->data_fd = st->origin_fd = -1;
  return st;
}

void
fc_dm_migr_free(struct fc_dm_migr *st)
{
  if (!st)
    return;
  if (st->data_fd >= 0)
    close(st->data_fd);
  if (st->origin_fd >= 0)
    close(st->origin_fd);
  free(st->map);
  free(st->inst);
  dm_hyb_free(st->hy);
  fc_invfilter_destroy(&st->have);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

int
dm_migr_open_dev(const char *path, int flags, int *fd, char *err, size_t errlen)
{
  *fd = open(path, flags | O_DIRECT | O_CLOEXEC);
  if (*fd >= 0)
    return 0;
  snprintf(err, errlen, "cannot open %.300s: %s", path, strerror(errno));
  return -errno;
}

/* The devices must not be held open once the volume may be detached. */
void
dm_migr_close_fds(struct fc_dm_migr *st)
{
  pthread_mutex_lock(&st->lock);
  if (st->data_fd >= 0)
    close(st->data_fd);
  if (st->origin_fd >= 0)
    close(st->origin_fd);
  st->data_fd = st->origin_fd = -1;
  pthread_mutex_unlock(&st->lock);
}

/* hybrid over the relay runs, is settled, and is taken up again after an
 * agent's restart or a host's reboot, but the cost model and auto have
 * not been checked against it on this engine yet
 * (doc/reference/dmcache.rst): only when asked for by name. */
static bool
preview(enum fc_strategy s)
{
  return s == FC_STRAT_HYBRID;
}

/* The kernel serves the VM's misses itself: a strategy that fetches a
 * missed block from the source's cache cannot run here, but as hybrid's
 * preview. */
static int
supports(enum fc_strategy s, char *err, size_t errlen)
{
  char usable[128] = "";
  size_t len = 0;
  unsigned n = 0, left = 0;

  if (!fc_strategy(s)->on_demand)
    return 0;
  for (unsigned i = 0; i < FC_STRAT_COUNT; i++)
    left += !fc_strategy((enum fc_strategy)i)->on_demand;
  for (unsigned i = 0; i < FC_STRAT_COUNT && len < sizeof usable; i++) {
    if (fc_strategy((enum fc_strategy)i)->on_demand)
      continue;
    n++;
    len += (size_t)snprintf(usable + len, sizeof usable - len, "%s%s",
                            n == 1 ? "" : n == left ? " or " : ", ",
                            fc_strategy_name((enum fc_strategy)i));
  }
  if (preview(s)) {
    snprintf(err, errlen, "strategy %s on dmcache is a preview: its cost model and "
             "figures on this engine are not checked yet (see "
             "doc/reference/dmcache.rst); ask for it "
             "with \"experimental\": true on both agents, or use %s", fc_strategy_name(s),
             usable);
    return -ENOTSUP;
  }
  snprintf(err, errlen, "strategy %s needs engine ucache: it fetches a block from "
           "the source's cache when the VM misses on it, and the kernel's dm-cache "
           "cannot hold a request while a block comes over the network (see "
           "doc/reference/dmcache.rst); on dmcache use %s", fc_strategy_name(s), usable);
  return -ENOTSUP;
}

const struct fc_engine_migr_ops fc_dm_migr_ops = {
  .supports = supports,
  .preview = preview,
  .settle = &fc_dm_settle_ops,
  .fetch_hydrates = true,
  .out_freeze = dm_migr_out_freeze,
  .out_thaw = dm_migr_out_thaw,
  .out_list = dm_migr_out_list,
  .out_read = dm_migr_out_read,
  .out_forget = dm_migr_out_forget,
  .out_forget_all = dm_migr_out_forget_all,
  .in_begin = dm_migr_in_begin,
  .in_connected = dm_migr_in_connected,
  .in_add_remote = dm_migr_in_add_remote,
  .in_switch = dm_migr_in_switch,
  .in_install = dm_migr_in_install,
  .in_preload = dm_migr_in_preload,
  .in_end = dm_migr_in_end,
  .in_preloaded = dm_migr_in_preloaded,
  .in_durable = dm_migr_in_durable,
  .in_lost = dm_migr_in_lost,
  .in_shutdown = dm_migr_in_shutdown,
  .in_remote_dirty = dm_migr_in_remote_dirty,
  .in_completed = dm_migr_in_completed,
  .in_forget_all = dm_migr_in_forget_all,
  .stats_json = dm_migr_stats_json,
};
