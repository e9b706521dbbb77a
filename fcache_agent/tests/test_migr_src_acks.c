/* SPDX-License-Identifier: Apache-2.0 */
/* What the source lets a destination's ACK free (migr_source.c): a dirty
 * block it sent in the background, and, only where WELCOME said the
 * destination acknowledges fetched blocks ("ack_fetched"), a block it
 * served dirty to a FETCH; each once.  A block served clean, or never
 * sent, is refused (the receiver then fails the migration): a peer must
 * not make the source drop data nobody else holds. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/invfilter.h"
#include "migration/migr_source_priv.h"
#include "migration/migration.h"
#include "testutil.h"

static struct fc_migration *
source_new(bool ack_fetched)
{
  struct fc_migration *m = calloc(1, sizeof *m);

  assert_non_null(m);
  pthread_mutex_init(&m->lock, NULL);
  m->e.role = FC_MIGR_SOURCE;
  m->src.ack_fetched = ack_fetched;
  return m;
}

static void
set_free(struct fc_invfilter *set)
{
  if (set) {
    fc_invfilter_destroy(set);
    free(set);
  }
}

static void
source_free(struct fc_migration *m)
{
  set_free(m->src.sent_dirty);
  set_free(m->src.served_dirty);
  set_free(m->src.fetched_dirty);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

static void
served(struct fc_migration *m, uint64_t ob, bool dirty)
{
  pthread_mutex_lock(&m->lock);
  assert_int_equal(fc_migr_src_serving_locked(m, ob, dirty), 0);
  pthread_mutex_unlock(&m->lock);
}

static void
sent_in_background(struct fc_migration *m, uint64_t ob)
{
  pthread_mutex_lock(&m->lock);
  assert_int_equal(fc_migr_src_record_locked(m, &m->src.sent_dirty, ob), 0);
  pthread_mutex_unlock(&m->lock);
}

static bool
acked(struct fc_migration *m, uint64_t ob)
{
  bool ok;

  pthread_mutex_lock(&m->lock);
  ok = fc_migr_src_acked_locked(m, to_oblock(ob));
  pthread_mutex_unlock(&m->lock);
  return ok;
}

/* Negotiated: a block served dirty may be acknowledged, once; one served
 * clean may not, nor one never sent.  The background copy's blocks are
 * as before. */
static void
test_fetched_dirty_acked_once(void **state)
{
  struct fc_migration *m = source_new(true);

  served(m, 5, true);
  served(m, 6, false);
  sent_in_background(m, 7);
  assert_true(acked(m, 5));
  assert_false(acked(m, 5));
  assert_false(acked(m, 6));
  assert_false(acked(m, 9));
  assert_true(acked(m, 7));
  assert_false(acked(m, 7));
  /* Fetched, then sent again in the background (the copy's list was made
   * before the fetch): the destination may install and acknowledge
   * either copy, or both. */
  served(m, 8, true);
  sent_in_background(m, 8);
  assert_true(acked(m, 8));
  assert_true(acked(m, 8));
  assert_false(acked(m, 8));
  /* on_demand's copy after its hold is a separate matter: no hold, no
   * record there. */
  assert_null(m->src.fetched_dirty);
  source_free(m);
}

/* A destination that did not say it acknowledges fetched blocks (an
 * older one, or an engine that cannot): what the source served is not
 * recorded, and an ACK of it is refused as before.  It is freed at
 * COMPLETE. */
static void
test_fetched_not_acked_unless_negotiated(void **state)
{
  struct fc_migration *m = source_new(false);

  served(m, 5, true);
  served(m, 6, false);
  assert_null(m->src.served_dirty);
  assert_false(acked(m, 5));
  assert_false(acked(m, 6));
  sent_in_background(m, 7);
  assert_true(acked(m, 7));
  source_free(m);
}

/* During on_demand's hold a block served dirty is also left out of the
 * copy that follows (fetched_dirty), whether or not it is acknowledged. */
static void
test_hold_records_fetched_dirty(void **state)
{
  for (int ack = 0; ack < 2; ack++) {
    struct fc_migration *m = source_new(ack);

    m->src.bg_hold_until_ns = 1;
    served(m, 3, true);
    served(m, 4, false);
    assert_non_null(m->src.fetched_dirty);
    assert_true(fc_invfilter_contains(m->src.fetched_dirty, to_oblock(3)));
    assert_false(fc_invfilter_contains(m->src.fetched_dirty, to_oblock(4)));
    assert_int_equal(acked(m, 3), ack);
    assert_true(fc_invfilter_contains(m->src.fetched_dirty, to_oblock(3)));
    source_free(m);
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fetched_dirty_acked_once),
    cmocka_unit_test(test_fetched_not_acked_unless_negotiated),
    cmocka_unit_test(test_hold_records_fetched_dirty),
  };

  return tu_run_isolated("migr_src_acks", tests, sizeof tests / sizeof tests[0], 30);
}
