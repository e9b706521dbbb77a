/* SPDX-License-Identifier: Apache-2.0 */
/* migration_tls = pinned over a socketpair: per-migration certificates,
 * each end accepting only the one it pinned, the migration id carried in
 * the server name (any id the agent accepts, '_' and 64 characters
 * included), and the fingerprints the orchestrator passes. */
#include <errno.h>
#include <gnutls/abstract.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "common/config.h"
#include "migration/xfer_conn.h"
#include "migration/xfer_key.h"
#include "migration/xfer_tls.h"

#define LONG_ID "m_0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWX"

struct server {
  const struct fc_xfer_tls *t;
  struct fc_xfer_conn c;
  const char *expect_id;
  struct fc_xfer_auth auth;
  char identity[80];
  char err[512];
  int r;
};

static int
lookup(void *ctx, const char *identity, struct fc_xfer_auth *auth)
{
  struct server *s = ctx;

  if (strcmp(identity, s->expect_id))
    return -ENOENT;
  *auth = s->auth;
  return 0;
}

static void *
serve(void *arg)
{
  struct server *s = arg;

  s->r = fc_xfer_tls_server(s->t, &s->c, lookup, s, s->identity, sizeof s->identity,
                            5000, s->err, sizeof s->err);
  /* A refused client may think its handshake done (TLS 1.3): let it see
   * the stream end. */
  if (s->r)
    shutdown(s->c.fd, SHUT_RDWR);
  return NULL;
}

static void
pin(uint8_t fp[FC_XFER_FP_BYTES], const struct fc_xfer_key *k)
{
  assert_int_equal(fc_xfer_fp_parse(fc_xfer_key_fingerprint(k), fp), 0);
}

/* One handshake: the client (source) holds src and pins *dst_pin, the
 * server (destination) holds dst and pins *src_pin, for migration id. */
static void
handshake(const char *id, const char *server_id, const struct fc_xfer_key *src,
          const struct fc_xfer_key *dst, const struct fc_xfer_key *src_pin,
          const struct fc_xfer_key *dst_pin, int *client_r, char *client_err,
          struct server *s)
{
  struct fc_config cfg;
  struct fc_xfer_tls *t;
  struct fc_xfer_auth auth = { .key = src };
  struct fc_xfer_conn c;
  pthread_t th;
  char err[256];
  int sv[2];

  fc_config_defaults(&cfg);
  assert_int_equal(cfg.migration_tls, FC_TLS_PINNED);
  assert_int_equal(fc_xfer_tls_new(&cfg, &t, err, sizeof err), 0);
  assert_true(fc_xfer_tls_pinned(t));
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  memset(s, 0, sizeof *s);
  s->t = t;
  s->expect_id = server_id;
  s->auth.key = dst;
  pin(s->auth.peer_fp, src_pin);
  pin(auth.peer_fp, dst_pin);
  fc_xfer_conn_init(&s->c, sv[1]);
  fc_xfer_conn_init(&c, sv[0]);
  assert_int_equal(pthread_create(&th, NULL, serve, s), 0);
  *client_r = fc_xfer_tls_client(t, &c, "127.0.0.1", id, &auth, 5000, client_err, 512);
  if (*client_r)
    shutdown(c.fd, SHUT_RDWR);
  pthread_join(th, NULL);
  fc_xfer_conn_destroy(&c);
  fc_xfer_conn_destroy(&s->c);
  fc_xfer_tls_free(t);
}

/* Three fresh keys for each test: the source's, the destination's and
 * someone else's. */
struct keys {
  struct fc_xfer_key *src, *dst, *other;
};

static int
make_keys(void **state)
{
  static struct keys k;
  char err[256];

  if (fc_xfer_key_new(&k.src, err, sizeof err) ||
      fc_xfer_key_new(&k.dst, err, sizeof err) ||
      fc_xfer_key_new(&k.other, err, sizeof err))
    return -1;
  *state = &k;
  return 0;
}

static int
free_keys(void **state)
{
  struct keys *k = *state;

  fc_xfer_key_free(k->src);
  fc_xfer_key_free(k->dst);
  fc_xfer_key_free(k->other);
  memset(k, 0, sizeof *k);
  return 0;
}

