/* TLS 1.3 on the agent-to-agent transfer stream (doc/security.rst).
 *
 * Cache blocks are tenant data and a forged COMPLETE or ACK makes a source
 * forget dirty blocks, so both ends of every stream authenticate each other
 * before the first frame, and every frame is encrypted and authenticated:
 *
 *   psk   (default) a pre-shared key derived from the one-time migration
 *         token both agents were given by the orchestrator, under the
 *         migration id as PSK identity; the token itself never crosses the
 *         network in clear, and only a peer that knows it completes the
 *         handshake.  (EC)DHE on top, so a token that leaks later does not
 *         open a recorded stream.
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

#include "common/config.h"
#include "xfer_conn.h"

#define FC_TLS_PSK_BYTES 32

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

/* Source: the handshake on c's connected socket, all of it within
 * timeout_ms.  host is the destination as it was dialled (checked against
 * its certificate in x509 mode); identity and psk are the migration's.
 * No-op when t is NULL (mode none). */
int fc_xfer_tls_client(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                       const char *host, const char *identity,
                       const uint8_t psk[FC_TLS_PSK_BYTES], unsigned timeout_ms,
                       char *err, size_t errlen);

/* The destination's key for a PSK identity (a migration id): 0, or -ENOENT
 * when no migration may accept a stream under that identity. */
typedef int (*fc_xfer_psk_lookup_fn)(void *ctx, const char *identity,
                                     uint8_t key[FC_TLS_PSK_BYTES]);

/* Destination: the handshake within timeout_ms.  In psk mode, identity
 * receives the PSK identity the peer proved it holds the key of. */
int fc_xfer_tls_server(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                       fc_xfer_psk_lookup_fn lookup, void *ctx,
                       char *identity, size_t idlen, unsigned timeout_ms,
                       char *err, size_t errlen);

#endif
