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

struct fc_io_ops {
  int (*pread)(void *handle, void *buf, uint32_t count, uint64_t offset);
  int (*pwrite)(void *handle, const void *buf, uint32_t count,
                uint64_t offset, bool fua);
  int (*flush)(void *handle);
  int (*trim)(void *handle, uint32_t count, uint64_t offset, bool fua);
  int (*zero)(void *handle, uint32_t count, uint64_t offset, bool fua);
};

/* What the NBD server advertises for one export. */
struct fc_export {
  const char *name;           /* export name; "" is accepted as default */
  const char *description;    /* NBD_INFO_DESCRIPTION, may be NULL */
  uint64_t size;              /* bytes */
  uint32_t min_block;         /* NBD_INFO_BLOCK_SIZE minimum (e.g. 512) */
  uint32_t pref_block;        /* preferred (the cache block size) */
  uint32_t max_block;         /* maximum payload, e.g. 32 MiB */
  bool read_only;
  const struct fc_io_ops *ops;
  void *handle;
};

#endif
