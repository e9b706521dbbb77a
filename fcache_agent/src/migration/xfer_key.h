/* SPDX-License-Identifier: Apache-2.0 */
/* A migration's own key pair and self-signed certificate (migration_tls =
 * pinned, xfer_tls.h).
 *
 * Each agent makes a fresh ECDSA P-256 key for each migration; only the
 * SHA-256 fingerprint of its certificate leaves the agent (on the control
 * socket, to the orchestrator, which hands it to the peer agent to pin).
 * The private key lives in this process's memory only: never written to
 * disk, logged or sent.
 *
 * Private to migration/. */
#ifndef FCACHE_XFER_KEY_H
#define FCACHE_XFER_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_XFER_FP_BYTES 32
#define FC_XFER_FP_HEX (2 * FC_XFER_FP_BYTES)

struct fc_xfer_key;
struct gnutls_pcert_st;
struct gnutls_privkey_st;

int fc_xfer_key_new(struct fc_xfer_key **out, char *err, size_t errlen);
void fc_xfer_key_free(struct fc_xfer_key *k);
/* Lowercase hex of the SHA-256 of the certificate's DER. */
const char *fc_xfer_key_fingerprint(const struct fc_xfer_key *k);
/* What a TLS session presents (owned by k). */
struct gnutls_pcert_st *fc_xfer_key_pcert(const struct fc_xfer_key *k);
struct gnutls_privkey_st *fc_xfer_key_privkey(const struct fc_xfer_key *k);

/* A fingerprint as the orchestrator passes it: 64 hex digits; 0 or
 * -EINVAL. */
int fc_xfer_fp_parse(const char *hex, uint8_t fp[FC_XFER_FP_BYTES]);
/* Whether der's SHA-256 is fp, in constant time. */
bool fc_xfer_fp_matches(const uint8_t fp[FC_XFER_FP_BYTES], const void *der,
                        size_t len);

#endif
