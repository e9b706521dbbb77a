/* SPDX-License-Identifier: Apache-2.0 */
/* NBD fixed-newstyle negotiation on a connected socket, plus the small
 * blocking socket helpers that the transmission phase shares with it.
 *
 * Supported options: EXPORT_NAME, ABORT, LIST, INFO, GO (replying
 * NBD_INFO_EXPORT and NBD_INFO_BLOCK_SIZE always, NBD_INFO_NAME and
 * NBD_INFO_DESCRIPTION on request), STRUCTURED_REPLY, and, once structured
 * replies are on, LIST_META_CONTEXT and SET_META_CONTEXT for
 * "base:allocation" when the export has a block_status callback (see
 * nbd_meta.h).  Everything else, including STARTTLS and
 * EXTENDED_HEADERS, gets NBD_REP_ERR_UNSUP.  The only export is `exp`; it
 * answers to its own name and, unless exp->secret_name, to "" (the
 * default export) and NBD_OPT_LIST shows it.
 *
 * The peer is untrusted: option payloads over NBD_HS_OPT_MAX are drained
 * (up to NBD_HS_DRAIN_MAX, else the connection is dropped) and refused,
 * nothing is allocated from a client-supplied length, and a client that
 * keeps haggling past NBD_HS_MAX_OPTIONS options is disconnected.
 */
#ifndef FCACHE_NBD_HANDSHAKE_H
#define FCACHE_NBD_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "io_ops.h"
#include "nbd_session.h"

/* A GO/INFO with a maximal (4096-byte) name and a generous list of info
 * requests fits; no legitimate option is bigger. */
#define NBD_HS_OPT_MAX     8192u
#define NBD_HS_DRAIN_MAX   (64u * 1024)
#define NBD_HS_MAX_OPTIONS 1024u

/* Negotiate on `fd`.  Returns 1 when the client entered the transmission
 * phase (via GO or EXPORT_NAME), 0 when it left cleanly (NBD_OPT_ABORT or
 * EOF between options), or a negative errno on a protocol violation or
 * socket error.  In every case but 1 the caller just closes the socket.
 * *sess is what the client negotiated (all false for a client that
 * negotiated nothing). */
int nbd_handshake(int fd, const struct fc_export *exp,
                  struct nbd_session *sess);

/* Read exactly `len` bytes.  0 on success; -ENODATA if the peer closed
 * before sending anything; -ECONNRESET if it closed part-way; else -errno
 * (EAGAIN when a SO_RCVTIMEO expired). */
int nbd_recv_full(int fd, void *buf, size_t len);

/* Read and throw away `len` bytes using a small stack buffer. */
int nbd_recv_discard(int fd, uint64_t len);

#endif
