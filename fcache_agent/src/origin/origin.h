/* SPDX-License-Identifier: Apache-2.0 */
/* The origin: the remote volume behind a cache.  Either a local path (a
 * block device or file, which is what os-brick hands over after attaching
 * a Cinder volume) or an NBD URI served by shared storage, reached with
 * libnbd.  All calls are thread-safe and return 0 or -errno.
 */
#ifndef FCACHE_ORIGIN_H
#define FCACHE_ORIGIN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "origin_policy.h"

struct fc_origin;

/* One extent of the origin's allocation map (NBD's base:allocation). */
struct fc_origin_extent {
  uint32_t length;              /* bytes, > 0 */
  uint32_t flags;               /* FC_ORIGIN_* */
};
#define FC_ORIGIN_HOLE (1u << 0)  /* not allocated: reads as zeroes */
#define FC_ORIGIN_ZERO (1u << 1)  /* reads as zeroes */

/* The end of an asynchronous read: err is 0 or -errno. */
typedef void fc_origin_done_fn(void *ctx, int err);

struct fc_origin_ops {
  int (*pread)(struct fc_origin *o, void *buf, uint32_t count, uint64_t off);
  /* Optional; see fc_origin_pread_async. */
  int (*pread_async)(struct fc_origin *o, void *buf, uint32_t count,
                     uint64_t off, fc_origin_done_fn *done, void *ctx);
  int (*pwrite)(struct fc_origin *o, const void *buf, uint32_t count,
                uint64_t off, bool fua);
  int (*flush)(struct fc_origin *o);
  int (*trim)(struct fc_origin *o, uint32_t count, uint64_t off);
  /* Optional; see fc_origin_zero.  -EOPNOTSUPP: cannot here, nothing
   * done (the caller writes zeroes instead). */
  int (*zero)(struct fc_origin *o, uint32_t count, uint64_t off,
              bool may_trim);
  /* Optional; see fc_origin_block_status. */
  int (*block_status)(struct fc_origin *o, uint32_t count, uint64_t off,
                      struct fc_origin_extent *ext, uint32_t max);
  /* Optional; see fc_origin_release. */
  int (*release)(struct fc_origin *o);
  /* Optional; see fc_origin_cancel. */
  void (*cancel)(struct fc_origin *o);
  /* Optional; see fc_origin_invalidate. */
  void (*invalidate)(struct fc_origin *o);
  /* Optional; see fc_origin_size_now. */
  int (*size_now)(struct fc_origin *o, uint64_t *size);
  void (*close)(struct fc_origin *o);
};

struct fc_origin {
  const struct fc_origin_ops *ops;
  uint64_t size;
  bool can_trim;
};

/* uri: an absolute path, "nbd://host[:port]/export",
 * "nbd+unix:///export?socket=/path", or the same with TLS required,
 * "nbds://" / "nbds+unix://" (credentials from pol: origin_tls_dir,
 * origin_tls_psk_file), or a Ceph RBD image in QEMU's syntax,
 * "rbd:pool/image:id=user:keyring=/path:mon_host=..." (common/rbd_spec.h;
 * conf and keyring files under pol's origin_rbd_dirs).  `connections` is how many parallel NBD
 * connections to open (ignored for paths).  A path must pass `pol`
 * (origin_policy.h), and a block device is opened exclusively: one that
 * is mounted or held by someone else is refused. */
int fc_origin_open(const char *uri, unsigned connections,
                   const struct fc_origin_policy *pol,
                   struct fc_origin **out, char *err, size_t errlen);

int fc_origin_open_path(const char *path, const struct fc_origin_policy *pol,
                        struct fc_origin **out, char *err, size_t errlen);
int fc_origin_open_rbd(const char *uri, const struct fc_origin_policy *pol,
                       struct fc_origin **out, char *err, size_t errlen);
int fc_origin_open_nbd(const char *uri, unsigned connections,
                       const struct fc_origin_policy *pol,
                       struct fc_origin **out, char *err, size_t errlen);

static inline int
fc_origin_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  return o->ops->pread(o, buf, count, off);
}

/* Start a read whose end is reported to done(ctx, err), exactly once and
 * always from one of the origin's own threads, never from inside this
 * call: the caller may hold what it likes across it, and done must not
 * wait for anything an origin request may be waiting for (it runs where
 * the origin's replies are read).  buf stays the origin's until then.
 * 0: started.  -EAGAIN: this origin cannot now (no asynchronous path, a
 * storage move routing requests, a request too large, every connection
 * full: it never waits); nothing was started and the caller reads with fc_origin_pread instead.  Any other
 * -errno: failed, nothing started, done is not called. */
