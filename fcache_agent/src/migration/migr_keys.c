/* SPDX-License-Identifier: Apache-2.0 */
/* The source's keys made before its migration is registered
 * (migration_tls = pinned, xfer_key.h).
 *
 * The destination must know the source's fingerprint before it accepts a
 * stream, and it learns what the source says only through the
 * orchestrator, before the destination prepares (Nova's
 * check_can_live_migrate_source, then pre_live_migration there).  So the
 * source makes its key first (migration-key), under the migration id the
 * orchestrator chose, and migration-outgoing takes it over, once.  A key
 * that no migration took (a check Nova did not follow with a migration) is
 * dropped after KEY_TTL_S, or for a newer one when the store is full. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "engine/volume.h"
#include "migration.h"
#include "xfer_tls.h"

#define MAX_KEYS 64
/* Nova checks, prepares the destination and starts the migration in
 * seconds; an hour is long enough for a slow pre_live_migration. */
#define KEY_TTL_S 3600

struct pending_key {
  char id[FC_MIGRATION_ID_MAX + 1];
  char volume_id[FC_VOLUME_ID_MAX + 1];
  uint64_t made_ns;
  struct fc_xfer_key *key;
};

static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending_key keys[MAX_KEYS];

static void
drop(struct pending_key *p)
{
  fc_xfer_key_free(p->key);
  memset(p, 0, sizeof *p);
}

/* Under keys_lock.  A key made after `now` is young, not 2^64 ns old: an
 * unsigned difference that wrapped dropped the key another migration-key
 * had just made while this one made its own, and that migration then
 * failed with "no key" (one in about 30 of 8 concurrent migrations). */
static void
drop_expired(uint64_t now)
{
  for (int i = 0; i < MAX_KEYS; i++)
    if (keys[i].key && now > keys[i].made_ns &&
        now - keys[i].made_ns > KEY_TTL_S * 1000000000ull) {
      log_info("migration %s: the source key no migration took expired",
               keys[i].id);
      drop(&keys[i]);
    }
}

int
fc_migration_key(struct fc_agent *agent, json_t *args, json_t **result, char *err,
                 size_t errlen)
{
  const char *id = json_string_value(json_object_get(args, "migration_id"));
  const char *vol = json_string_value(json_object_get(args, "volume_id"));
  struct fc_migration *m;
  struct fc_xfer_key *key;
  uint64_t now;
  int slot = -1, oldest = 0;
  int r;

  if (!id || !fc_migration_id_valid(id)) {
    snprintf(err, errlen, "migration_id must be 1-%d letters, digits, '-', '_' or '.'",
             FC_MIGRATION_ID_MAX);
    return -EINVAL;
  }
  if (!vol || !fc_volume_id_valid(vol)) {
    snprintf(err, errlen, "missing or invalid volume_id");
    return -EINVAL;
  }
  if (!fc_xfer_tls_pinned(agent->tls)) {
    /* Nothing to make: the orchestrator goes on without a fingerprint. */
    *result = json_pack("{s:s, s:s, s:s}", "migration_id", id, "volume_id", vol,
                        "tls", fc_xfer_tls_mode_name(agent->tls));
    return *result ? 0 : -ENOMEM;
  }
  m = fc_migration_find(agent, id);
  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "migration %s already exists on this agent", id);
    return -EEXIST;
  }
  r = fc_xfer_key_new(&key, err, errlen);
  if (r)
    return r;
  *result = json_pack("{s:s, s:s, s:s, s:s}", "migration_id", id, "volume_id", vol,
                      "tls", "pinned", "fingerprint", fc_xfer_key_fingerprint(key));
  if (!*result) {
    fc_xfer_key_free(key);
    return -ENOMEM;
  }
  pthread_mutex_lock(&keys_lock);
  /* Read under the lock, after the slow key generation: the store's
   * entries are then never newer than now. */
  now = fc_monotonic_ns();
  drop_expired(now);
  for (int i = 0; i < MAX_KEYS; i++) {
    if (keys[i].key && !strcmp(keys[i].id, id)) {
      slot = i;                 /* a repeated check: the newer key wins */
      break;
    }
    if (!keys[i].key && slot < 0)
      slot = i;
    if (keys[i].made_ns < keys[oldest].made_ns)
      oldest = i;
  }
  if (slot < 0) {
    log_warning("migration %s: %d source keys wait for their migration; the "
                "oldest (%s) is dropped", id, MAX_KEYS, keys[oldest].id);
    slot = oldest;
  }
  drop(&keys[slot]);
  snprintf(keys[slot].id, sizeof keys[slot].id, "%s", id);
  snprintf(keys[slot].volume_id, sizeof keys[slot].volume_id, "%s", vol);
  keys[slot].made_ns = now;
  keys[slot].key = key;
  pthread_mutex_unlock(&keys_lock);
  log_info("migration %s: source key made for volume %s (fingerprint %s)", id, vol,
           fc_xfer_key_fingerprint(key));
  return 0;
}

int
fc_migr_key_take(const char *id, const char *volume_id, struct fc_xfer_key **out,
                 char *err, size_t errlen)
{
  int r = -ENOENT;

  *out = NULL;
  pthread_mutex_lock(&keys_lock);
  drop_expired(fc_monotonic_ns());
  for (int i = 0; i < MAX_KEYS; i++) {
    if (!keys[i].key || strcmp(keys[i].id, id))
      continue;
    if (strcmp(keys[i].volume_id, volume_id)) {
      r = -EINVAL;
      break;
    }
    *out = keys[i].key;
    keys[i].key = NULL;
    drop(&keys[i]);
    r = 0;
    break;
  }
  pthread_mutex_unlock(&keys_lock);
  if (r == -EINVAL)
    snprintf(err, errlen, "the key of migration %s was made for another volume", id);
  else if (r)
    snprintf(err, errlen, "no key for migration %s on the source agent: with "
             "migration_tls = pinned, migration-key makes it before the "
             "destination prepares (it was never made, was already used, the "
             "agent restarted, or it expired after %d s)", id, KEY_TTL_S);
  return r;
}

void
fc_migr_keys_clear(void)
{
  pthread_mutex_lock(&keys_lock);
  for (int i = 0; i < MAX_KEYS; i++)
    if (keys[i].key)
      drop(&keys[i]);
  pthread_mutex_unlock(&keys_lock);
}
