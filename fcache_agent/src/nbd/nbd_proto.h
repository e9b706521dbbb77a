/* SPDX-License-Identifier: Apache-2.0 */
/* NBD wire protocol constants, transcribed from the protocol description
 * (NetworkBlockDevice/nbd doc/proto.md).  Everything on the wire is
 * big-endian.  Only what fcache speaks or must recognise to refuse is
 * listed; values are fixed by the protocol and must never be renumbered.
 */
#ifndef FCACHE_NBD_PROTO_H
#define FCACHE_NBD_PROTO_H

#include <stdint.h>

/* Handshake magics. */
#define NBD_INIT_MAGIC        UINT64_C(0x4e42444d41474943)   /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC        UINT64_C(0x49484156454F5054)   /* "IHAVEOPT" */
#define NBD_REP_MAGIC         UINT64_C(0x0003e889045565a9)   /* option replies */

/* Transmission magics. */
#define NBD_REQUEST_MAGIC     UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC UINT32_C(0x67446698)
#define NBD_STRUCTURED_REPLY_MAGIC UINT32_C(0x668e33ef)

/* Handshake flags (16 bits, server -> client). */
#define NBD_FLAG_FIXED_NEWSTYLE  (1u << 0)
#define NBD_FLAG_NO_ZEROES       (1u << 1)

/* Client flags (32 bits, client -> server). */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)
#define NBD_FLAG_C_KNOWN  (NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)

/* Transmission flags (16 bits, per export). */
#define NBD_FLAG_HAS_FLAGS         (1u << 0)
#define NBD_FLAG_READ_ONLY         (1u << 1)
#define NBD_FLAG_SEND_FLUSH        (1u << 2)
#define NBD_FLAG_SEND_FUA          (1u << 3)
#define NBD_FLAG_ROTATIONAL        (1u << 4)
#define NBD_FLAG_SEND_TRIM         (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF           (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN    (1u << 8)
#define NBD_FLAG_SEND_RESIZE       (1u << 9)
#define NBD_FLAG_SEND_CACHE        (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO    (1u << 11)

/* Options (client requests during haggling). */
#define NBD_OPT_EXPORT_NAME       1u
#define NBD_OPT_ABORT             2u
#define NBD_OPT_LIST              3u
#define NBD_OPT_PEEK_EXPORT       4u    /* withdrawn */
#define NBD_OPT_STARTTLS          5u
#define NBD_OPT_INFO              6u
#define NBD_OPT_GO                7u
#define NBD_OPT_STRUCTURED_REPLY  8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT  10u
#define NBD_OPT_EXTENDED_HEADERS  11u

/* Option reply types; errors have bit 31 set. */
#define NBD_REP_ACK            1u
#define NBD_REP_SERVER         2u
#define NBD_REP_INFO           3u
#define NBD_REP_META_CONTEXT   4u
#define NBD_REP_FLAG_ERROR     (1u << 31)
#define NBD_REP_ERR_UNSUP      (NBD_REP_FLAG_ERROR | 1u)
#define NBD_REP_ERR_POLICY     (NBD_REP_FLAG_ERROR | 2u)
#define NBD_REP_ERR_INVALID    (NBD_REP_FLAG_ERROR | 3u)
#define NBD_REP_ERR_PLATFORM   (NBD_REP_FLAG_ERROR | 4u)
#define NBD_REP_ERR_TLS_REQD   (NBD_REP_FLAG_ERROR | 5u)
#define NBD_REP_ERR_UNKNOWN    (NBD_REP_FLAG_ERROR | 6u)
#define NBD_REP_ERR_SHUTDOWN   (NBD_REP_FLAG_ERROR | 7u)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8u)
#define NBD_REP_ERR_TOO_BIG    (NBD_REP_FLAG_ERROR | 9u)

/* NBD_REP_INFO payload types (16 bits). */
#define NBD_INFO_EXPORT        0u
#define NBD_INFO_NAME          1u
#define NBD_INFO_DESCRIPTION   2u
#define NBD_INFO_BLOCK_SIZE    3u

/* Commands (16-bit type field of a request). */
#define NBD_CMD_READ           0u
#define NBD_CMD_WRITE          1u
#define NBD_CMD_DISC           2u
#define NBD_CMD_FLUSH          3u
#define NBD_CMD_TRIM           4u
#define NBD_CMD_CACHE          5u
#define NBD_CMD_WRITE_ZEROES   6u
#define NBD_CMD_BLOCK_STATUS   7u
#define NBD_CMD_RESIZE         8u

/* Structured reply chunks (NBD_OPT_STRUCTURED_REPLY): a 20-byte header,
 * magic+flags(16)+type(16)+cookie+length, then `length` bytes.  Error
 * types have bit 15 set. */
#define NBD_REPLY_FLAG_DONE         (1u << 0)
#define NBD_REPLY_TYPE_NONE         0u
#define NBD_REPLY_TYPE_OFFSET_DATA  1u
#define NBD_REPLY_TYPE_OFFSET_HOLE  2u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR        ((1u << 15) | 1u)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) | 2u)

/* The "base:allocation" metadata context's extent flags. */
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

/* Command flags (16-bit flags field of a request). */
#define NBD_CMD_FLAG_FUA        (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE    (1u << 1)
#define NBD_CMD_FLAG_DF         (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE    (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO  (1u << 4)
#define NBD_CMD_FLAG_PAYLOAD_LEN (1u << 5)

/* Error values in replies.  They happen to equal Linux errnos, but the
 * protocol defines them independently: always translate through
 * nbd_errno_to_wire(), never put a host errno on the wire. */
#define NBD_EPERM      1u
#define NBD_EIO        5u
#define NBD_ENOMEM     12u
#define NBD_EINVAL     22u
#define NBD_ENOSPC     28u
#define NBD_EOVERFLOW  75u
#define NBD_ENOTSUP    95u
#define NBD_ESHUTDOWN  108u

/* Fixed message sizes. */
#define NBD_REQUEST_SIZE       28u   /* magic+flags+type+cookie+offset+len */
#define NBD_SIMPLE_REPLY_SIZE  16u   /* magic+error+cookie */
#define NBD_CHUNK_HDR_SIZE     20u   /* a structured reply chunk's header */
#define NBD_OPT_HDR_SIZE       16u   /* IHAVEOPT+option+length */
#define NBD_OPT_REPLY_HDR_SIZE 20u   /* magic+option+type+length */
#define NBD_EXPORT_NAME_PAD    124u  /* zeroes after an EXPORT_NAME reply */

/* The spec caps every string (export name, description, error message). */
#define NBD_MAX_STRING         4096u

#endif
