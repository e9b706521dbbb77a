/* SPDX-License-Identifier: Apache-2.0 */
/* Agent configuration: one INI file, one struct.
 *
 * Format: "[section]" headers, "key = value" lines, '#' or ';' comments,
 * surrounding whitespace ignored.  Keys live in [agent] (and [DEFAULT] is
 * accepted as an alias).  Unknown keys and malformed lines are errors that
 * name the file and line: a typo must not silently change behaviour.
 */
#ifndef FCACHE_CONFIG_H
#define FCACHE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "log.h"

#define FC_PATH_MAX 256
/* origin_prefixes: how many, and their default (where os-brick puts the
 * volumes it attaches: iSCSI/FC/NVMe names, multipath and LVM, RBD, and
 * the NFS/Quobyte/... mounts of its file-based connectors). */
#define FC_ORIGIN_PREFIXES_MAX 16
#define FC_ORIGIN_PREFIXES_DEFAULT \
  "/dev/disk/by-path/,/dev/disk/by-id/,/dev/mapper/,/dev/rbd,/var/lib/nova/mnt/"
/* origin_rbd_dirs: where an rbd: origin's conf and keyring may be (the
 * host's Ceph configuration, and the keyrings fcache's Nova driver writes
 * from libvirt's secrets). */
#define FC_ORIGIN_RBD_DIRS_DEFAULT "/etc/ceph/,/run/fcache/ceph/"

/* allocation_window: its longest fixed value (30 days), and "auto". */
#define FC_ALLOCATION_WINDOW_MAX_S 2592000u
#define FC_ALLOCATION_WINDOW_AUTO 0u

/* How agents authenticate and encrypt the migration stream
 * (migration/xfer_tls.h). */
enum fc_migration_tls { FC_TLS_PSK = 0, FC_TLS_X509, FC_TLS_NONE, FC_TLS_PINNED };

