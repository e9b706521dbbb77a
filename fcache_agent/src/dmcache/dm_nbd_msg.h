/* SPDX-License-Identifier: Apache-2.0 */
/* The generic-netlink messages between the agent and the kernel's NBD
 * client (the "nbd" family of include/uapi/linux/nbd-netlink.h), built
 * into and parsed from caller's buffers with no I/O, so that unit tests
 * and a fuzzer run them as dm_nbd.c does.  Netlink is host-endian; every
 * message is a struct nlmsghdr, a struct genlmsghdr, then attributes of
 * 4-byte-aligned (length, type, payload). */
#ifndef FCACHE_DM_NBD_MSG_H
#define FCACHE_DM_NBD_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every request below fits in this many bytes. */
#define DM_NBD_MSG_MAX 256u

/* What NBD_CMD_CONNECT tells the kernel about a device and its socket. */
struct dm_nbd_conf {
  int index;                  /* /dev/nbdN; -1: the kernel picks one */
  uint64_t size;              /* bytes */
  uint64_t block_size;        /* the device's logical block: 512..4096 */
  uint64_t timeout_s;         /* per request; 0: none (the kernel waits) */
  /* While no socket is alive, how long the kernel holds requests for a
   * new one (NBD_CMD_RECONFIGURE) before it fails them; 0: not at all. */
  uint64_t dead_conn_timeout_s;
  uint64_t server_flags;      /* the transmission flags (NBD_FLAG_*) */
  int fd;                     /* the kernel's end of the socket */
};

/* Each builder writes one request into buf (cap bytes) and returns its
 * length, or -ENOSPC if it does not fit, -EINVAL for a bad argument
 * (a negative fd or index where one is needed). */

/* CTRL_CMD_GETFAMILY for "nbd": the answer carries the family's id. */
int dm_nbd_msg_family(uint8_t *buf, size_t cap, uint32_t seq);
/* NBD_CMD_CONNECT: the answer carries the device's index. */
int dm_nbd_msg_connect(uint8_t *buf, size_t cap, uint16_t family,
                       uint32_t seq, const struct dm_nbd_conf *conf);
/* NBD_CMD_RECONFIGURE of device index with a new socket for a dead one
 * (a restarted agent); the kernel refuses it (ENOSPC) while every socket
 * it has is alive. */
int dm_nbd_msg_reconfigure(uint8_t *buf, size_t cap, uint16_t family,
                           uint32_t seq, uint32_t index, int fd);
/* NBD_CMD_DISCONNECT of device index. */
int dm_nbd_msg_disconnect(uint8_t *buf, size_t cap, uint16_t family,
                          uint32_t seq, uint32_t index);

/* What the kernel answered to request seq, gathered over the datagrams
 * recv()d from the socket (an answer, then the acknowledgement). */
struct dm_nbd_answer {
  bool done;                  /* the acknowledgement (or error) arrived */
  int error;                  /* its -errno, or 0 */
  int family;                 /* CTRL_ATTR_FAMILY_ID, or -1 */
  int index;                  /* NBD_ATTR_INDEX, or -1 */
};

void dm_nbd_answer_init(struct dm_nbd_answer *ans);

/* Parse one datagram: every message of it for seq adds to ans (messages
 * for another seq, left from an earlier request, are skipped).  0, or
 * -EPROTO for a datagram that is not well-formed netlink (truncated
 * message or attribute, an error code that is not an errno). */
int dm_nbd_msg_parse(const uint8_t *buf, size_t len, uint32_t seq,
                     struct dm_nbd_answer *ans);

#endif
