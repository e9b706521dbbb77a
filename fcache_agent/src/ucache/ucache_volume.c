/* SPDX-License-Identifier: Apache-2.0 */
/* One ucache volume's engine state: its origin, its cache (ucache.h) and
 * the NBD export its VM opens. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "nbd/nbd_server.h"
#include "origin/origin.h"
#include "ucache_engine_priv.h"

#define NBD_MAX_BLOCK (32u << 20)

int
uc_volume_new(struct fc_volume *v)
{
  v->priv = calloc(1, sizeof(struct uc_vol));
  return v->priv ? 0 : -ENOMEM;
}

int
uc_volume_prepare(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_origin_policy pol;
  int r;

  fc_origin_policy_init(&pol, &host->cfg);
  pol.volume_id = v->p.id;
  r = fc_origin_open(v->p.origin, host->cfg.origin_connections, &pol,
                     &UV(v)->origin, err, errlen);
  return r ? r : uc_volume_build(host, v, err, errlen);
}

int
uc_volume_build(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  uint32_t quota = (uint32_t)(v->p.cache_size / host->cfg.block_size);
  struct fc_ucache_params up = {
    .quota_blocks = quota,
    .share_blocks = uc_allocator_volume_init(UCE(host)->alloc, v, quota),
    .write_policy = v->p.write_policy,
    .admission = v->p.admission,
    .rws_n = v->p.rws_n,
    .staging = v->p.staging,
    .staging_fraction = host->cfg.staging_fraction,
    .rws_mode = strcmp(host->cfg.rws_tracker, "exact") ? FC_RWS_SAMPLED : FC_RWS_EXACT,
    .pool = UCE(host)->pool,
    .volume_tag = v->p.tag,
    .volume_id = v->p.id,
    .writeback_interval_ms = host->cfg.writeback_interval_ms,
    .dirty_high_percent = host->cfg.dirty_high_percent,
  };
  struct uc_vol *uv = UV(v);
  int r;

  r = uc_move_prepare(host, v, err, errlen);
  if (r) {
    fc_origin_close(uv->origin);
    uv->origin = NULL;
    return r;
  }
  r = fc_ucache_create(UCE(host)->dev, UCE(host)->md, uv->origin, &up, &uv->uc);
  if (r) {
    snprintf(err, errlen, "cannot create cache for volume %s: %s", v->p.id,
             strerror(-r));
    fc_origin_close(uv->origin);
    uv->origin = NULL;
    return r;
  }
  uc_allocator_volume_follow(UCE(host)->alloc, v);
  return 0;
}

int
uc_volume_start(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);
  int n, r;

  n = snprintf(uv->export_path, sizeof uv->export_path, "%s/%s.sock",
               host->cfg.export_dir, v->p.id);
  if (n < 0 || (size_t)n >= sizeof uv->export_path) {
    snprintf(err, errlen, "export socket path %s/%s.sock is longer than a unix "
             "socket path may be (%zu bytes); use a shorter export_dir",
             host->cfg.export_dir, v->p.id, sizeof uv->export_path - 1);
    return -ENAMETOOLONG;
  }
  /* Both fit: export_uri has room for the longest socket path and a
   * secret.  A volume without a secret (attached by an older agent) keeps
   * the URI its VM was given, and its export stays as open as it was. */
  snprintf(v->export_uri, sizeof v->export_uri, "nbd+unix:///%s?socket=%s",
           v->p.export_secret, uv->export_path);
  if (!v->p.export_secret[0])
    log_warning("volume %s: attached by an agent without export names: its "
                "export answers to any name, as then; attach it again to "
                "confine it to its VM", v->p.id);
  uv->exp = (struct fc_export){
    .name = v->p.export_secret[0] ? v->p.export_secret : v->p.id,
    .secret_name = v->p.export_secret[0] != '\0',
    .description = "fcache ucache export",
    .volume = v->p.id,
    .size = uv->origin->size,
    /* 512 is what a VM's disk is made of; a size that is not a multiple
     * of it asks for 1, as nbdkit does: QEMU (7.2) cannot ask for the
     * block status of a tail shorter than min_block (it asserts). */
    .min_block = uv->origin->size % 512 ? 1 : 512,
    .pref_block = host->cfg.block_size,
    .max_block = NBD_MAX_BLOCK,
    .read_only = false,
    .one_session = strcmp(host->cfg.export_clients, "session") == 0,
    .send_timeout_s = host->cfg.export_send_timeout_s,
    .ops = &fc_ucache_io_ops,
    .handle = uv->uc,
  };
  uv->srv = nbd_server_start(uv->export_path, 0660, &uv->exp, host->cfg.nbd_threads);
  if (!uv->srv) {
    r = -errno;
    snprintf(err, errlen, "cannot serve volume %s on %s: %s", v->p.id,
             uv->export_path, strerror(-r));
    return r;
  }
  if (host->cfg.export_group[0]) {
    /* The hypervisor runs as its own user (libvirt: libvirt-qemu), not
     * as root; the export is its disk, and only its. */
    struct group *g = getgrnam(host->cfg.export_group);
    r = !g ? -ENOENT : chown(uv->export_path, (uid_t)-1, g->gr_gid) ? -errno : 0;
    if (r) {
      snprintf(err, errlen, "cannot give export %s to group '%s' (export_group): %s",
               uv->export_path, host->cfg.export_group,
               r == -ENOENT ? "no such group" : strerror(-r));
      nbd_server_stop(uv->srv);
      uv->srv = NULL;
      return r;
    }
  }
  r = fc_ucache_start(uv->uc);
  if (r) {
    snprintf(err, errlen, "cannot start writeback for volume %s: %s", v->p.id,
             strerror(-r));
    nbd_server_stop(uv->srv);
    uv->srv = NULL;
  }
  return r;
}

/* Its dirty blocks were current when the agent last ran.  Since then the
 * VM may have been evacuated (the host was down) and written the origin
 * from another host; writing them back now would put old data over new.
 * A VM still running here reconnects within seconds and claims them. */
void
uc_volume_hold_recovered(struct fc_volume *v)
{
  uint32_t dirty = fc_ucache_dirty(UV(v)->uc);

  if (v->p.write_policy != FC_WRITE_BACK || !dirty)
    return;
  fc_ucache_hold_writeback(UV(v)->uc);
  log_warning("volume %s: %u unwritten blocks recovered; their write-back is "
              "held until the volume is claimed (its VM reconnects, or "
              "volume-claim, volume-attach, volume-detach): if its VM was "
              "evacuated they are stale, and volume-detach with discard_dirty "
              "drops them", v->p.id, dirty);
}

void
uc_volume_free(struct fc_volume *v)
{
  struct uc_vol *uv = UV(v);

  nbd_server_stop(uv->srv);
  fc_ucache_destroy(uv->uc);
  fc_origin_close(uv->origin);
  uc_move_free(v);
  free(uv->held);
  free(uv->held_cb);
  free(uv);
  v->priv = NULL;
}

void
uc_superseded_path(struct fc_host *host, const char *volume_id, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s.superseded", host->volumes_dir, volume_id);
}
