/* SPDX-License-Identifier: Apache-2.0 */
/* Pure NBD request handling; see nbd_request.h for the validation policy. */
#include "nbd_request.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

int nbd_request_decode(const uint8_t buf[NBD_REQUEST_SIZE],
                       struct nbd_request *req)
{
  if (nbd_get32(buf) != NBD_REQUEST_MAGIC)
    return -EPROTO;
  req->flags = nbd_get16(buf + 4);
  req->type = nbd_get16(buf + 6);
  req->cookie = nbd_get64(buf + 8);
  req->offset = nbd_get64(buf + 16);
  req->count = nbd_get32(buf + 24);
  return 0;
}

/* Flags a client may legitimately set on each command we implement. */
static bool flags_allowed(uint16_t type, uint16_t flags)
{
  uint16_t ok = NBD_CMD_FLAG_FUA;

  if (type == NBD_CMD_WRITE_ZEROES)
    ok |= NBD_CMD_FLAG_NO_HOLE;
  if (type == NBD_CMD_BLOCK_STATUS)
    ok |= NBD_CMD_FLAG_REQ_ONE;
  return (flags & ~ok) == 0;
}

static bool is_pow2(uint32_t v)
{
  return v != 0 && (v & (v - 1)) == 0;
}

int nbd_request_validate(const struct nbd_request *req,
                         const struct fc_export *exp,
                         const struct nbd_session *sess)
{
  const struct fc_io_ops *ops = exp->ops;
  bool writes = false, has_cb, to_end;
  uint32_t min_block = exp->min_block > 1 ? exp->min_block : 1;
  uint64_t size;

  switch (req->type) {
  case NBD_CMD_DISC:
    return 0;
  case NBD_CMD_READ:
    has_cb = ops->pread != NULL;
    break;
  case NBD_CMD_WRITE:
    writes = true;
    /* A read-only export may have no pwrite; that is EPERM, not EINVAL. */
    has_cb = ops->pwrite != NULL || exp->read_only;
    break;
  case NBD_CMD_FLUSH:
    has_cb = ops->flush != NULL;
    break;
  case NBD_CMD_TRIM:
    writes = true;
    has_cb = ops->trim != NULL;
    break;
  case NBD_CMD_WRITE_ZEROES:
    writes = true;
    has_cb = ops->zero != NULL;
    break;
  case NBD_CMD_CACHE:
    has_cb = ops->cache != NULL;
    break;
  case NBD_CMD_BLOCK_STATUS:
    /* Without a selected context there is nothing to report, and
     * without structured replies no way to report it. */
    has_cb = ops->block_status != NULL && sess && sess->structured &&
             sess->base_allocation;
    break;
  default:
    return -EINVAL;
  }
  if (!has_cb || !flags_allowed(req->type, req->flags))
    return -EINVAL;

  if (req->type == NBD_CMD_FLUSH)
    return req->offset == 0 && req->count == 0 ? 0 : -EINVAL;

  if (writes && exp->read_only)
    return -EPERM;
  if (req->count == 0)
    return -EINVAL;
  /* The export's last request may end at its size when that is not a
   * multiple of min_block: QEMU (like nbdkit's clients) cuts a read or
   * write of the last sector at the export's end, and nothing else could
   * reach the tail. */
  size = fc_export_size(exp);
  to_end = req->offset <= size && req->count == size - req->offset;
  if (req->offset % min_block != 0 ||
      (req->count % min_block != 0 && !to_end))
    return -EINVAL;
  if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
      req->count > exp->max_block)
    return -EINVAL;
  /* Written as a subtraction so offsets near UINT64_MAX cannot wrap. */
  if (req->offset > size || req->count > size - req->offset)
    return req->type == NBD_CMD_WRITE || req->type == NBD_CMD_WRITE_ZEROES
           ? -ENOSPC : -EINVAL;
  return 0;
}

uint32_t nbd_errno_to_wire(int err)
{
  if (err == INT_MIN)
    return NBD_EIO;
  if (err < 0)
    err = -err;
  switch (err) {
  case 0:
    return 0;
  case EPERM:
  case EACCES:
  case EROFS:
    return NBD_EPERM;
  case EIO:
    return NBD_EIO;
  case ENOMEM:
    return NBD_ENOMEM;
  case EINVAL:
    return NBD_EINVAL;
  /* The spec asks for EDQUOT and EFBIG to be reported as ENOSPC. */
  case ENOSPC:
  case EDQUOT:
  case EFBIG:
    return NBD_ENOSPC;
  case EOVERFLOW:
    return NBD_EOVERFLOW;
  /* Kept distinct (as nbdkit does) because qemu treats ENOTSUP from a
   * discard as "ignore" and from write-zeroes as "fall back to writes". */
  case ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
  case EOPNOTSUPP:
#endif
    return NBD_ENOTSUP;
  case ESHUTDOWN:
    return NBD_ESHUTDOWN;
  default:
    /* Timeouts, lost origins and the like are I/O errors to the client;
     * EINVAL would wrongly blame its request. */
    return NBD_EIO;
  }
}

