/* SPDX-License-Identifier: Apache-2.0 */
/* The block I/O interface between the NBD server and whatever serves an
 * export (the ucache engine, later dmcache).  Every callback returns 0 or a
 * negative errno; the NBD layer turns that errno into a wire error in one
 * place.  Callbacks are called concurrently from several threads and must be
 * thread-safe.  The NBD layer has already validated offset/count against
 * the export size and the block-size constraints before calling.
 */
#ifndef FCACHE_IO_OPS_H
#define FCACHE_IO_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* One extent of a block-status answer (NBD's "base:allocation"). */
struct fc_extent {
  uint32_t length;            /* bytes, > 0 */
  uint32_t flags;             /* FC_EXTENT_* */
};
/* Reads as zeroes and takes no space at the origin. */
#define FC_EXTENT_HOLE (1u << 0)
/* Reads as zeroes. */
#define FC_EXTENT_ZERO (1u << 1)

/* The end of a read started with pread_start: err is 0 or -errno. */
/* pread_start's flag for the thread that reads the connection's requests:
 * -EAGAIN, having changed nothing (data, hotness, statistics), where the
 * read would wait for anything but the CPU and the page cache -- another
 * request's locks, the cache device, the origin, a migration.  The NBD
 * layer then hands the read to a thread that may wait, and keeps reading
 * requests meanwhile. */
#define FC_IO_NOWAIT 1u
typedef void fc_io_done_fn(void *ctx, int err);

struct fc_io_ops {
  int (*pread)(void *handle, void *buf, uint32_t count, uint64_t offset);
  /* Optional: a read that may end later, so that the thread serving the
   * connection goes on to its next request instead of waiting for the
   * origin.  0: buf is filled now.  1: pending; done(ctx, err) is called
   * exactly once, from another thread and never from inside this call,
   * when buf is filled (or the read failed); buf is the callback's until
   * then.  -errno: failed now, done is not called.  done may be called
   * from the origin's own thread: it must not wait for anything an
   * origin request may be waiting for.  flags: FC_IO_NOWAIT or 0. */
  int (*pread_start)(void *handle, void *buf, uint32_t count,
                     uint64_t offset, fc_io_done_fn *done, void *ctx,
                     unsigned flags);
  int (*pwrite)(void *handle, const void *buf, uint32_t count,
                uint64_t offset, bool fua);
  int (*flush)(void *handle);
  int (*trim)(void *handle, uint32_t count, uint64_t offset, bool fua);
  /* NBD_CMD_WRITE_ZEROES.  may_trim: the range may become a hole (the
   * client did not set NBD_CMD_FLAG_NO_HOLE); otherwise it must stay
   * allocated. */
  int (*zero)(void *handle, uint32_t count, uint64_t offset, bool fua,
              bool may_trim);
  /* Optional (NBD_CMD_BLOCK_STATUS).  Describe the export from `offset`
   * on, within `count` bytes: at most `max` (>= 1) extents, in order and
   * without gaps; they may cover less than `count`, never nothing.
   * Returns how many were written, or -errno.  Flags 0 ("data") is always
   * a correct answer, and the one to give when unsure: a false hole
   * loses data in the client's copy, a false "data" only costs a read. */
  int (*block_status)(void *handle, uint32_t count, uint64_t offset,
                      struct fc_extent *ext, uint32_t max);
  /* Optional (NBD_CMD_CACHE): a hint that [offset, offset+count) will be
   * read soon.  0 once acted on (or declined), or -errno. */
  int (*cache)(void *handle, uint32_t count, uint64_t offset);
  /* Optional: a client finished its handshake on the export served at
   * socket path `where` (not its name, which may be secret) and may send
   * requests from now on (the ucache engine counts that as the volume
   * being claimed: doc/reference/ucache.rst). */
  void (*opened)(void *handle, const char *where);
};

/* What the NBD server advertises for one export. */
struct fc_export {
  const char *name;           /* export name; "" is accepted as default */
  /* The name is a capability (common/export_secret.h): only it opens the
   * export ("" does not), NBD_OPT_LIST does not show it, and the server
   * does not log it. */
  bool secret_name;
  const char *description;    /* NBD_INFO_DESCRIPTION, may be NULL */
  /* The volume served, for log lines (never the name, which may be the
   * export's secret); NULL logs as "-". */
  const char *volume;
  uint64_t size;              /* bytes; read with fc_export_size */
  uint32_t min_block;         /* NBD_INFO_BLOCK_SIZE minimum (e.g. 512) */
  uint32_t pref_block;        /* preferred (the cache block size) */
  uint32_t max_block;         /* maximum payload, e.g. 32 MiB */
  bool read_only;
  /* While a client that finished its handshake holds a connection,
   * refuse clients of other kernel sessions (SO_PEERCRED pid -> getsid):
   * the VM's QEMU and what it forks may connect, another VM's QEMU may
   * not (nbd_server.c).  Only a client that opened the export pins it, so
   * one that merely connects first cannot lock the VM out. */
  bool one_session;
  /* A client that reads none of its replies for this long is dropped;
   * 0: NBD_SEND_TIMEOUT_DEFAULT_S (nbd_conn.h). */
  unsigned send_timeout_s;
  const struct fc_io_ops *ops;
  void *handle;
};

/* An online extend grows a served export's size (nbd_server_grow) while
 * its connections check requests against it: one atomic word, which only
 * grows, so that a request sees the old size or the new one. */
static inline uint64_t
fc_export_size(const struct fc_export *exp)
{
  return __atomic_load_n(&exp->size, __ATOMIC_ACQUIRE);
}

#endif
