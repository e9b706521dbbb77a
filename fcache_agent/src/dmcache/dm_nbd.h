/* SPDX-License-Identifier: Apache-2.0 */
/* A kernel NBD device (/dev/nbdN) fed by the agent: the kernel's NBD
 * client holds one end of a socketpair, given to it with generic
 * netlink's NBD_CMD_CONNECT, and the agent's NBD server answers on the
 * other (nbd_server_serve_socket, in threads of its own) from an export's
 * callbacks.  Nothing listens anywhere.  This is the relay under a
 * dm-clone whose source is the other host's cache (doc/reference/
 * dmcache.rst, "The NBD relay through the agents").  Needs nbd.ko and
 * CAP_SYS_ADMIN (the netlink commands are the kernel's admin commands). */
#ifndef FCACHE_DM_NBD_H
#define FCACHE_DM_NBD_H

#include "nbd/io_ops.h"

struct dm_nbd;

struct dm_nbd_params {
  int index;                  /* /dev/nbdN to use; -1: a free one */
  /* A request the relay does not answer for this long fails with EIO
   * and the kernel drops the socket; 0: it waits (the kernel facts). */
  unsigned timeout_s;
  /* Once the relay's socket is gone (the agent died), how long the kernel
   * holds the device's requests for a new one (dm_nbd_reattach); 0: it
   * fails them at once. */
  unsigned dead_conn_timeout_s;
  unsigned threads;           /* workers answering the kernel, >= 1 */
};

/* Connect a device to exp: its size (exp->size) and flags (read-only,
 * flush, ...: the NBD server's, from exp) are given to the kernel, its
 * logical block size is exp->min_block (512..4096, a power of two, the
 * kernel's range), and the kernel's requests are served from
 * exp->ops.  exp is copied; its strings and handle must outlive the
 * device.  0 with *out set, or -errno (logged). */
int dm_nbd_connect(const struct fc_export *exp, const struct dm_nbd_params *p,
                   struct dm_nbd **out);

/* A restarted agent: give device p->index, connected earlier with a
 * dead-connection timeout and whose socket died with the old agent, a
 * new one served from exp (NBD_CMD_RECONFIGURE); the requests the kernel
 * held go through.  exp must describe the same device (size, flags).
 * 0 with *out set, or -errno (logged; -ENOSPC: the kernel has no dead
 * socket to replace). */
int dm_nbd_reattach(const struct fc_export *exp, const struct dm_nbd_params *p,
                    struct dm_nbd **out);

/* N of /dev/nbdN. */
int dm_nbd_index(const struct dm_nbd *d);

/* The kernel gave d's socket up (a request timed out: the timeout_s of
 * dm_nbd_params) while this agent serves it: give it a new socket served
 * by the same relay (NBD_CMD_RECONFIGURE), and the requests it holds go
 * through.  1 done, 0 the socket is alive, -errno. */
int dm_nbd_revive(struct dm_nbd *d);

/* Disconnect the device (NBD_CMD_DISCONNECT: the kernel fails what is
 * still queued and tears its sockets down), then stop serving and free
 * d.  Whoever holds the device open (a dm table) should have let it go
 * first: the kernel keeps the device configured until they do.  0, or
 * the kernel's -errno (d is freed all the same). */
int dm_nbd_disconnect(struct dm_nbd *d);

/* Stop serving and free d, leaving the device configured: with a
 * dead-connection timeout the kernel holds its requests for a
 * dm_nbd_reattach (an agent that stops while the device serves). */
void dm_nbd_release(struct dm_nbd *d);

#endif