static void test_fingerprint_is_the_certificate_s(void **state)
{
  struct keys *k = *state;
  uint8_t fp[FC_XFER_FP_BYTES];
  gnutls_pcert_st *pc;

  assert_int_equal(strlen(fc_xfer_key_fingerprint(k->src)), FC_XFER_FP_HEX);
  assert_string_not_equal(fc_xfer_key_fingerprint(k->src),
                          fc_xfer_key_fingerprint(k->dst));
  pin(fp, k->src);
  pc = fc_xfer_key_pcert(k->src);
  assert_true(fc_xfer_fp_matches(fp, pc->cert.data, pc->cert.size));
  pc = fc_xfer_key_pcert(k->dst);
  assert_false(fc_xfer_fp_matches(fp, pc->cert.data, pc->cert.size));
}

static void test_fingerprint_syntax(void **state)
{
  uint8_t fp[FC_XFER_FP_BYTES];
  char good[FC_XFER_FP_HEX + 2];

  (void)state;
  memset(good, 'a', FC_XFER_FP_HEX);
  good[FC_XFER_FP_HEX] = '\0';
  assert_int_equal(fc_xfer_fp_parse(good, fp), 0);
  assert_int_equal(fp[0], 0xaa);
  good[3] = 'A';
  assert_int_equal(fc_xfer_fp_parse(good, fp), -EINVAL);
  good[3] = 'g';
  assert_int_equal(fc_xfer_fp_parse(good, fp), -EINVAL);
  good[3] = 'a';
  good[FC_XFER_FP_HEX - 1] = '\0';
  assert_int_equal(fc_xfer_fp_parse(good, fp), -EINVAL);
  good[FC_XFER_FP_HEX - 1] = 'a';
  good[FC_XFER_FP_HEX] = 'a';
  good[FC_XFER_FP_HEX + 1] = '\0';
  assert_int_equal(fc_xfer_fp_parse(good, fp), -EINVAL);
  assert_int_equal(fc_xfer_fp_parse("", fp), -EINVAL);
  assert_int_equal(fc_xfer_fp_parse(NULL, fp), -EINVAL);
}

static void test_pinned_peers_meet(void **state)
{
  struct keys *k = *state;
  struct server s;
  char cerr[512];
  int cr;

  handshake(LONG_ID, LONG_ID, k->src, k->dst, k->src, k->dst, &cr, cerr, &s);
  assert_int_equal(cr, 0);
  assert_int_equal(s.r, 0);
  assert_string_equal(s.identity, LONG_ID);
}

static void test_source_refuses_a_destination_it_did_not_pin(void **state)
{
  struct keys *k = *state;
  struct server s;
  char cerr[512];
  int cr;

  handshake("m-1", "m-1", k->src, k->other, k->src, k->dst, &cr, cerr, &s);
  assert_int_equal(cr, -EACCES);
  assert_non_null(strstr(cerr, "not the one pinned"));
  assert_int_not_equal(s.r, 0);
}

static void test_destination_refuses_a_source_it_did_not_pin(void **state)
{
  struct keys *k = *state;
  struct server s;
  char cerr[512];
  int cr;

  handshake("m-1", "m-1", k->other, k->dst, k->src, k->dst, &cr, cerr, &s);
  assert_int_equal(s.r, -EACCES);
  assert_non_null(strstr(s.err, "not the one pinned"));
  assert_string_equal(s.identity, "");
}

static void test_unknown_migration_gets_no_certificate(void **state)
{
  struct keys *k = *state;
  struct server s;
  char cerr[512];
  int cr;

  handshake("m-2", "m-1", k->src, k->dst, k->src, k->dst, &cr, cerr, &s);
  assert_int_not_equal(cr, 0);
  assert_int_not_equal(s.r, 0);
}

#define KEYED(t) cmocka_unit_test_setup_teardown(t, make_keys, free_keys)

int main(void)
{
  const struct CMUnitTest tests[] = {
    KEYED(test_fingerprint_is_the_certificate_s),
    cmocka_unit_test(test_fingerprint_syntax),
    KEYED(test_pinned_peers_meet),
    KEYED(test_source_refuses_a_destination_it_did_not_pin),
    KEYED(test_destination_refuses_a_source_it_did_not_pin),
    KEYED(test_unknown_migration_gets_no_certificate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
