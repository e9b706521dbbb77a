/* SPDX-License-Identifier: Apache-2.0 */
/* TLS 1.3 on the transfer stream; see xfer_tls.h for the modes and why. */
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/abstract.h>

#include "common/log.h"
#include "engine/engine.h"
#include "xfer_tls.h"

/* TLS 1.3 only, the library's default cipher suites (AES-GCM and
 * ChaCha20-Poly1305); in psk mode only the key exchanges that add
 * (EC)DHE to the PSK, for forward secrecy. */
#define PRIO_X509 "NORMAL:-VERS-ALL:+VERS-TLS1.3"
#define PRIO_PSK "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+ECDHE-PSK:+DHE-PSK:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"
/* pinned: TLS 1.3's certificate handshake, whose key exchange is always
 * ephemeral; only elliptic-curve groups, and AES-GCM first as for psk. */
#define PRIO_PINNED "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1"
/* A pinned listener also takes settle sessions, which are PSK ones. */
#define PRIO_PINNED_SERVER PRIO_PINNED ":+ECDHE-PSK:+DHE-PSK"
#define PSK_LABEL "fcache migration stream psk v1:"

struct fc_xfer_tls {
  enum fc_migration_tls mode;
  gnutls_certificate_credentials_t server_cert, client_cert;
  gnutls_psk_server_credentials_t psk_server;
  /* pinned: both roles; each session's own key and pin come from its
   * struct session_ctx. */
  gnutls_certificate_credentials_t pinned;
};

/* What a session proves and expects, for its callbacks (session ptr). */
struct session_ctx {
  fc_xfer_auth_lookup_fn lookup;   /* server: by identity */
  void *ctx;
  struct fc_xfer_auth auth;
  bool have_auth;
  bool pin_mismatch;
  char identity[FC_XFER_IDENTITY_MAX + 1];
};

const char *
fc_xfer_tls_mode_name(const struct fc_xfer_tls *t)
{
  return !t ? "none" : t->mode == FC_TLS_X509 ? "x509" :
         t->mode == FC_TLS_PINNED ? "pinned" : "psk";
}

bool
fc_xfer_tls_pinned(const struct fc_xfer_tls *t)
{
  return t && t->mode == FC_TLS_PINNED;
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

/* Ask the listener what the migration named by identity expects, once. */
static int
session_lookup(struct session_ctx *sc, const char *identity)
{
  if (sc->have_auth)
    return strcmp(sc->identity, identity) ? -EPROTO : 0;
  if (!sc->lookup || sc->lookup(sc->ctx, identity, &sc->auth))
    return -ENOENT;
  snprintf(sc->identity, sizeof sc->identity, "%s", identity);
  sc->have_auth = true;
  return 0;
}

/* The server's PSK callback: the key of the migration named by the
 * identity, or a failed handshake. */
static int
psk_server_key(gnutls_session_t session, const gnutls_datum_t *username,
               gnutls_datum_t *key)
{
  struct session_ctx *sc = gnutls_session_get_ptr(session);
  char identity[FC_XFER_IDENTITY_MAX + 1];

  if (!sc || username->size == 0 || username->size > FC_XFER_IDENTITY_MAX ||
      memchr(username->data, '\0', username->size))
    return -1;
  memcpy(identity, username->data, username->size);
  identity[username->size] = '\0';
  /* A pinned migration's lookup holds no PSK: only a settle session's may
   * key a PSK handshake. */
  if (session_lookup(sc, identity) || !sc->auth.psk_set)
    return -1;
  key->data = gnutls_malloc(FC_TLS_PSK_BYTES);
  if (!key->data)
    return -1;
  key->size = FC_TLS_PSK_BYTES;
  memcpy(key->data, sc->auth.psk, FC_TLS_PSK_BYTES);
  return 0;
}

/* pinned: the source names the migration in the server name indication,
 * hex in DNS labels (a migration id may hold '_', which a DNS name may
 * not), so that the destination can present that migration's
 * certificate.  The id is no secret: psk sends it in clear as well. */
#define SNI_LABEL 62

static int
sni_encode(const char *id, char *out, size_t outlen)
{
  static const char digits[] = "0123456789abcdef";
  size_t o = 0, n = strlen(id);

  for (size_t i = 0; i < n; i++) {
    if (i && (2 * i) % SNI_LABEL == 0) {
      if (o + 1 >= outlen)
        return -EINVAL;
      out[o++] = '.';
    }
    if (o + 2 >= outlen)
      return -EINVAL;
    out[o++] = digits[(unsigned char)id[i] >> 4];
    out[o++] = digits[(unsigned char)id[i] & 15];
  }
  out[o] = '\0';
  return 0;
}

static int
sni_decode(const char *s, size_t len, char *id, size_t idlen)
{
  size_t o = 0;
  int half = -1;

  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    int v;

    if (c == '.')
      continue;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else
      return -EINVAL;
    if (half < 0) {
      half = v;
      continue;
    }
    if (o + 1 >= idlen || (half == 0 && v == 0))
      return -EINVAL;
    id[o++] = (char)(half * 16 + v);
    half = -1;
  }
  if (half >= 0 || o == 0)
    return -EINVAL;
  id[o] = '\0';
  return 0;
}

