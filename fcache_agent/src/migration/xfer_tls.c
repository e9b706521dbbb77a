/* TLS 1.3 on the transfer stream; see xfer_tls.h for the modes and why. */
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"
#include "xfer_tls.h"

/* TLS 1.3 only, the library's default cipher suites (AES-GCM and
 * ChaCha20-Poly1305); in psk mode only the key exchanges that add
 * (EC)DHE to the PSK, for forward secrecy. */
#define PRIO_X509 "NORMAL:-VERS-ALL:+VERS-TLS1.3"
#define PRIO_PSK "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+ECDHE-PSK:+DHE-PSK:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"
#define PSK_LABEL "fcache migration stream psk v1:"

struct fc_xfer_tls {
  enum fc_migration_tls mode;
  gnutls_certificate_credentials_t server_cert, client_cert;
  gnutls_psk_server_credentials_t psk_server;
};

struct server_ctx {
  fc_xfer_psk_lookup_fn lookup;
  void *ctx;
};

const char *
fc_xfer_tls_mode_name(const struct fc_xfer_tls *t)
{
  return !t ? "none" : t->mode == FC_TLS_X509 ? "x509" : "psk";
}

int
fc_xfer_tls_psk(const char *token, const char *migration_id,
                uint8_t key[FC_TLS_PSK_BYTES])
{
  char msg[sizeof PSK_LABEL + 128];
  int n = snprintf(msg, sizeof msg, "%s%s", PSK_LABEL, migration_id);

  if (n < 0 || (size_t)n >= sizeof msg)
    return -EINVAL;
  return gnutls_hmac_fast(GNUTLS_MAC_SHA256, token, strlen(token), msg, (size_t)n,
                          key) ? -EIO : 0;
}

/* The server's PSK callback: the key of the migration named by the
 * identity, or a failed handshake. */
static int
psk_server_key(gnutls_session_t session, const gnutls_datum_t *username,
               gnutls_datum_t *key)
{
  struct server_ctx *sc = gnutls_session_get_ptr(session);
  char identity[FC_MIGRATION_ID_MAX + 1];

  if (!sc || username->size == 0 || username->size > FC_MIGRATION_ID_MAX ||
      memchr(username->data, '\0', username->size))
    return -1;
  memcpy(identity, username->data, username->size);
  identity[username->size] = '\0';
  key->data = gnutls_malloc(FC_TLS_PSK_BYTES);
  if (!key->data)
    return -1;
  key->size = FC_TLS_PSK_BYTES;
  if (sc->lookup(sc->ctx, identity, key->data)) {
    gnutls_free(key->data);
    key->data = NULL;
    key->size = 0;
    return -1;
  }
  return 0;
}

static int
load_cert(const char *dir, const char *role, gnutls_certificate_credentials_t *out,
          char *err, size_t errlen)
{
  char ca[FC_PATH_MAX + 32], cert[FC_PATH_MAX + 32], keyf[FC_PATH_MAX + 32];
  int r;

  snprintf(ca, sizeof ca, "%s/ca-cert.pem", dir);
  snprintf(cert, sizeof cert, "%s/%s-cert.pem", dir, role);
  snprintf(keyf, sizeof keyf, "%s/%s-key.pem", dir, role);
  r = gnutls_certificate_allocate_credentials(out);
  if (r < 0)
    goto fail;
  r = gnutls_certificate_set_x509_trust_file(*out, ca, GNUTLS_X509_FMT_PEM);
  if (r <= 0) {
    snprintf(err, errlen, "migration_tls = x509: no CA certificate in %s: %s", ca,
             r < 0 ? gnutls_strerror(r) : "empty file");
    gnutls_certificate_free_credentials(*out);
    *out = NULL;
    return -EINVAL;
  }
  r = gnutls_certificate_set_x509_key_file(*out, cert, keyf, GNUTLS_X509_FMT_PEM);
  if (r < 0) {
    snprintf(err, errlen, "migration_tls = x509: cannot load %s with %s: %s", cert,
             keyf, gnutls_strerror(r));
    gnutls_certificate_free_credentials(*out);
    *out = NULL;
    return -EINVAL;
  }
  return 0;
fail:
  snprintf(err, errlen, "cannot set up TLS credentials: %s", gnutls_strerror(r));
  return -ENOMEM;
}

int
fc_xfer_tls_new(const struct fc_config *cfg, struct fc_xfer_tls **out,
                char *err, size_t errlen)
{
  struct fc_xfer_tls *t;
  int r;

  *out = NULL;
  if (cfg->migration_tls == FC_TLS_NONE) {
    log_warning("migration_tls = none: cache blocks, tokens and migration "
                "control frames cross the network IN CLEAR and anyone on the "
                "path can read or forge them; use psk or x509");
    return 0;
  }
  t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->mode = cfg->migration_tls;
  if (t->mode == FC_TLS_X509) {
    r = load_cert(cfg->migration_tls_dir, "server", &t->server_cert, err, errlen);
    if (!r)
      r = load_cert(cfg->migration_tls_dir, "client", &t->client_cert, err, errlen);
    if (r)
      goto out;
  } else {
    r = gnutls_psk_allocate_server_credentials(&t->psk_server);
    if (r < 0) {
      snprintf(err, errlen, "cannot set up TLS PSK credentials: %s",
               gnutls_strerror(r));
      r = -ENOMEM;
      goto out;
    }
    gnutls_psk_set_server_credentials_function2(t->psk_server, psk_server_key);
  }
  *out = t;
  return 0;
out:
  fc_xfer_tls_free(t);
  return r;
}

