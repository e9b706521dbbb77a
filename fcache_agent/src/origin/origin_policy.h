/* SPDX-License-Identifier: Apache-2.0 */
/* Where a path origin may come from (origin_policy.c), and the block
 * device relations it needs (origin_stack.c).  Part of origin.h's
 * interface; a separate header so that the engines which only check an
 * origin (dmcache) need not see the I/O interface. */
#ifndef FCACHE_ORIGIN_POLICY_H
#define FCACHE_ORIGIN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/config.h"

/* What the agent may open as a path origin.  Built from the agent's
 * configuration by fc_origin_policy_init(); it points into cfg. */
struct fc_origin_policy {
  const char (*prefixes)[FC_PATH_MAX];  /* origin_prefixes */
  unsigned n_prefixes;
  const char *state_dir;                /* nothing under it */
  const char *cache_path;               /* never the cache, nor under it */
  /* origin_block_devices = any: a block device needs no prefix. */
  bool block_devices_anywhere;
  /* nbds:// origins: origin_tls_dir and origin_tls_psk_file, or NULL. */
  const char *tls_dir;
  const char *tls_psk_file;
  /* rbd: origins: origin_rbd_dirs and origin_rbd_ms_mode. */
  const char (*rbd_dirs)[FC_PATH_MAX];
  unsigned n_rbd_dirs;
  const char *rbd_ms_mode;
  /* NBD origins: origin_stall_timeout_s, in ms. */
  unsigned stall_ms;
  /* The volume the origin is opened for, named by the origin's log lines
   * (copied at open); NULL: none. */
  const char *volume_id;
};

void fc_origin_policy_init(struct fc_origin_policy *pol,
                           const struct fc_config *cfg);

/* Checks `path` against pol and opens it with `flags` (O_RDONLY or
 * O_RDWR, plus O_EXCL to refuse a block device that is mounted or held by
 * anyone else).  The rules:
 *   - path is absolute, without "." or ".." components, and starts with
 *     one of pol->prefixes;
 *   - what it resolves to is a block device (for a prefix under /dev/:
 *     os-brick's by-path and by-id names are symlinks to /dev/sdX, outside
 *     the prefix), or a block device or regular file under the resolved
 *     prefix (any other prefix: a symlink must not escape it);
 *   - never a character device, socket, FIFO or directory;
 *   - never the cache (file or device), anything under state_dir, nor a
 *     block device that holds them or is built on them.
 * The checks are made on the inode actually opened (an O_PATH descriptor,
 * then reopened through /proc/self/fd), so swapping a symlink between the
 * check and the open gains nothing.  Returns 0 with *fd_out set, or a
 * negative errno (-EPERM for a refused origin) with a one-line message in
 * err naming the key to change. */
int fc_origin_policy_open(const struct fc_origin_policy *pol,
                          const char *path, int flags, int *fd_out,
                          char *err, size_t errlen);

/* The unix socket of an nbd+unix origin or move target: like a file, an
 * absolute path without "." or ".." under one of pol->prefixes that is not
 * under /dev/, a socket once resolved, inside its resolved prefix, and not
 * under state_dir -- so that a client of the control socket cannot make
 * the agent (root) read a root-only NBD server's disk.  0, or -EPERM /
 * -EINVAL with a one-line message naming origin_prefixes. */
int fc_origin_policy_check_socket(const struct fc_origin_policy *pol,
                                  const char *path, char *err, size_t errlen);

/* The conf= or keyring= file of an rbd: origin (`what` names which):
 * absolute, without "." or ".." components, under one of pol->rbd_dirs, a
 * regular file once resolved, inside its resolved directory and not under
 * state_dir.  Opened read-only; librados is then given /proc/self/fd/N,
 * so it reads the inode that was checked.  0 with *fd_out set, or -EPERM /
 * -EINVAL / -errno with a one-line message naming origin_rbd_dirs. */
int fc_origin_policy_open_rbd_file(const struct fc_origin_policy *pol,
                                   const char *what, const char *path,
                                   int *fd_out, char *err, size_t errlen);

/* True when block devices a and b share stored bytes: followed down
 * what each is built on (device-mapper, md, ...: /sys/dev/block/.../slaves)
 * to the devices at the bottom, two of which are the same device or a
 * disk and one of its partitions.  Bounded depth and breadth. */
bool fc_blockdev_overlap(dev_t a, dev_t b);

/* True when block device d is, or is built on, a loop device whose
 * backing regular file `match` accepts (given its stat and the path the
 * kernel reports).  A loop device over a block device counts as built on
 * that device, for fc_blockdev_overlap and here. */
struct stat;
bool fc_blockdev_backing_file(dev_t d,
                              bool (*match)(const struct stat *st,
                                            const char *path, void *ctx),
                              void *ctx);

#endif
