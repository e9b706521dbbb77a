/* SPDX-License-Identifier: Apache-2.0 */
/* TLS 1.3 on the agent-to-agent transfer stream (doc/admin/security.rst).
 *
 * Cache blocks are tenant data and a forged COMPLETE or ACK makes a source
 * forget dirty blocks, so both ends of every stream authenticate each other
 * before the first frame, and every frame is encrypted and authenticated:
 *
 *   pinned (default) each agent makes a fresh key pair and self-signed
 *         certificate for each migration (xfer_key.h); the orchestrator
 *         hands each agent the SHA-256 fingerprint of its peer's
 *         certificate, and both ends accept only that certificate (mutual
 *         TLS 1.3, ECDHE).  Nothing the orchestrator carries (fingerprints,
 *         token) lets its reader complete a handshake: the private keys
 *         never leave the agents.  The source names the migration in the
 *         server name indication so that the destination can present that
 *         migration's certificate.
 *   psk   a pre-shared key derived from the one-time migration token both
 *         agents were given by the orchestrator, under the migration id as
 *         PSK identity; (EC)DHE on top, so a token that leaks later does
 *         not open a recorded stream.  Weaker: whoever reads the token in
 *         the orchestrator's messages or database before the stream starts
 *         can impersonate either end.
 *   x509  host certificates in the layout libvirt and QEMU use for native
 *         TLS migration (migration_tls_dir, /etc/pki/qemu by default:
 *         ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem,
 *         client-key.pem), both ends verified against ca-cert.pem and the
 *         destination against the host it was reached at; the token still
 *         has to match.
 *   none  plaintext, only when the operator asks for it; the agent warns.
 *
 * Private to migration/. */
#ifndef FCACHE_XFER_TLS_H
#define FCACHE_XFER_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "common/config.h"
#include "xfer_conn.h"
#include "xfer_key.h"

#define FC_TLS_PSK_BYTES 32
/* A settle session's PSK identity: this prefix and the migration id. */
#define FC_XFER_SETTLE_PREFIX "settle:"
#define FC_XFER_IDENTITY_MAX (FC_MIGRATION_ID_MAX + 7)

struct fc_xfer_tls;

/* The agent's TLS setup from its configuration (the x509 files are read
 * here, once).  *out is NULL in mode none. */
int fc_xfer_tls_new(const struct fc_config *cfg, struct fc_xfer_tls **out,
                    char *err, size_t errlen);
void fc_xfer_tls_free(struct fc_xfer_tls *t);
const char *fc_xfer_tls_mode_name(const struct fc_xfer_tls *t);

/* The PSK of migration id under token: HMAC-SHA256 keyed by the token. */
int fc_xfer_tls_psk(const char *token, const char *migration_id,
                    uint8_t key[FC_TLS_PSK_BYTES]);

/* Whether each migration needs its own key pair and its peer's
 * fingerprint (migration_tls = pinned). */
bool fc_xfer_tls_pinned(const struct fc_xfer_tls *t);

/* What one end of a stream proves and what it expects of its peer. */
struct fc_xfer_auth {
  uint8_t psk[FC_TLS_PSK_BYTES];          /* psk: the migration's key */
  bool psk_set;                           /* psk holds a key (never all zero) */
  const struct fc_xfer_key *key;          /* pinned: this end's own */
  uint8_t peer_fp[FC_XFER_FP_BYTES];      /* pinned: the peer's certificate */
};

/* Source: the handshake on c's connected socket, all of it within
 * timeout_ms.  host is the destination as it was dialled (checked against
 * its certificate in x509 mode); identity is the migration id and auth what
 * the migration holds.  No-op when t is NULL (mode none). */
int fc_xfer_tls_client(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                       const char *host, const char *identity,
                       const struct fc_xfer_auth *auth, unsigned timeout_ms,
                       char *err, size_t errlen);

/* A settle session's handshake (migr_settle_peer.c): pinned and psk take
 * a PSK session under identity ("settle:<migration id>") keyed by psk,
 * the secret both agents kept from the migration's own stream, since a
 * restarted agent no longer has its pinned key; x509 uses the host
 * certificates as a migration does (the secret is then checked in the
 * HELLO); none is plaintext. */
int fc_xfer_tls_settle_client(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                              const char *host, const char *identity,
                              const uint8_t psk[FC_TLS_PSK_BYTES],
                              unsigned timeout_ms, char *err, size_t errlen);

/* The destination's view of a migration id (psk, pinned): 0, or -ENOENT
 * when no migration may accept a stream under that id.  auth->key must
 * stay valid until fc_xfer_tls_server returns. */
typedef int (*fc_xfer_auth_lookup_fn)(void *ctx, const char *identity,
                                      struct fc_xfer_auth *auth);

/* Destination: the handshake within timeout_ms.  In psk and pinned mode,
 * identity receives the migration id the peer authenticated for, or
 * "settle:<id>" for a settle session (which pinned mode also accepts as a
 * PSK session, keyed by what lookup returns with psk_set). */
int fc_xfer_tls_server(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                       fc_xfer_auth_lookup_fn lookup, void *ctx,
                       char *identity, size_t idlen, unsigned timeout_ms,
                       char *err, size_t errlen);

#endif
