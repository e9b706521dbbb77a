/* SPDX-License-Identifier: Apache-2.0 */
/* NBD server for one export on one unix socket.
 *
 * Fixed newstyle handshake; NBD_OPT_GO / NBD_OPT_INFO (with
 * NBD_INFO_EXPORT, NBD_INFO_BLOCK_SIZE, NBD_INFO_DESCRIPTION),
 * NBD_OPT_EXPORT_NAME, NBD_OPT_LIST, NBD_OPT_ABORT; unknown options get
 * NBD_REP_ERR_UNSUP.  Simple replies only.  Transmission commands READ,
 * WRITE, FLUSH, TRIM, WRITE_ZEROES (NBD_CMD_FLAG_FUA honoured, NO_HOLE
 * accepted), DISC.  Several connections at once; several requests in
 * flight per connection (a small pool of worker threads per connection).
 */
#ifndef FCACHE_NBD_SERVER_H
#define FCACHE_NBD_SERVER_H

#include "io_ops.h"

struct nbd_server;

/* Create the listening socket at socket_path (unlinking a stale socket
 * first), chmod it to `mode`, and start the accept thread.  `exp` is
 * copied (the strings must outlive the server).  threads_per_conn >= 1.
 * Returns NULL with errno set on failure (and logs why). */
struct nbd_server *nbd_server_start(const char *socket_path, unsigned mode,
                                    const struct fc_export *exp,
                                    unsigned threads_per_conn);

/* A server that listens nowhere: it serves the sockets handed to it by
 * nbd_server_serve_socket, which are in NBD's transmission phase from
 * their first byte.  That is how the kernel's NBD client speaks once
 * netlink's NBD_CMD_CONNECT gave it the other end of a socketpair (no
 * handshake: the kernel was told the size and the transmission flags,
 * which must be nbd_server_tflags(exp)).  Simple replies; the requests
 * are validated and bounded as a listening server's are.  `label` names
 * the server in log lines (e.g. "/dev/nbd3") and is passed to
 * exp->ops->opened.  exp->one_session must be false (the kernel is the
 * only client).  NULL with errno set on failure (logged). */
struct nbd_server *nbd_server_start_connected(const char *label,
                                              const struct fc_export *exp,
                                              unsigned threads_per_conn);

/* Serve fd, a connected stream socket in the transmission phase, on a
 * server of nbd_server_start_connected (or a listening one), with
 * threads_per_conn workers of its own, until the peer disconnects or the
 * server stops.  fd is the server's from the call on, even on failure.
 * 0, or -EINVAL (a one_session export: the kernel has no session to check),
 * -EBUSY (NBD_MAX_CONNS connections already), -ESHUTDOWN (stopping),
 * -ENOMEM, -EAGAIN (no thread).  Not concurrently with nbd_server_stop. */
int nbd_server_serve_socket(struct nbd_server *srv, int fd);

/* The transmission flags (NBD_FLAG_*) a client of exp is told: what the
 * kernel must be given with a socket for nbd_server_serve_socket. */
uint16_t nbd_server_tflags(const struct fc_export *exp);

/* Stop accepting, shut down every connection, wait for in-flight
 * requests to finish and every thread to exit, unlink the socket, free.
 * After this returns no callback of exp->ops runs any more. NULL is a no-op. */
void nbd_server_stop(struct nbd_server *srv);

/* The export grew to size bytes (an online extend): connections made from
 * now on are told the new size, and every connection may address it (a
 * client that connected before knows only its old size, which stays
 * valid).  size must be larger and a multiple of min_block. */
void nbd_server_grow(struct nbd_server *srv, uint64_t size);

/* Number of currently connected clients. */
unsigned nbd_server_connections(struct nbd_server *srv);

#endif
