/* SPDX-License-Identifier: Apache-2.0 */
/* volume-set --write-policy on the ucache engine: the cache changes its
 * policy online (ucache_policy.c), and the volume's state file records
 * the new one, so that an agent restart (warm or after a crash) serves
 * the volume with it.
 *
 * The state file and the cache agree whenever the agent could stop:
 *   entering write_back, the file says write_back before the cache makes
 *     its first dirty block (a restart reading write_through would never
 *     write one back);
 *   leaving it, the file changes only once the cache wrote every dirty
 *     block back and switched (a restart reading write_back with nothing
 *     dirty loses nothing); if the file cannot be written the cache goes
 *     back to write_back, which needs no flush.
 * Between read_only and write_through no block is ever dirty: the file
 * follows the cache, which switches back if it cannot be written. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "ucache_engine_priv.h"

static int
save_policy(struct fc_host *host, struct fc_volume *v, enum fc_write_policy p,
            char *err, size_t errlen)
{
  enum fc_write_policy was = v->p.write_policy;
  int r;

  v->p.write_policy = p;
  r = fc_volume_params_save(host->volumes_dir, &v->p, err, errlen);
  if (r)
    v->p.write_policy = was;
  return r;
}

int
uc_set_policy(struct fc_host *host, struct fc_volume *v, enum fc_write_policy to,
              uint32_t *written, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);
  enum fc_write_policy from = v->p.write_policy;
  uint32_t back = 0;
  int r;

  *written = 0;
  if (!uv->uc || !uv->srv) {
    snprintf(err, errlen, "volume %s is unavailable (%s); its policy can change "
             "once it serves again", v->p.id,
             v->error[0] ? v->error : "not serving");
    return -EBUSY;
  }
  if (v->p.migration[0] || v->releasing || v->leaving) {
    snprintf(err, errlen, "volume %s belongs to a live migration (%s); change "
             "its policy once the migration has finished", v->p.id,
             v->p.migration[0] ? v->p.migration : "finishing");
    return -EBUSY;
  }
  if (from == to)
    return 0;

  if (to == FC_WRITE_BACK && (r = save_policy(host, v, to, err, errlen))) {
    size_t len = strlen(err);

    snprintf(err + len, errlen - len, "; volume %s stays %s", v->p.id,
             fc_write_policy_name(from));
    return r;
  }
  r = fc_ucache_set_write_policy(uv->uc, to, written);
  if (r) {
    if (to == FC_WRITE_BACK)
      (void)save_policy(host, v, from, err, errlen);
    if (r == -EBUSY)
      snprintf(err, errlen, "volume %s's write-back is held since the agent "
               "restarted (doc/reference/ucache.rst): claim the volume (volume-claim) "
               "if its VM runs here, then change its policy; it stays %s",
               v->p.id, fc_write_policy_name(from));
    else if (r == -EAGAIN)
      snprintf(err, errlen, "cannot change volume %s to %s: its last dirty "
               "blocks stayed in use by its requests for seconds; it stays %s "
               "and loses nothing (%u blocks written back meanwhile); try "
               "again", v->p.id, fc_write_policy_name(to),
               fc_write_policy_name(from), *written);
    else
      snprintf(err, errlen, "cannot change volume %s to %s: %s%s; it stays %s "
               "and loses nothing (%u blocks written back meanwhile)",
               v->p.id, fc_write_policy_name(to),
               from == FC_WRITE_BACK ? "writing its dirty blocks back to the "
                                       "origin failed: " : "",
               strerror(-r), fc_write_policy_name(from), *written);
    log_error("volume %s: policy %s -> %s failed: %s", v->p.id,
              fc_write_policy_name(from), fc_write_policy_name(to), err);
    return r;
  }
  if (to != FC_WRITE_BACK && (r = save_policy(host, v, to, err, errlen))) {
    size_t len = strlen(err);

    /* Back to what the file still says: from write_back or not, going
     * back needs no flush. */
    if (fc_ucache_set_write_policy(uv->uc, from, &back))
      log_error("volume %s: serving %s, but its state file says %s", v->p.id,
                fc_write_policy_name(to), fc_write_policy_name(from));
    snprintf(err + len, errlen - len, "; volume %s stays %s", v->p.id,
             fc_write_policy_name(from));
    return r;
  }
  log_info("volume %s: write policy %s -> %s, %u blocks written back",
           v->p.id, fc_write_policy_name(from), fc_write_policy_name(to),
           *written);
  return 0;
}