/* pinned: the certificate this end presents, its migration's own. */
static int
pinned_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn,
                int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                int pk_algos_length, gnutls_pcert_st **pcert,
                unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
  struct session_ctx *sc = gnutls_session_get_ptr(session);
  char name[256], identity[FC_MIGRATION_ID_MAX + 1];
  size_t len = sizeof name - 1;
  unsigned type;

  (void)req_ca_rdn;
  (void)nreqs;
  (void)pk_algos;
  (void)pk_algos_length;
  if (!sc)
    return -1;
  if (!sc->have_auth) {
    /* The destination: which migration the source asks for. */
    if (gnutls_server_name_get(session, name, &len, &type, 0) < 0 ||
        type != GNUTLS_NAME_DNS ||
        sni_decode(name, len, identity, sizeof identity) ||
        session_lookup(sc, identity))
      return -1;
  }
  if (!sc->auth.key)
    return -1;
  *pcert = fc_xfer_key_pcert(sc->auth.key);
  *pcert_length = 1;
  *privkey = fc_xfer_key_privkey(sc->auth.key);
  return 0;
}

/* pinned: the peer's certificate must be the one whose fingerprint this
 * migration was given.  Its signature over the handshake (CertificateVerify)
 * proves the peer holds the private key; GnuTLS checks that itself. */
static int
pinned_verify(gnutls_session_t session)
{
  struct session_ctx *sc = gnutls_session_get_ptr(session);
  const gnutls_datum_t *peers;
  unsigned n = 0;

  if (!sc || !sc->have_auth)
    return -1;
  peers = gnutls_certificate_get_peers(session, &n);
  if (!peers || n < 1 ||
      gnutls_certificate_type_get2(session, GNUTLS_CTYPE_PEERS) != GNUTLS_CRT_X509 ||
      !fc_xfer_fp_matches(sc->auth.peer_fp, peers[0].data, peers[0].size)) {
    sc->pin_mismatch = true;
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
                "path can read or forge them; use pinned (the default) or "
                "x509");
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
  } else if (t->mode == FC_TLS_PINNED) {
    r = gnutls_certificate_allocate_credentials(&t->pinned);
    if (r < 0) {
      snprintf(err, errlen, "cannot set up TLS credentials: %s", gnutls_strerror(r));
      r = -ENOMEM;
      goto out;
    }
    gnutls_certificate_set_retrieve_function2(t->pinned, pinned_retrieve);
  } else {
    log_warning("migration_tls = psk: a reader of the orchestrator's messages "
                "or database (the migration's token) can impersonate either "
                "agent; pinned, the default, does not depend on them");
  }
  /* psk: every stream; pinned: settle sessions, since a restarted agent
   * has no pinned key any more. */
  if (t->mode != FC_TLS_X509) {
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
  if (t->pinned)
    gnutls_certificate_free_credentials(t->pinned);
  free(t);
}

/* Run the handshake to its end or its deadline.  Why it failed, for the
 * operator: a certificate that does not verify says so. */
static int
handshake(gnutls_session_t s, unsigned timeout_ms, const char *who, char *err,
          size_t errlen)
{
  struct session_ctx *sc = gnutls_session_get_ptr(s);
  int r;

  gnutls_handshake_set_timeout(s, timeout_ms);
  do {
    r = gnutls_handshake(s);
  } while (r < 0 && !gnutls_error_is_fatal(r));
  /* Checked again once done: a verify callback GnuTLS did not call must
   * not let an unpinned peer in. */
  if (r == 0 && sc && sc->auth.key && pinned_verify(s))
    r = GNUTLS_E_CERTIFICATE_ERROR;
  if (r == 0)
    return 0;
  if (sc && sc->pin_mismatch) {
    snprintf(err, errlen, "TLS handshake with %s: its certificate is not the "
             "one pinned for this migration", who);
    return -EACCES;
  }
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
            const char *prio, char *err, size_t errlen)
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
  if (!prio)
    prio = t->mode == FC_TLS_X509 ? PRIO_X509 :
           t->mode == FC_TLS_PINNED ? PRIO_PINNED : PRIO_PSK;
  r = gnutls_priority_set_direct(s, prio, NULL);
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
                   const struct fc_xfer_auth *auth, unsigned timeout_ms,
                   char *err, size_t errlen)
{
  gnutls_psk_client_credentials_t pc = NULL;
  struct session_ctx sc = { .have_auth = true };
  char sni[256];
  int r;

  if (!t)
    return 0;
  r = session_new(t, c, GNUTLS_CLIENT, NULL, err, errlen);
  if (r)
    return r;
  if (t->mode == FC_TLS_X509) {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->client_cert);
    /* The destination must hold a certificate for the name (or address)
     * the source dialled, as libvirt checks for its own migrations. */
    gnutls_session_set_verify_cert(c->tls, host, 0);
    if (r == 0 && strspn(host, "0123456789.:") != strlen(host))
      r = gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, host, strlen(host));
  } else if (t->mode == FC_TLS_PINNED) {
    sc.auth = *auth;
    snprintf(sc.identity, sizeof sc.identity, "%s", identity);
    r = auth->key ? sni_encode(identity, sni, sizeof sni) : -EINVAL;
    if (r) {
      snprintf(err, errlen, "no key or no valid migration id for the stream to %s",
               host);
      return -EINVAL;
    }
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->pinned);
    if (r == 0)
      r = gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, sni, strlen(sni));
    gnutls_session_set_verify_function(c->tls, pinned_verify);
    gnutls_session_set_ptr(c->tls, &sc);
  } else {
    gnutls_datum_t key = { (unsigned char *)auth->psk, FC_TLS_PSK_BYTES };

    r = gnutls_psk_allocate_client_credentials(&pc);
    if (r == 0)
      r = gnutls_psk_set_client_credentials(pc, identity, &key, GNUTLS_PSK_KEY_RAW);
    if (r == 0)
      r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, pc);
    c->tls_psk = pc;
  }
  if (r < 0) {
    gnutls_session_set_ptr(c->tls, NULL);
    snprintf(err, errlen, "cannot set TLS credentials: %s", gnutls_strerror(r));
    return -EINVAL;
  }
  r = handshake(c->tls, timeout_ms, host, err, errlen);
  /* sc lives on this stack frame only. */
  gnutls_session_set_ptr(c->tls, NULL);
  return r;
}

