/* SPDX-License-Identifier: Apache-2.0 */
/* A framed transfer stream over a connected TCP socket.  Sends are
 * serialised by a lock (several threads send on the destination side);
 * receives are done by one thread. */
#ifndef FCACHE_XFER_CONN_H
#define FCACHE_XFER_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "xfer_frame.h"

struct gnutls_session_int;
struct gnutls_psk_client_credentials_st;

struct fc_xfer_conn {
  int fd;
  /* The TLS session once xfer_tls.c's handshake is done (NULL: plaintext,
   * migration_tls = none).  One thread sends (under send_lock) while one
   * receives, which GnuTLS allows on one session. */
  struct gnutls_session_int *tls;
  struct gnutls_psk_client_credentials_st *tls_psk;
  /* TLS records read ahead from the socket (fc_xfer_conn_read_ahead). */
  struct fc_xfer_readahead *ra;
  pthread_mutex_t send_lock;
  uint64_t bytes_sent, bytes_received;
};

void fc_xfer_conn_init(struct fc_xfer_conn *c, int fd);
/* Once the TLS handshake is done and before a second thread uses the
 * stream: GnuTLS reads each record with two recv calls (its header, then
 * its body), 128 system calls per MiB; read the socket ahead in large
 * chunks instead.  No-op without TLS. */
int fc_xfer_conn_read_ahead(struct fc_xfer_conn *c);
/* Hand an established stream (socket and TLS session) from one owner to
 * another: src is left empty. */
void fc_xfer_conn_move(struct fc_xfer_conn *dst, struct fc_xfer_conn *src);
/* shutdown() the socket so a blocked receiver returns; fd closed by
 * fc_xfer_conn_destroy. */
void fc_xfer_conn_shutdown(struct fc_xfer_conn *c);
void fc_xfer_conn_destroy(struct fc_xfer_conn *c);

/* Send one frame whose payload is p1 followed by p2 (either may be empty). */
int fc_xfer_send(struct fc_xfer_conn *c, uint8_t type, uint16_t flags,
                 const void *p1, uint32_t l1, const void *p2, uint32_t l2);
int fc_xfer_send_json(struct fc_xfer_conn *c, uint8_t type, const char *json);
/* Receive one frame into buf (cap bytes; FC_XFER_MAX_PAYLOAD is always
 * enough).  -ECONNRESET on EOF, -EPROTO/-EMSGSIZE/-EBADMSG on a bad frame. */
int fc_xfer_recv(struct fc_xfer_conn *c, struct fc_xfer_header *h,
                 uint8_t *buf, uint32_t cap);

/* The same, the whole frame within timeout_ms (-ETIMEDOUT): for a peer
 * not yet authenticated. */
int fc_xfer_recv_by(struct fc_xfer_conn *c, struct fc_xfer_header *h,
                    uint8_t *buf, uint32_t cap, unsigned timeout_ms);

/* Connect to "host:port" with a timeout. */
int fc_xfer_connect(const char *hostport, int timeout_ms, int *fd_out,
                    char *err, size_t errlen);
/* Split "host:port". */
int fc_split_hostport(const char *hostport, char *host, size_t hostlen,
                      char *port, size_t portlen);

#endif
