/* SPDX-License-Identifier: Apache-2.0 */
/* An attached volume: its policy, its origin, what the VM opens, and its
 * engine's state.  The parameters are persisted as JSON in
 * <state_dir>/volumes/<id>.json so a restarted agent re-attaches them. */
#ifndef FCACHE_VOLUME_H
#define FCACHE_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "alloc/rws.h"
#include "alloc/staging.h"
#include "common/export_secret.h"
#include "common/types.h"

#define FC_VOLUME_ID_MAX 64
#define FC_ORIGIN_MAX 1024
#define FC_SETTLE_SECRET_BYTES 32
#define FC_SETTLE_SECRET_HEX (2 * FC_SETTLE_SECRET_BYTES)

struct fc_volume_params {
  char id[FC_VOLUME_ID_MAX + 1];
  char origin[FC_ORIGIN_MAX];
  uint64_t cache_size;              /* bytes, a multiple of the block size */
  enum fc_write_policy write_policy;
  enum fc_admission admission;
  unsigned rws_n;                   /* RWS_N's N for admission rws: 1..7 */
  enum fc_staging_kind staging;     /* admission rws: where misses wait */
  unsigned rws_window_s;            /* RWSS window; 0 = the agent's default */
  uint64_t tag;                     /* names this attachment's metadata records */
  /* A live migration that moved the volume's ownership and has not
   * completed: "out:<id>" on a source past its switchover, "in:<id>" on a
   * destination not yet complete.  Persisted, so that after a crash
   * neither side writes back or serves what may be stale. */
  char migration[80];
  /* With the mark, what lets this agent settle that migration through
   * the peer agent alone (migration/migr_settle_peer.c): the 256-bit
   * secret the destination made and sent over the authenticated stream,
   * and the peer's migration_listen.  Persisted with the mark, in the
   * same durable write, and cleared with it; "" where the peer agent
   * predates them (settle then relays through both control sockets). */
  char settle_secret[FC_SETTLE_SECRET_HEX + 1];
  char settle_peer[160];
  /* The export's name (common/export_secret.h), made at attach and kept
   * for the attachment's life, so that a QEMU reconnecting after an agent
   * restart or a storage move opens it again with the URI it has; "" for
   * a volume attached by an agent older than names (served as before:
   * doc/admin/security.rst) and for dmcache's device path. */
  char export_secret[FC_EXPORT_SECRET_LEN + 1];
};

struct fc_volume {
  struct fc_volume_params p;
  /* What the VM opens: an NBD URI (ucache) or a device path (dmcache).
   * The URI names the export by its secret: only admins see it. */
  char export_uri[sizeof(((struct sockaddr_un *)0)->sun_path) + 32 +
                  FC_EXPORT_SECRET_LEN];
  char error[512];                  /* why the volume is unavailable, or "" */
  bool releasing;                   /* a finished migration is detaching it */
  /* A migration-finish is forgetting its blocks, outside host.lock, and
   * will detach it: an attach may not take it for a new user. */
  bool leaving;
  /* The strategy an operator's tool (fcache evacuate) chose for this
   * volume's next live migration, until hint_expires_ms (CLOCK_MONOTONIC);
   * "" for none.  Not persisted: a restart forgets it. */
  char strategy_hint[16];
  uint64_t hint_expires_ms;
  void *priv;                       /* the engine's state for this volume */
};

/* Letters, digits, '-', '_', '.', not starting with '.': the id names a
 * socket and a state file, so nothing else may reach the filesystem. */
bool fc_volume_id_valid(const char *id);

/* A demand window longer than this is a unit mistake, not a workload:
 * CloudCache's longest is 48 hours. */
#define FC_RWS_WINDOW_MAX_S (30u * 24 * 3600)

const char *fc_write_policy_name(enum fc_write_policy p);
int fc_write_policy_parse(const char *s, enum fc_write_policy *out);
const char *fc_admission_name(enum fc_admission a);
int fc_admission_parse(const char *s, enum fc_admission *out);

/* True when origins a and b name the same disk, however spelled: the same
 * block device, file, NBD socket and export, or NBD host, port and export
 * (origin_identity.c).  The agent serves one volume per disk. */
bool fc_volume_same_origin(const char *a, const char *b);

/* A fresh random tag for a new attachment; never 0, which no volume has. */
int fc_volume_new_tag(uint64_t *tag);

int fc_volume_params_save(const char *dir, const struct fc_volume_params *p,
                          char *err, size_t errlen);
int fc_volume_params_load(const char *path, struct fc_volume_params *p,
                          char *err, size_t errlen);
int fc_volume_params_remove(const char *dir, const char *id);

#endif