struct fc_config {
  char control_socket[FC_PATH_MAX];   /* default /run/fcache/agent.sock */
  char control_group[64];             /* "" = root only; else group name */
  /* State-changing control operations: root, or members of this group
   * ("" = root only).  control_group may read status only. */
  char control_admin_group[64];
  char state_dir[FC_PATH_MAX];        /* default /var/lib/fcache */
  char engine[16];                    /* "ucache" | "dmcache" */
  char cache_path[FC_PATH_MAX];       /* default <state_dir>/cache.img */
  uint64_t cache_size;                /* bytes; default 1 GiB */
  uint32_t block_size;                /* bytes, power of two, 512..1 MiB; default 4096 */
  char migration_listen[128];         /* host:port; default 127.0.0.1:7440 */
  enum fc_migration_tls migration_tls;  /* default pinned */
  char migration_tls_dir[FC_PATH_MAX];  /* x509 files; default /etc/pki/qemu */
  char export_dir[FC_PATH_MAX];       /* default /run/fcache/exports */
  char export_group[64];              /* "" = root only; else the hypervisor's group */
  enum fc_log_level log_level;        /* default info */
  enum fc_log_target log_target;      /* default stderr */
  unsigned nbd_threads;               /* workers per NBD connection; default 8 */
  unsigned origin_connections;        /* libnbd handles per NBD origin; default 4 */
  /* cachemior: origin reads the destination's warmer keeps in flight;
   * default 128, the FirepanIF paper's. */
  unsigned migration_preload_depth;
  unsigned writeback_interval_ms;     /* default 1000 */
  unsigned origin_retry_ms;           /* default 5000; 0: never */
  unsigned dirty_high_percent;        /* start writeback above this; default 50 */
  /* engine = dmcache: cache_path is the flash block device, cache_size the
   * bytes of it the agent carves; device-mapper names start with
   * "<dm_prefix>-" (default "fcache"), so two agents can share a kernel. */
  char dm_prefix[32];
  /* Where a path origin may live (origin/origin_policy.c): absolute,
   * without "." or ".." components; n_origin_prefixes may be 0 (NBD
   * origins only). */
  char origin_prefixes[FC_ORIGIN_PREFIXES_MAX][FC_PATH_MAX];
  unsigned n_origin_prefixes;
  /* nbds:// origins: the x509 files libnbd reads (its own default when
   * ""), and a PSK file ("" = none); both the agent's, never the URI's. */
  char origin_tls_dir[FC_PATH_MAX];
  char origin_tls_psk_file[FC_PATH_MAX];
  /* On-demand allocation (ucache; doc/reference/allocation.rst).  The choices are
   * kept as their names, checked here against their lists, and turned
   * into the allocator's enums by the engine, which owns them. */
  char allocation[16];                /* rwss (default) | fixed */
  /* Seconds, default 3600, or FC_ALLOCATION_WINDOW_AUTO ("auto"): each
   * volume's window chosen at the knee of its hit ratio against the
   * window (alloc/window_knee.h) between allocation_window_min (default
   * 600) and allocation_window_max (default 172800, 48 h). */
  unsigned allocation_window;
  unsigned allocation_window_min;
  unsigned allocation_window_max;
  char allocation_spare[16];          /* proportional (default) | idle */
  unsigned allocation_headroom_percent;  /* default 10 */
  double staging_fraction;            /* of a volume's share; 0.001..0.01 */
  char rws_predictor[16];             /* exp_self (default) | exp | dexp | dexp_self | last */
  char rws_tracker[16];               /* sampled (default) | exact */
  /* What a cloudcache migration's source sends in the background, besides
   * the dirty blocks the destination fetches on demand (CloudCache Figure
   * 11): bg_rws (default) the reuse working set, bg_dirty the dirty
   * blocks only, bg_ws the whole cache, on_demand nothing for
   * cloudcache_on_demand_s seconds after the switch, then the dirty blocks
   * not fetched by then. */
  char cloudcache_variant[16];
  unsigned cloudcache_on_demand_s;    /* default 60 */
  char export_clients[16];            /* session (default) | any */
  /* A block device origin: any name (default), or only under
   * origin_prefixes like a file. */
  char origin_block_devices[16];
  /* rbd: origins: the only directories their conf= and keyring= files may
   * be read from (same syntax as origin_prefixes), and the messenger mode
   * to the Ceph cluster ("secure" or "crc"). */
  char origin_rbd_dirs[FC_ORIGIN_PREFIXES_MAX][FC_PATH_MAX];
  unsigned n_origin_rbd_dirs;
  char origin_rbd_ms_mode[8];
  /* Seconds before the agent gives up on a peer that stopped: an NBD
   * origin with requests in flight and no reply (the connection is
   * dropped and made again), an export client that does not read its
   * replies (dropped), a control client without a complete request
   * (closed).  Default 30 each. */
  unsigned origin_stall_timeout_s;
  unsigned export_send_timeout_s;
  unsigned control_idle_timeout_s;
  /* Metrics (control/metrics.h): the Prometheus text file written for
   * node-exporter's textfile collector ("" = none; else an absolute path
   * ending in ".prom"), and seconds between samples (default 15). */
  char metrics_path[FC_PATH_MAX];
  unsigned metrics_interval;
};

void fc_config_defaults(struct fc_config *cfg);

/* Load `path` over the defaults.  On error returns -errno (-EINVAL for
 * a bad file) and writes a one-line message into err. */
int fc_config_load(const char *path, struct fc_config *cfg,
                   char *err, size_t errlen);

/* Parse "4096", "64K", "10M", "2G", "1T" (binary units, optional "iB"/"B").
 * Returns 0 or -EINVAL / -ERANGE. */
int fc_parse_size(const char *s, uint64_t *out);
/* True if `path` has a "." or ".." component: such a path would not mean
 * what it says once the kernel resolves it. */
bool fc_path_has_dot_component(const char *path);
/* A decimal unsigned int without sign or spaces: 0, -EINVAL or -ERANGE. */
int fc_parse_uint(const char *s, unsigned *out);

/* Parse origin_prefixes: comma-separated absolute paths without "." or
 * ".." components, at most FC_ORIGIN_PREFIXES_MAX, each shorter than
 * FC_PATH_MAX; "" is an empty list.  Unused entries are zeroed.  Returns 0
 * or -EINVAL with a reason (without the key's name) in err. */
int fc_parse_prefixes(const char *value,
                      char out[FC_ORIGIN_PREFIXES_MAX][FC_PATH_MAX],
                      unsigned *n_out, char *err, size_t errlen);

#endif