static inline int
fc_origin_pread_async(struct fc_origin *o, void *buf, uint32_t count,
                      uint64_t off, fc_origin_done_fn *done, void *ctx)
{
  if (!o->ops->pread_async)
    return -EAGAIN;
  return o->ops->pread_async(o, buf, count, off, done, ctx);
}

static inline int
fc_origin_pwrite(struct fc_origin *o, const void *buf, uint32_t count,
                 uint64_t off, bool fua)
{
  return o->ops->pwrite(o, buf, count, off, fua);
}

static inline int
fc_origin_flush(struct fc_origin *o)
{
  return o->ops->flush(o);
}

/* -EOPNOTSUPP when the origin cannot discard: callers treat trim as a hint. */
static inline int
fc_origin_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  return o->can_trim ? o->ops->trim(o, count, off) : -EOPNOTSUPP;
}

/* Make [off, off+count) read as zeroes.  may_trim: the origin may
 * deallocate the range (a hole, as the NBD client allowed by leaving
 * NBD_CMD_FLAG_NO_HOLE unset); otherwise it must stay allocated.  An
 * origin that cannot zero in place, or a move that must route the
 * change, gets zeroes written.  Not durable before a flush. */
int fc_origin_zero(struct fc_origin *o, uint32_t count, uint64_t off,
                   bool may_trim);

/* The allocation of [off, off+count) from off on: at most max (>= 1)
 * extents, in order, without gaps, covering at least one byte and at most
 * count.  Returns how many, or -errno.  An origin that cannot tell (a
 * block device, an NBD server without base:allocation) answers "data"
 * (flags 0) for all of it.  With max 1 an NBD origin asks its server for
 * one extent (NBD_CMD_FLAG_REQ_ONE), which spares the server describing
 * the whole range on every call. */
static inline int
fc_origin_block_status_unknown(uint32_t count, struct fc_origin_extent *ext)
{
  ext[0] = (struct fc_origin_extent){ .length = count, .flags = 0 };
  return 1;
}

static inline int
fc_origin_block_status(struct fc_origin *o, uint32_t count, uint64_t off,
                       struct fc_origin_extent *ext, uint32_t max)
{
  if (o->ops->block_status)
    return o->ops->block_status(o, count, off, ext, max);
  return fc_origin_block_status_unknown(count, ext);
}

/* Give up what lets this host alone change the origin, so that another
 * host may: a live migration's source calls it once the volume is frozen
 * for the switchover.  The next change made here takes it back if no one
 * else holds it (a migration that did not switch over), and fails with
 * -EIO if someone does.  0 for origins without such a thing (files,
 * block devices, NBD: their exclusion is the host's or the server's). */
static inline int
fc_origin_release(struct fc_origin *o)
{
  return o->ops->release ? o->ops->release(o) : 0;
}

/* Give the origin up without waiting for it: requests in flight fail now
 * (-ENOTCONN) rather than when the origin answers or a stall limit
 * passes, and so does every later one until fc_origin_close, which the
 * caller still makes.  Never blocks.  A storage move aborting calls it on
 * its target, whatever the target does.  No-op for origins whose requests
 * cannot be abandoned (files, block devices, librbd). */
static inline void
fc_origin_cancel(struct fc_origin *o)
{
  if (o->ops->cancel)
    o->ops->cancel(o);
}

/* Forget what this host keeps of the origin's data: another host has
 * written it.  A block device or file origin is read through the page
 * cache, which a second host's writes to the same LUN do not reach (QEMU
 * uses O_DIRECT for that reason); a live migration's destination calls
 * this at the switchover, after the source's last write, and a source
 * that takes its volume back calls it too.  No-op for origins with no
 * such copy (NBD, librbd with its cache off). */
static inline void
fc_origin_invalidate(struct fc_origin *o)
{
  if (o->ops->invalidate)
    o->ops->invalidate(o);
}

/* The origin's size as its storage reports it now, which an online
 * extend (Cinder's, then os-brick's rescan) makes larger than o->size,
 * the size it had when opened; o->size is left to the caller, who grows
 * what depends on it first.  -EOPNOTSUPP: this origin cannot tell
 * without being opened again (NBD fixes the size per connection). */
static inline int
fc_origin_size_now(struct fc_origin *o, uint64_t *size)
{
  return o->ops->size_now ? o->ops->size_now(o, size) : -EOPNOTSUPP;
}

static inline void
fc_origin_close(struct fc_origin *o)
{
  if (o)
    o->ops->close(o);
}

#endif
