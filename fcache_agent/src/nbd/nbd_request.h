/* SPDX-License-Identifier: Apache-2.0 */
/* Pure NBD transmission-phase helpers: decoding requests, validating them
 * against an export, encoding simple replies and translating errnos.  No
 * I/O and no state, so all protocol decisions can be unit tested.
 *
 * Validation policy (spec references are to doc/proto.md):
 *   - unknown command, or a command whose callback is NULL  -> -EINVAL
 *   - BLOCK_STATUS unless structured replies and "base:allocation" were
 *     negotiated (spec: SHOULD EINVAL)                      -> -EINVAL
 *   - a flag not defined for the command (DF, REQ_ONE, FAST_ZERO, ...),
 *     NO_HOLE on anything but WRITE_ZEROES, REQ_ONE on anything but
 *     BLOCK_STATUS                                             -> -EINVAL
 *   - FUA is accepted on every command: the spec says a server that
 *     advertises SEND_FUA MUST accept it everywhere ("existing clients
 *     are known to set this bit on other commands"); it only has an
 *     effect on WRITE, TRIM and WRITE_ZEROES.
 *   - FLUSH with nonzero offset or count                    -> -EINVAL
 *   - WRITE / TRIM / WRITE_ZEROES on a read-only export     -> -EPERM
 *   - count 0 on any command but FLUSH                      -> -EINVAL
 *     (spec: behaviour unspecified, server SHOULD NOT disconnect)
 *   - offset, or count, not a multiple of min_block         -> -EINVAL
 *     except a count that ends exactly at the export's size: a size
 *     that is not a multiple of min_block is readable to its last byte
 *   - READ/WRITE count > max_block                          -> -EINVAL
 *     (the spec says SHOULD EINVAL; EOVERFLOW is reserved for DF reads).
 *     TRIM, WRITE_ZEROES, CACHE and BLOCK_STATUS may be up to 4 GiB-1:
 *     they carry no payload; the callbacks chunk them, and a block-status
 *     answer may cover less than asked.
 *   - range past the end (overflow-safe): WRITE and WRITE_ZEROES -> -ENOSPC,
 *     the others -> -EINVAL, as the spec's "Error values" asks.
 *   - DISC is always valid: it has no reply to carry an error.
 */
#ifndef FCACHE_NBD_REQUEST_H
#define FCACHE_NBD_REQUEST_H

#include <stdint.h>
#include "io_ops.h"
#include "nbd_proto.h"
#include "nbd_session.h"

struct nbd_request {
  uint16_t flags, type;
  uint64_t cookie, offset;
  uint32_t count;
};

/* Largest max_block we accept: every worker may hold a buffer this big. */
#define NBD_MAX_BLOCK_LIMIT (64u * 1024 * 1024)

/* Decode a 28-byte request header; -EPROTO on bad magic (the stream is
 * then out of sync and the connection must be dropped). */
int nbd_request_decode(const uint8_t buf[NBD_REQUEST_SIZE],
                       struct nbd_request *req);

/* Extents one block-status reply carries at most: 8 KiB of descriptors.
 * The spec lets a reply cover less than asked; the client asks again. */
#define NBD_BS_MAX_EXTENTS 1024u

/* 0 if the request may be passed to the export's callbacks, else the
 * negative errno to reply with (see the policy above).  sess is what the
 * connection negotiated; NULL for nothing. */
int nbd_request_validate(const struct nbd_request *req,
                         const struct fc_export *exp,
                         const struct nbd_session *sess);

/* Is a block_status callback's answer for req (n extents, of at most
 * max) one the wire may carry: 1 <= n <= max, no empty extent, no more
 * than asked for, no unknown flag, and (except at the export's end)
 * lengths that are multiples of min_block?  0 or -EIO. */
int nbd_extents_check(const struct nbd_request *req,
                      const struct fc_export *exp,
                      const struct fc_extent *ext, int n, uint32_t max);

/* Rewrite ext[0..n) in place as the wire's big-endian (length, flags)
 * descriptors (the same 8 bytes each). */
void nbd_extents_encode(struct fc_extent *ext, uint32_t n);

/* Bytes of payload that follow the header on the wire. */
static inline uint32_t nbd_request_payload_len(const struct nbd_request *req)
{
  return req->type == NBD_CMD_WRITE ? req->count : 0;
}

/* What an export's callback returned (0 or -errno), as this server may
 * answer it: -ESHUTDOWN becomes -EIO, since on the wire ESHUTDOWN means
 * that this server is stopping, which only the server itself knows. */
int nbd_export_errno(int err);

/* The one place where a host errno (either sign) becomes an NBD error. */
uint32_t nbd_errno_to_wire(int err);

/* Encode a simple reply header. */
void nbd_reply_encode(uint8_t buf[NBD_SIMPLE_REPLY_SIZE], uint32_t wire_error,
                      uint64_t cookie);

/* Encode a structured reply chunk's header; `length` bytes follow it. */
void nbd_chunk_encode(uint8_t buf[NBD_CHUNK_HDR_SIZE], uint16_t flags,
                      uint16_t type, uint64_t cookie, uint32_t length);

/* Transmission flags advertised for `exp`: derived from read_only and from
 * which callbacks exist, so the client is never offered a command we
 * would then refuse. */
uint16_t nbd_export_tflags(const struct fc_export *exp);

/* Sanity-check an export description before serving it: 0, or -EINVAL
 * with *why set to a static explanation. */
int nbd_export_check(const struct fc_export *exp, const char **why);

/* Big-endian wire accessors. */
static inline void nbd_put16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v;
}
static inline void nbd_put32(uint8_t *p, uint32_t v)
{
  nbd_put16(p, (uint16_t)(v >> 16)); nbd_put16(p + 2, (uint16_t)v);
}
static inline void nbd_put64(uint8_t *p, uint64_t v)
{
  nbd_put32(p, (uint32_t)(v >> 32)); nbd_put32(p + 4, (uint32_t)v);
}
static inline uint16_t nbd_get16(const uint8_t *p)
{
  return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t nbd_get32(const uint8_t *p)
{
  return (uint32_t)nbd_get16(p) << 16 | nbd_get16(p + 2);
}
static inline uint64_t nbd_get64(const uint8_t *p)
{
  return (uint64_t)nbd_get32(p) << 32 | nbd_get32(p + 4);
}

#endif
