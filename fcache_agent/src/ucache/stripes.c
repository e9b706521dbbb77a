/* SPDX-License-Identifier: Apache-2.0 */
/* The stripe locks: what serialises requests on the same blocks, and the
 * per-stripe sequence a read miss checks before installing what it read.
 * Separate from ucache_lifecycle.c because every path takes them (requests,
 * migration, write-back) and none needs to know how they are laid out. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "ucache_priv.h"

void
uc_stripe_set_add(struct stripe_set *set, oblock_t ob)
{
  unsigned s = (unsigned)(ob.n & (FC_STRIPES - 1));

  set->bits[s / 64] |= 1ull << (s % 64);
}

/* Lock a set's stripes in the one ascending order (what keeps two
 * multi-block requests from deadlocking); a writer bumps each sequence.
 * A reader may give a deadline (CLOCK_MONOTONIC): false, holding nothing,
 * when a stripe is still taken then.  A writer never gives up (it would
 * have bumped sequences already). */
static bool
lock_set(struct fc_ucache *uc, const struct stripe_set *set, bool reader,
         const struct timespec *deadline)
{
  struct stripe_set held = { { 0 } };

  for (unsigned w = 0; w < FC_STRIPES / 64; w++)
    for (uint64_t bits = set->bits[w]; bits; bits &= bits - 1) {
      unsigned s = w * 64 + (unsigned)__builtin_ctzll(bits);

      if (reader && deadline) {
        if (pthread_mutex_clocklock(&uc->stripes[s], CLOCK_MONOTONIC,
                                    deadline) != 0) {
          uc_unlock_stripes(uc, &held);
          return false;
        }
        held.bits[w] |= 1ull << (s % 64);
        continue;
      }
      pthread_mutex_lock(&uc->stripes[s]);
      if (!reader)
        uc->stripe_seq[s]++;
    }
  return true;
}

/* Every holder that may change data drops the staged copies of its range,
 * under the same hold that bumps the stripes: a read miss that read the
 * origin before it cannot stage what it read (its fill is no longer
 * allowed), and one after it reads the new data. */
static void
forget_staged(struct fc_ucache *uc, uint64_t first, uint64_t n)
{
  if (!uc->stage)
    return;
  pthread_mutex_lock(&uc->lock);
  uc_stage_forget_locked(uc, first, n);
  pthread_mutex_unlock(&uc->lock);
}

void
uc_lock_stripe_set(struct fc_ucache *uc, const struct stripe_set *set, bool reader)
{
  (void)lock_set(uc, set, reader, NULL);
  /* A scattered writer (a migration's batch) may change any block. */
  if (!reader)
    forget_staged(uc, 0, UINT64_MAX);
}

static void
set_of_range(uint64_t first, uint64_t last, struct stripe_set *set)
{
  memset(set, 0, sizeof *set);
  /* Counted from first rather than "b <= last", which never ends when
   * last is UINT64_MAX: a block number a migration peer chose (a FETCH of
   * block 2^64-1 hung the source's sender; found by fuzz_xfer_source.c).
   * "last - first + 1" wrapped to 0 for the whole range, into the same
   * endless loop. */
  if (last - first >= FC_STRIPES - 1) {
    memset(set, 0xff, sizeof *set);
  } else {
    for (uint64_t i = 0; i <= last - first; i++)
      uc_stripe_set_add(set, to_oblock(first + i));
  }
}

static void
lock_stripes(struct fc_ucache *uc, uint64_t first, uint64_t last,
             struct stripe_set *set, bool reader)
{
  set_of_range(first, last, set);
  (void)lock_set(uc, set, reader, NULL);
  if (!reader)
    forget_staged(uc, first, last - first + 1 ? last - first + 1 : UINT64_MAX);
}

void
uc_lock_stripes(struct fc_ucache *uc, uint64_t first, uint64_t last,
                struct stripe_set *set)
{
  lock_stripes(uc, first, last, set, false);
}

void
uc_lock_stripes_to_read(struct fc_ucache *uc, uint64_t first, uint64_t last,
                        struct stripe_set *set)
{
  lock_stripes(uc, first, last, set, true);
}

void
uc_unlock_stripes(struct fc_ucache *uc, const struct stripe_set *set)
{
  for (unsigned w = 0; w < FC_STRIPES / 64; w++)
    for (uint64_t bits = set->bits[w]; bits; bits &= bits - 1)
      pthread_mutex_unlock(&uc->stripes[w * 64 + (unsigned)__builtin_ctzll(bits)]);
}

bool
uc_lock_stripes_to_read_within(struct fc_ucache *uc, uint64_t first,
                               uint64_t last, unsigned max_us,
                               struct stripe_set *set)
{
  struct timespec deadline;

  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_nsec += (long)max_us * 1000;
  deadline.tv_sec += deadline.tv_nsec / 1000000000;
  deadline.tv_nsec %= 1000000000;
  set_of_range(first, last, set);
  return lock_set(uc, set, true, &deadline);
}

uint64_t
uc_stripe_seq(const struct fc_ucache *uc, oblock_t ob)
{
  return uc->stripe_seq[ob.n & (FC_STRIPES - 1)];
}

bool
uc_fill_allowed(struct fc_ucache *uc, oblock_t ob, uint64_t seq)
{
  bool absent;

  pthread_mutex_lock(&uc->lock);
  absent = uc_lookup_locked(uc, ob).n == CBLOCK_NONE;
  pthread_mutex_unlock(&uc->lock);
  return absent && uc_stripe_seq(uc, ob) == seq;
}
