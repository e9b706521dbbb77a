/* SPDX-License-Identifier: Apache-2.0 */
/* The migration listener's TLS path, up to the first record: what anyone
 * who can reach migration_listen sends first, read by fc_xfer_tls_server()
 * (migration/xfer_tls.c) with the agent's real TLS setup, fc_xfer_tls_new()
 * from a default configuration: migration_tls = pinned, the default, with
 * one incoming migration "m-1" whose key pair (xfer_key.c) is made once
 * here and whose peer fingerprint no input can match.  The input is the
 * source's side of the connection, then EOF; the handshake is bounded by
 * the listener's deadline (5 s, HELLO_TIMEOUT_S in migr_listen.c), which
 * the EOF makes moot.
 *
 * What it reaches: GnuTLS's record layer and ClientHello parsing (not the
 * agent's code, but run with the agent's priorities and credentials), the
 * agent's certificate callback for the destination (pinned_retrieve: the
 * server name's hex decoding, sni_decode, and the migration lookup), the
 * server's first flight, and every early end of the handshake and the
 * agent's reporting of it.  What it cannot reach: anything after the
 * client's Finished.  The client's second flight is encrypted under keys
 * from an ECDHE exchange with the server's fresh share, which no fixed
 * input can know, so random bytes never pass record decryption; the pin
 * check (pinned_verify), a completed handshake and the HELLO frame behind
 * it are the functional tests' (test_migration_tls.py) and, in plaintext,
 * fuzz_hello's.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "common/config.h"
#include "migration/xfer_conn.h"
#include "migration/xfer_key.h"
#include "migration/xfer_tls.h"

/* As migr_listen.c's HELLO_TIMEOUT_S. */
#define HANDSHAKE_MS 5000

static struct fc_xfer_tls *tls;
static struct fc_xfer_key *key;

/* The destination's view: one migration, m-1, with its key pair and a
 * peer fingerprint of zeroes (no certificate hashes to it). */
static int lookup(void *ctx, const char *identity, struct fc_xfer_auth *auth)
{
  if (strcmp(identity, "m-1") != 0)
    return -ENOENT;
  memset(auth, 0, sizeof *auth);
  auth->key = key;
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct fc_config cfg;
  char err[512];

  fuzz_setup();
  fc_config_defaults(&cfg);
  if (cfg.migration_tls != FC_TLS_PINNED ||
      fc_xfer_tls_new(&cfg, &tls, err, sizeof err) ||
      !fc_xfer_tls_pinned(tls) || fc_xfer_key_new(&key, err, sizeof err)) {
    fprintf(stderr, "fuzz: TLS setup: %s\n", err);
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char identity[128], err[1024];
  struct fc_xfer_conn c;
  int peer, r;

  fc_xfer_conn_init(&c, fuzz_socket(data, size, &peer));
  r = fc_xfer_tls_server(tls, &c, lookup, NULL, identity, sizeof identity,
                         HANDSHAKE_MS, err, sizeof err);
  /* No input can complete the handshake (see above): one that did would
   * have broken the pin. */
  if (r == 0 || r > 0 || !err[0])
    abort();
  fc_xfer_conn_destroy(&c);
  close(peer);
  return 0;
}
