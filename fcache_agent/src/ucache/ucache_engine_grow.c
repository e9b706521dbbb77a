/* SPDX-License-Identifier: Apache-2.0 */
/* Online extend: Cinder grows a volume in use, os-brick rescans the device
 * (or librbd refreshes the image), and Nova's driver asks the agent to
 * serve the new size.  The cache learns it before the export does, so
 * that no request reaches past the old end before the cache bounds it;
 * the guest's QEMU sees it once the driver reopens its NBD node, which
 * cannot grow in place. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "nbd/nbd_server.h"
#include "origin/origin.h"
#include "ucache_engine_priv.h"

/* The NBD minimum block the export announced: a size that is not a
 * multiple of it would leave a tail the guest cannot address. */
#define GROW_ALIGN 512u

int
uc_grow(struct fc_host *host, struct fc_volume *v, uint64_t *size, char *err,
        size_t errlen)
{
  struct uc_vol *uv = UV(v);
  uint64_t old, now;
  int r;

  if (!uv->uc || !uv->srv) {
    snprintf(err, errlen, "volume %s is unavailable (%s); it cannot grow until "
             "it serves again", v->p.id, v->error[0] ? v->error : "not serving");
    return -EBUSY;
  }
  if (v->p.migration[0] || v->releasing || v->leaving) {
    snprintf(err, errlen, "volume %s belongs to a live migration (%s); extend "
             "it once the migration has finished", v->p.id,
             v->p.migration[0] ? v->p.migration : "finishing");
    return -EBUSY;
  }
  old = uv->origin->size;
  if (old % host->cfg.block_size) {
    snprintf(err, errlen, "volume %s is %llu bytes, not a multiple of the cache "
             "block (%u): its cached last block cannot grow in place; detach "
             "and attach it again to serve the new size", v->p.id,
             (unsigned long long)old, host->cfg.block_size);
    return -EOPNOTSUPP;
  }
  r = fc_origin_size_now(uv->origin, &now);
  if (r == -EBUSY) {
    snprintf(err, errlen, "a storage move of volume %s is running; extend it "
             "once the move has finished", v->p.id);
    return r;
  }
  if (r == -EOPNOTSUPP) {
    snprintf(err, errlen, "the origin of volume %s (%s) cannot report a new "
             "size while attached (an NBD export's size is fixed per "
             "connection); detach and attach it again to serve the new size",
             v->p.id, v->p.origin);
    return r;
  }
  if (r) {
    snprintf(err, errlen, "cannot read the size of volume %s's origin %s: %s",
             v->p.id, v->p.origin, strerror(-r));
    return r;
  }
  if (now < old) {
    /* Cinder never shrinks a volume: something else changed the disk. */
    log_error("volume %s: its origin %s now reports %llu bytes, less than the "
              "%llu it had; still serving %llu", v->p.id, v->p.origin,
              (unsigned long long)now, (unsigned long long)old,
              (unsigned long long)old);
    snprintf(err, errlen, "the origin of volume %s reports %llu bytes, less than "
             "the %llu it had: fcache does not shrink a volume in use",
             v->p.id, (unsigned long long)now, (unsigned long long)old);
    return -EINVAL;
  }
  if (now % GROW_ALIGN) {
    snprintf(err, errlen, "the origin of volume %s reports %llu bytes, not a "
             "multiple of %u; not served", v->p.id, (unsigned long long)now,
             GROW_ALIGN);
    return -EINVAL;
  }
  if (now > old) {
    r = fc_ucache_grow(uv->uc, now);
    if (r) {
      snprintf(err, errlen, "cannot grow the cache of volume %s: %s", v->p.id,
               strerror(-r));
      return r;
    }
    nbd_server_grow(uv->srv, now);
    log_info("volume %s grew from %llu to %llu bytes", v->p.id,
             (unsigned long long)old, (unsigned long long)now);
  }
  *size = now;
  return 0;
}