int nbd_export_errno(int err)
{
  /* NBD_ESHUTDOWN tells the client that the server is going away (the
   * spec's "Error values"), and a client may act on it: stop retrying,
   * reconnect elsewhere.  Only this server's own stop means that (see
   * admit() in nbd_conn.c).  An export failing with ESHUTDOWN reports a
   * peer that is stopping -- an NBD origin answering its own
   * NBD_ESHUTDOWN, a socket shut down under it -- while this export goes
   * on: for the client, that request met an I/O error. */
  return err == -ESHUTDOWN ? -EIO : err;
}

/* The callbacks' flags are put on the wire as they are. */
_Static_assert(FC_EXTENT_HOLE == NBD_STATE_HOLE &&
               FC_EXTENT_ZERO == NBD_STATE_ZERO, "extent flags");
_Static_assert(sizeof(struct fc_extent) == 8, "an extent is a descriptor");

int nbd_extents_check(const struct nbd_request *req,
                      const struct fc_export *exp,
                      const struct fc_extent *ext, int n, uint32_t max)
{
  uint32_t min_block = exp->min_block > 1 ? exp->min_block : 1;
  uint64_t total = 0;

  if (n < 1 || (uint32_t)n > max)
    return -EIO;
  for (int i = 0; i < n; i++) {
    if (ext[i].length == 0 ||
        (ext[i].flags & ~(uint32_t)(FC_EXTENT_HOLE | FC_EXTENT_ZERO)))
      return -EIO;
    total += ext[i].length;
    /* Clients that honour min_block may not be able to ask about a
     * fragment smaller than it; only the export's tail may be one. */
    if (ext[i].length % min_block != 0 && req->offset + total != fc_export_size(exp))
      return -EIO;
  }
  return total <= req->count ? 0 : -EIO;
}

void nbd_extents_encode(struct fc_extent *ext, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++) {
    struct fc_extent e = ext[i];
    uint8_t *p = (uint8_t *)&ext[i];

    /* The flags are base:allocation's wire values (io_ops.h). */
    nbd_put32(p, e.length);
    nbd_put32(p + 4, e.flags);
  }
}

void nbd_chunk_encode(uint8_t buf[NBD_CHUNK_HDR_SIZE], uint16_t flags,
                      uint16_t type, uint64_t cookie, uint32_t length)
{
  nbd_put32(buf, NBD_STRUCTURED_REPLY_MAGIC);
  nbd_put16(buf + 4, flags);
  nbd_put16(buf + 6, type);
  nbd_put64(buf + 8, cookie);
  nbd_put32(buf + 16, length);
}

void nbd_reply_encode(uint8_t buf[NBD_SIMPLE_REPLY_SIZE], uint32_t wire_error,
                      uint64_t cookie)
{
  nbd_put32(buf, NBD_SIMPLE_REPLY_MAGIC);
  nbd_put32(buf + 4, wire_error);
  nbd_put64(buf + 8, cookie);
}

uint16_t nbd_export_tflags(const struct fc_export *exp)
{
  const struct fc_io_ops *ops = exp->ops;
  /* One shared backend behind every connection: a flush on any
   * connection covers writes completed on all of them. */
  uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;

  if (exp->read_only)
    f |= NBD_FLAG_READ_ONLY;
  if (ops->flush)
    f |= NBD_FLAG_SEND_FLUSH;
  if (ops->pwrite)
    f |= NBD_FLAG_SEND_FUA;
  if (ops->trim)
    f |= NBD_FLAG_SEND_TRIM;
  if (ops->zero)
    f |= NBD_FLAG_SEND_WRITE_ZEROES;
  if (ops->cache)
    f |= NBD_FLAG_SEND_CACHE;
  return f;
}

int nbd_export_check(const struct fc_export *exp, const char **why)
{
  const char *msg = NULL;
  uint64_t floor;

  if (!exp || !exp->ops || !exp->ops->pread)
    msg = "export has no read callback";
  else if (!exp->read_only && !exp->ops->pwrite)
    msg = "writable export has no write callback";
  else if (!exp->name || strlen(exp->name) > NBD_MAX_STRING)
    msg = "export name missing or longer than 4096 bytes";
  else if (exp->description && strlen(exp->description) > NBD_MAX_STRING)
    msg = "export description longer than 4096 bytes";
  else if (!is_pow2(exp->min_block) || exp->min_block > 65536)
    msg = "min_block must be a power of two <= 65536";
  else if (!is_pow2(exp->pref_block) || exp->pref_block < exp->min_block ||
           exp->pref_block < 512)
    msg = "pref_block must be a power of two >= max(min_block, 512)";
  else if (exp->max_block % exp->min_block != 0 ||
           exp->max_block > NBD_MAX_BLOCK_LIMIT)
    msg = "max_block must be a multiple of min_block and <= 64 MiB";
  if (msg)
    goto out;
  /* The spec requires max >= min(pref, size) so the client can always
   * issue at least one preferred-size request. */
  floor = exp->pref_block < exp->size ? exp->pref_block : exp->size;
  if (exp->max_block < floor || exp->max_block == 0)
    msg = "max_block must be >= min(pref_block, size)";
out:
  if (why)
    *why = msg;
  return msg ? -EINVAL : 0;
}