int
fc_xfer_tls_server(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                   fc_xfer_auth_lookup_fn lookup, void *ctx,
                   char *identity, size_t idlen, unsigned timeout_ms,
                   char *err, size_t errlen)
{
  struct session_ctx sc = { .lookup = lookup, .ctx = ctx };
  int r;

  if (idlen)
    identity[0] = '\0';
  if (!t)
    return 0;
  r = session_new(t, c, GNUTLS_SERVER,
                  t->mode == FC_TLS_PINNED ? PRIO_PINNED_SERVER : NULL, err, errlen);
  if (r)
    return r;
  if (t->mode == FC_TLS_X509) {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->server_cert);
    gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUIRE);
    /* The source's chain against the CA; no name to check it against. */
    gnutls_session_set_verify_cert(c->tls, NULL, 0);
  } else if (t->mode == FC_TLS_PINNED) {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, t->pinned);
    if (r == 0)
      r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, t->psk_server);
    gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(c->tls, pinned_verify);
    gnutls_session_set_ptr(c->tls, &sc);
  } else {
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, t->psk_server);
    gnutls_session_set_ptr(c->tls, &sc);
  }
  if (r < 0) {
    gnutls_session_set_ptr(c->tls, NULL);
    snprintf(err, errlen, "cannot set TLS credentials: %s", gnutls_strerror(r));
    return -EINVAL;
  }
  r = handshake(c->tls, timeout_ms, "the source", err, errlen);
  gnutls_session_set_ptr(c->tls, NULL);
  if (r == 0 && t->mode != FC_TLS_X509 && idlen)
    snprintf(identity, idlen, "%s", sc.have_auth ? sc.identity : "");
  explicit_bzero(&sc.auth, sizeof sc.auth);
  if (r == 0 && t->mode != FC_TLS_X509 && !sc.have_auth) {
    snprintf(err, errlen, "TLS handshake with the source named no migration");
    return -EACCES;
  }
  return r;
}

int
fc_xfer_tls_settle_client(const struct fc_xfer_tls *t, struct fc_xfer_conn *c,
                          const char *host, const char *identity,
                          const uint8_t psk[FC_TLS_PSK_BYTES],
                          unsigned timeout_ms, char *err, size_t errlen)
{
  gnutls_psk_client_credentials_t pc = NULL;
  gnutls_datum_t key = { (unsigned char *)psk, FC_TLS_PSK_BYTES };
  int r;

  if (!t || t->mode == FC_TLS_X509)
    return fc_xfer_tls_client(t, c, host, identity, NULL, timeout_ms, err, errlen);
  r = session_new(t, c, GNUTLS_CLIENT, PRIO_PSK, err, errlen);
  if (r)
    return r;
  r = gnutls_psk_allocate_client_credentials(&pc);
  if (r == 0)
    r = gnutls_psk_set_client_credentials(pc, identity, &key, GNUTLS_PSK_KEY_RAW);
  if (r == 0)
    r = gnutls_credentials_set(c->tls, GNUTLS_CRD_PSK, pc);
  c->tls_psk = pc;
  if (r < 0) {
    snprintf(err, errlen, "cannot set TLS credentials: %s", gnutls_strerror(r));
    return -EINVAL;
  }
  return handshake(c->tls, timeout_ms, host, err, errlen);
}
