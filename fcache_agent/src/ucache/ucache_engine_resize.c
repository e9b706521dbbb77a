/* SPDX-License-Identifier: Apache-2.0 */
/* volume-set --cache-size on the ucache engine: the cache changes its
 * quota online (ucache_resize.c), the host's reservation follows (with
 * allocation = fixed each volume reserves its cache_size of the device),
 * and the volume's state file records the new size, so that a restarted
 * agent serves the volume with it.
 *
 * The state file never names a size smaller than what the cache holds,
 * whenever the agent could stop (a restart adopts at most cache_size of
 * the volume's blocks, and refuses to start rather than drop a dirty
 * one):
 *   growing, the file says the new size before the cache may fill it;
 *   shrinking, the file changes only once the cache gave the blocks back;
 *     if it cannot be written, the cache gets its old size back. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "ucache_engine_priv.h"

static int
save_size(struct fc_host *host, struct fc_volume *v, uint64_t size, char *err,
          size_t errlen)
{
  uint64_t was = v->p.cache_size;
  int r;

  v->p.cache_size = size;
  r = fc_volume_params_save(host->volumes_dir, &v->p, err, errlen);
  if (r)
    v->p.cache_size = was;
  return r;
}

/* The arguments and the host's room, before anything changes. */
static int
check(struct fc_host *host, struct fc_volume *v, uint64_t size, char *err,
      size_t errlen)
{
  struct uc_vol *uv = UV(v);
  struct fc_cachedev *dev = UCE(host)->dev;
  uint32_t bs = host->cfg.block_size;

  if (!uv->uc || !uv->srv) {
    snprintf(err, errlen, "volume %s is unavailable (%s); its cache size can "
             "change once it serves again", v->p.id,
             v->error[0] ? v->error : "not serving");
    return -EBUSY;
  }
  if (v->p.migration[0] || v->releasing || v->leaving) {
    snprintf(err, errlen, "volume %s belongs to a live migration (%s); change "
             "its cache size once the migration has finished", v->p.id,
             v->p.migration[0] ? v->p.migration : "finishing");
    return -EBUSY;
  }
  if (size == 0 || size % bs) {
    snprintf(err, errlen, "cache_size %llu bytes is not a multiple of the "
             "cache block (%u bytes, [agent] block_size); give for instance "
             "%llu", (unsigned long long)size, bs,
             (unsigned long long)((size + bs - 1) / bs * bs));
    return -EINVAL;
  }
  if (size / bs > dev->nr_blocks) {
    snprintf(err, errlen, "cache_size %llu bytes is larger than the whole "
             "cache device (%llu bytes)", (unsigned long long)size,
             (unsigned long long)dev->nr_blocks * bs);
    return -ENOSPC;
  }
  return 0;
}

static int
grow(struct fc_host *host, struct fc_volume *v, uint64_t size, char *err,
     size_t errlen)
{
  struct fc_cachedev *dev = UCE(host)->dev;
  uint32_t bs = host->cfg.block_size;
  uint64_t old = v->p.cache_size;
  uint32_t more = (uint32_t)((size - old) / bs), w, e;
  bool reserves = uc_allocator_reserves(UCE(host)->alloc);
  int r;

  if (reserves && fc_cachedev_reserve(dev, more)) {
    uint64_t free_b = (uint64_t)(dev->nr_blocks - dev->reserved) * bs;

    snprintf(err, errlen, "cache device full: volume %s would need %llu more "
             "bytes, %llu of %llu bytes are not reserved by any volume; shrink "
             "or detach another volume's cache first, or give at most %llu",
             v->p.id, (unsigned long long)(size - old),
             (unsigned long long)free_b, (unsigned long long)dev->nr_blocks * bs,
             (unsigned long long)(old + free_b));
    return -ENOSPC;
  }
  if ((r = save_size(host, v, size, err, errlen))) {
    size_t len = strlen(err);

    if (reserves)
      fc_cachedev_unreserve(dev, more);
    snprintf(err + len, errlen - len, "; volume %s keeps %llu bytes of cache",
             v->p.id, (unsigned long long)old);
    return r;
  }
  /* Raising the quota cannot fail. */
  (void)fc_ucache_resize(UV(v)->uc, (uint32_t)(size / bs), &w, &e);
  return 0;
}

static int
shrink(struct fc_host *host, struct fc_volume *v, uint64_t size,
       uint32_t *written, uint32_t *evicted, char *err, size_t errlen)
{
  struct fc_cachedev *dev = UCE(host)->dev;
  uint32_t bs = host->cfg.block_size;
  uint64_t old = v->p.cache_size;
  uint32_t w, e;
  int r;

  r = fc_ucache_resize(UV(v)->uc, (uint32_t)(size / bs), written, evicted);
  if (r == -EBUSY) {
    snprintf(err, errlen, "volume %s's write-back is held since the agent "
             "restarted (doc/reference/ucache.rst): claim the volume "
             "(volume-claim) if its VM runs here, then shrink its cache; it "
             "keeps %llu bytes", v->p.id, (unsigned long long)old);
    return r;
  }
  if (r == -EAGAIN) {
    snprintf(err, errlen, "cannot shrink the cache of volume %s to %llu bytes: "
             "its least recently used blocks stayed in use by its requests "
             "for seconds; it keeps %llu bytes and loses nothing (%u blocks "
             "written back, %u clean blocks evicted meanwhile); try again",
             v->p.id, (unsigned long long)size, (unsigned long long)old,
             *written, *evicted);
    return r;
  }
  if (r) {
    snprintf(err, errlen, "cannot shrink the cache of volume %s to %llu bytes: "
             "%s%s; it keeps %llu bytes and loses nothing (%u blocks written "
             "back, %u clean blocks evicted meanwhile)", v->p.id,
             (unsigned long long)size,
             *written || r == -EIO ? "writing its dirty blocks back to the "
                                     "origin failed: " : "",
             strerror(-r), (unsigned long long)old, *written, *evicted);
    return r;
  }
  if ((r = save_size(host, v, size, err, errlen))) {
    size_t len = strlen(err);

    (void)fc_ucache_resize(UV(v)->uc, (uint32_t)(old / bs), &w, &e);
    snprintf(err + len, errlen - len, "; volume %s keeps %llu bytes of cache",
             v->p.id, (unsigned long long)old);
    return r;
  }
  if (uc_allocator_reserves(UCE(host)->alloc))
    fc_cachedev_unreserve(dev, (uint32_t)((old - size) / bs));
  return 0;
}

int
uc_set_cache_size(struct fc_host *host, struct fc_volume *v, uint64_t size,
                  uint32_t *written, uint32_t *evicted, char *err,
                  size_t errlen)
{
  uint64_t old = v->p.cache_size;
  int r;

  *written = *evicted = 0;
  if ((r = check(host, v, size, err, errlen)))
    return r;
  if (size == old)
    return 0;
  r = size > old ? grow(host, v, size, err, errlen) :
                   shrink(host, v, size, written, evicted, err, errlen);
  if (r) {
    log_error("volume %s: cache size %llu -> %llu bytes failed: %s", v->p.id,
              (unsigned long long)old, (unsigned long long)size, err);
    return r;
  }
  /* allocation = rwss: the shares follow the new bound at once. */
  uc_allocator_rebalance_locked(UCE(host)->alloc);
  log_info("volume %s: cache size %llu -> %llu bytes, %u blocks written back, "
           "%u given back to the device", v->p.id, (unsigned long long)old,
           (unsigned long long)size, *written, *evicted);
  return 0;
}