void
fc_xfer_tls_free(struct fc_xfer_tls *t)
{
  if (!t)
    return;
  if (t->server_cert)
    gnutls_certificate_free_credentials(t->server_cert);
  if (t->client_cert)
    gnutls_certificate_free_credentials(t->client_cert);
  if (t->psk_server)
    gnutls_psk_free_server_credentials(t->psk_server);
  free(t);
}

/* Run the handshake to its end or its deadline.  Why it failed, for the
 * operator: a certificate that does not verify says so. */
static int
handshake(gnutls_session_t s, unsigned timeout_ms, const char *who, char *err,
          size_t errlen)
{
  int r;

  gnutls_handshake_set_timeout(s, timeout_ms);
  do {
    r = gnutls_handshake(s);
  } while (r < 0 && !gnutls_error_is_fatal(r));
  if (r == 0)
    return 0;
  if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
    gnutls_datum_t why = { NULL, 0 };
    unsigned status = gnutls_session_get_verify_cert_status(s);

    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0);
    snprintf(err, errlen, "TLS handshake with %s: its certificate is not "
             "trusted: %s", who, why.data ? (char *)why.data : "?");
    gnutls_free(why.data);
    return -EACCES;
  }
  snprintf(err, errlen, "TLS handshake with %s failed: %s", who, gnutls_strerror(r));
  return r == GNUTLS_E_TIMEDOUT ? -ETIMEDOUT :
         r == GNUTLS_E_PREMATURE_TERMINATION || r == GNUTLS_E_PUSH_ERROR ||
         r == GNUTLS_E_PULL_ERROR ? -ECONNRESET : -EACCES;
}

/* A session on c's socket with this role's credentials. */
static int
session_new(const struct fc_xfer_tls *t, struct fc_xfer_conn *c, unsigned flags,
            char *err, size_t errlen)
{
  gnutls_session_t s;
  int r;

  /* No session tickets: a stream is never resumed, and a ticket would be
   * a second thing the receiving thread might write. */
  r = gnutls_init(&s, flags | GNUTLS_NO_TICKETS);
  if (r < 0) {
    snprintf(err, errlen, "cannot start a TLS session: %s", gnutls_strerror(r));
    return -ENOMEM;
  }
  r = gnutls_priority_set_direct(s, t->mode == FC_TLS_X509 ? PRIO_X509 : PRIO_PSK,
                                 NULL);
  if (r < 0) {
    snprintf(err, errlen, "TLS priorities refused by this GnuTLS: %s",
             gnutls_strerror(r));
    gnutls_deinit(s);
    return -ENOTSUP;
  }
  gnutls_transport_set_int(s, c->fd);
  c->tls = s;
  return 0;
}

int
fc_xfer_tls_client(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                   const char *host, const char *identity,
                   const uint8_t psk[FC_TLS_PSK_BYTES], unsigned timeout_ms,
                   char *err, size_t errlen)
{
  gnutls_psk_client_credentials_t pc = NULL;
  int r;

  if (!t)
    return 0;
  r = session_new(t, c, GNUTLS_CLIENT, err, errlen);
  if (r)
    return r;
  if (t->mode == FC_TLS_X509) {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->client_cert);
    /* The destination must hold a certificate for the name (or address)
     * the source dialled, as libvirt checks for its own migrations. */
    gnutls_session_set_verify_cert(c->tls, host, 0);
    if (r == 0 && strspn(host, "0123456789.:") != strlen(host))
      r = gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, host, strlen(host));
  } else {
    gnutls_datum_t key = { (unsigned char *)psk, FC_TLS_PSK_BYTES };

    r = gnutls_psk_allocate_client_credentials(&pc);
    if (r == 0)
      r = gnutls_psk_set_client_credentials(pc, identity, &key, GNUTLS_PSK_KEY_RAW);
    if (r == 0)
      r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, pc);
    c->tls_psk = pc;
  }
  if (r < 0) {
    snprintf(err, errlen, "cannot set TLS credentials: %s", gnutls_strerror(r));
    return -EINVAL;
  }
  return handshake(c->tls, timeout_ms, host, err, errlen);
}

int
fc_xfer_tls_server(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                   fc_xfer_psk_lookup_fn lookup, void *ctx,
                   char *identity, size_t idlen, unsigned timeout_ms,
                   char *err, size_t errlen)
{
  struct server_ctx sc = { lookup, ctx };
  int r;

  if (idlen)
    identity[0] = '\0';
  if (!t)
    return 0;
  r = session_new(t, c, GNUTLS_SERVER, err, errlen);
  if (r)
    return r;
  if (t->mode == FC_TLS_X509) {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->server_cert);
    gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUIRE);
    /* The source's chain against the CA; no name to check it against. */
    gnutls_session_set_verify_cert(c->tls, NULL, 0);
  } else {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, t->psk_server);
    gnutls_session_set_ptr(c->tls, &sc);
  }
  if (r < 0) {
    snprintf(err, errlen, "cannot set TLS credentials: %s", gnutls_strerror(r));
    return -EINVAL;
  }
  r = handshake(c->tls, timeout_ms, "the source", err, errlen);
  /* sc lives on this stack frame only. */
  gnutls_session_set_ptr(c->tls, NULL);
  if (r == 0 && t->mode == FC_TLS_PSK && idlen) {
    const char *who = gnutls_psk_server_get_username(c->tls);
    snprintf(identity, idlen, "%s", who ? who : "");
  }
  return r;
}
