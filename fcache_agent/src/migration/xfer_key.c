/* SPDX-License-Identifier: Apache-2.0 */
/* A migration's own key pair and certificate; see xfer_key.h for why. */
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xfer_key.h"

struct fc_xfer_key {
  gnutls_privkey_t priv;
  gnutls_pcert_st pcert;
  bool have_pcert;
  char fp[FC_XFER_FP_HEX + 1];
};

static void
hex(const uint8_t *b, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";

  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * n] = '\0';
}

/* The certificate only carries the public key to the peer, which trusts
 * it by its fingerprint alone: no name, no CA, a validity around now wide
 * enough for clocks that disagree by a day. */
static int
self_sign(gnutls_privkey_t priv, gnutls_x509_crt_t crt)
{
  static const char cn[] = "fcache migration";
  gnutls_pubkey_t pub = NULL;
  unsigned char serial[16];
  time_t now = time(NULL);
  int r;

  r = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
  serial[0] &= 0x7f;            /* a positive integer */
  if (r == 0)
    r = gnutls_pubkey_init(&pub);
  if (r == 0)
    r = gnutls_pubkey_import_privkey(pub, priv, 0, 0);
  if (r == 0)
    r = gnutls_x509_crt_set_pubkey(crt, pub);
  if (r == 0)
    r = gnutls_x509_crt_set_version(crt, 3);
  if (r == 0)
    r = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
  if (r == 0)
    r = gnutls_x509_crt_set_activation_time(crt, now - 86400);
  if (r == 0)
    r = gnutls_x509_crt_set_expiration_time(crt, now + 7 * 86400);
  if (r == 0)
    r = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                      sizeof cn - 1);
  if (r == 0)
    r = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
  if (r == 0)
    r = gnutls_x509_crt_privkey_sign(crt, crt, priv, GNUTLS_DIG_SHA256, 0);
  if (pub)
    gnutls_pubkey_deinit(pub);
  return r;
}

int
fc_xfer_key_new(struct fc_xfer_key **out, char *err, size_t errlen)
{
  struct fc_xfer_key *k = calloc(1, sizeof *k);
  gnutls_x509_crt_t crt = NULL;
  gnutls_datum_t der = { NULL, 0 };
  uint8_t digest[FC_XFER_FP_BYTES];
  int r;

  *out = NULL;
  if (!k)
    return -ENOMEM;
  r = gnutls_privkey_init(&k->priv);
  if (r == 0)
    r = gnutls_privkey_generate(k->priv, GNUTLS_PK_ECDSA,
                                GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (r == 0)
    r = gnutls_x509_crt_init(&crt);
  if (r == 0)
    r = self_sign(k->priv, crt);
  if (r == 0)
    r = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_DER, &der);
  if (r == 0)
    r = gnutls_hash_fast(GNUTLS_DIG_SHA256, der.data, der.size, digest);
  if (r == 0)
    r = gnutls_pcert_import_x509(&k->pcert, crt, 0);
  if (r == 0)
    k->have_pcert = true;
  if (crt)
    gnutls_x509_crt_deinit(crt);
  gnutls_free(der.data);
  if (r < 0) {
    snprintf(err, errlen, "cannot make the migration's key pair: %s",
             gnutls_strerror(r));
    fc_xfer_key_free(k);
    return -EIO;
  }
  hex(digest, sizeof digest, k->fp);
  *out = k;
  return 0;
}

void
fc_xfer_key_free(struct fc_xfer_key *k)
{
  if (!k)
    return;
  if (k->have_pcert)
    gnutls_pcert_deinit(&k->pcert);
  if (k->priv)
    gnutls_privkey_deinit(k->priv);
  free(k);
}

const char *
fc_xfer_key_fingerprint(const struct fc_xfer_key *k)
{
  return k->fp;
}

struct gnutls_pcert_st *
fc_xfer_key_pcert(const struct fc_xfer_key *k)
{
  return (struct gnutls_pcert_st *)&k->pcert;
}

struct gnutls_privkey_st *
fc_xfer_key_privkey(const struct fc_xfer_key *k)
{
  return k->priv;
}

int
fc_xfer_fp_parse(const char *s, uint8_t fp[FC_XFER_FP_BYTES])
{
  if (!s || strlen(s) != FC_XFER_FP_HEX)
    return -EINVAL;
  for (size_t i = 0; i < FC_XFER_FP_BYTES; i++) {
    unsigned v = 0;

    for (size_t j = 0; j < 2; j++) {
      char c = s[2 * i + j];

      if (c >= '0' && c <= '9')
        v = v * 16 + (unsigned)(c - '0');
      else if (c >= 'a' && c <= 'f')
        v = v * 16 + (unsigned)(c - 'a' + 10);
      else
        return -EINVAL;
    }
    fp[i] = (uint8_t)v;
  }
  return 0;
}

bool
fc_xfer_fp_matches(const uint8_t fp[FC_XFER_FP_BYTES], const void *der, size_t len)
{
  uint8_t digest[FC_XFER_FP_BYTES];
  unsigned char diff = 0;

  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, der, len, digest))
    return false;
  for (size_t i = 0; i < FC_XFER_FP_BYTES; i++)
    diff |= (unsigned char)(digest[i] ^ fp[i]);
  return diff == 0;
}
