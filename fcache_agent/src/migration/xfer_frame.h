/* SPDX-License-Identifier: Apache-2.0 */
/* Frames of the agent-to-agent cache transfer protocol (version 1).
 *
 *   offset size
 *   0      4    magic "FCX1"
 *   4      1    version (1)
 *   5      1    type (enum fc_xfer_type)
 *   6      2    flags
 *   8      4    payload length (<= FC_XFER_MAX_PAYLOAD)
 *   12     4    CRC-32C of bytes 0..11 and of the payload
 *   16     ...  payload
 *
 * Integers are little-endian.  Every frame, and so every block, carries a
 * checksum; a frame that fails any check ends the stream (the migration
 * then fails cleanly: see doc/reference/migration.rst).
 */
#ifndef FCACHE_XFER_FRAME_H
#define FCACHE_XFER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

#define FC_XFER_MAGIC 0x31584346u      /* "FCX1" little-endian */
#define FC_XFER_VERSION 1
#define FC_XFER_HEADER_SIZE 16
#define FC_XFER_MAX_PAYLOAD ((1u << 20) + 64u)  /* a 1 MiB block and its id */
#define FC_XFER_MAX_JSON 4096u
/* A settle step's JSON: a list of up to 4096 block numbers. */
#define FC_XFER_MAX_STEP_JSON (128u * 1024)

enum fc_xfer_type {
  FC_XFER_HELLO = 1,      /* src->dst  JSON {migration_id, volume_id, token, block_size}
                           * or {settle: true, migration_id, volume_id, secret} */
  FC_XFER_WELCOME = 2,    /* dst->src  JSON {credits} */
  FC_XFER_ERROR = 3,      /* either    JSON {error} : the sender gives up */
  FC_XFER_LIST = 4,       /* src->dst  u64[]: oblock | dirty<<63, hottest first */
  FC_XFER_SWITCH = 5,     /* src->dst  JSON: source frozen, lists complete */
  FC_XFER_BLOCK = 6,      /* src->dst  (u64 oblock|dirty<<63, data)+; a reply: one */
  FC_XFER_FETCH = 7,      /* dst->src  u64[] oblocks wanted now */
  FC_XFER_CREDIT = 8,     /* dst->src  u32 more blocks the receiver has room for */
  FC_XFER_ACK = 9,        /* dst->src  u64[] oblocks now durable at the destination */
  FC_XFER_DONE = 10,      /* src->dst  every background block was sent */
  FC_XFER_COMPLETE = 11,  /* dst->src  destination holds all it needs */
  /* Before the switchover the source's volume is the current one: a read
   * at the destination (the arriving QEMU probing its disk, or the guest
   * between the hypervisor's switch and ours) is answered from there.
   * Sent only to a source whose HELLO said "reads": 1. */
  FC_XFER_READ = 12,      /* dst->src  u64 tag, u64 offset, u32 length */
  FC_XFER_DATA = 13,      /* src->dst  u64 tag, then the bytes (or F_RETRY / F_ERROR) */
  /* A settle stream (its HELLO says "settle": true, migr_settle_peer.c):
   * the agent settling asks its peer for one of the peer's own steps, and
   * the peer answers with the step's result or with ERROR.  Nothing else
   * is accepted on such a stream, and neither is taken on a transfer. */
  FC_XFER_STEP = 14,      /* either    JSON {step, ...}: a settle step */
  FC_XFER_STEP_DONE = 15, /* either    JSON: the step's result */
  /* The destination serves the volume: its gate is open or its final
   * table loaded.  The source's switchover returns only then, because a
   * kernel data path (dmcache) cannot hold the VM's requests until the
   * SWITCH is handled: a guest resumed before would get the interim
   * table's errors, or write beside the cache about to be attached.
   * JSON {} or {error}; sent only to a source whose HELLO said
   * "switch_ack": true. */
  FC_XFER_SWITCHED = 16,  /* dst->src  JSON {} or {error} */
  FC_XFER_TYPE_MAX = 16,
};

enum {
  FC_XFER_F_LAST = 1u << 0,     /* LIST: final chunk */
  FC_XFER_F_REPLY = 1u << 1,    /* BLOCK: answers a FETCH */
  FC_XFER_F_ABSENT = 1u << 2,   /* BLOCK: source no longer has it (no data) */
  /* DATA: the source has begun its switchover and no longer answers for
   * the volume; the read waits for SWITCH and is served here. */
  FC_XFER_F_RETRY = 1u << 3,
  FC_XFER_F_ERROR = 1u << 4,    /* DATA: u32 errno after the tag */
  /* LIST: not blocks to fetch but the hot list of a copy sent in the
   * cache device's order, for the destination's LRU (WELCOME's "order"). */
  FC_XFER_F_ORDER = 1u << 5,
};

#define FC_XFER_READ_SIZE 20u
#define FC_XFER_READ_MAX (1u << 20)    /* bytes per READ */
/* READs a destination may have outstanding; a source queues no more. */
#define FC_XFER_READS_INFLIGHT 32u

#define FC_XFER_DIRTY_BIT FC_BLOCK_DIRTY_BIT

struct fc_xfer_header {
  uint8_t type;
  uint16_t flags;
  uint32_t length;
  uint32_t crc;
};

/* Fill the 16 header bytes for a payload (computes the CRC). */
void fc_xfer_encode_header(uint8_t out[FC_XFER_HEADER_SIZE], uint8_t type,
                           uint16_t flags, const void *payload, uint32_t len);
/* Check magic, version, type and length bound. 0 or -EPROTO / -EMSGSIZE. */
int fc_xfer_decode_header(const uint8_t in[FC_XFER_HEADER_SIZE],
                          struct fc_xfer_header *h);
/* 0 if the payload matches the header's CRC, -EBADMSG otherwise. */
int fc_xfer_check_payload(const uint8_t in[FC_XFER_HEADER_SIZE],
                          const struct fc_xfer_header *h, const void *payload);

void fc_put_le64(uint8_t *p, uint64_t v);
uint64_t fc_get_le64(const uint8_t *p);
void fc_put_le32(uint8_t *p, uint32_t v);
uint32_t fc_get_le32(const uint8_t *p);

#endif
