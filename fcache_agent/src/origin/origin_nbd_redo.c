/* SPDX-License-Identifier: Apache-2.0 */
/* The NBD origin's redo log: every change the server acknowledged that no
 * successful flush has covered yet.
 *
 * An NBD server may keep acknowledged writes in volatile memory until a
 * flush (nbdkit's cache filter, a storage array's write cache).  If it
 * restarts, they are gone, and a flush on a new connection succeeds: it
 * covers only what the new server instance was sent.  So a write is
 * forgotten only once a flush issued after it succeeded; until then its
 * bytes are kept here, and every new connection has them written again
 * before it carries anything else (origin_nbd_conn.c, reconnect()).
 *
 * Replay order is the order the callers saw their writes acknowledged in:
 * a write is recorded before its caller returns, under `order` held for
 * reading from before it is started; a replay holds `order` for writing,
 * so no write is half-way (sent, not recorded) while the log is replayed,
 * and none starts until the new connection has the log.  Trims are logged
 * too (without data): a trim replayed out of order must not bring back
 * what a later write replaced, nor a write replayed after a trim that came
 * later.  A write of zeroes (NBD_CMD_WRITE_ZEROES) is logged like a trim,
 * without data, and is done again as a write of zeroes: unlike a trim it
 * is a promise of what the range reads.  Writes with FUA are logged like the others: they are durable,
 * but replaying an older write over them would not be.
 *
 * The log is bounded (NBD_REDO_MAX_BYTES of data, NBD_REDO_MAX_ENTRIES
 * changes): a writer that would pass the bound flushes the origin first,
 * before it starts its write, which empties the log.  So that writers
 * rarely meet the bound, the one whose change fills half of it flushes
 * after its change, while the others go on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "origin_nbd_priv.h"
#include "common/lockcheck.h"

struct nbd_redo_entry {
  struct nbd_redo_entry *next;
  uint64_t seq;
  uint64_t off;
  uint32_t count;
  enum nbd_redo_op op;          /* data only for NBD_REDO_WRITE */
  unsigned char data[];
};

int
nbd_redo_init(struct nbd_redo *r)
{
  pthread_rwlockattr_t attr;
  int e;

  memset(r, 0, sizeof *r);
  /* Writer-preferring: a replay must not wait behind a stream of writes
   * that keep taking the lock for reading. */
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr,
                                PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  e = pthread_rwlock_init(&r->order, &attr);
  pthread_rwlockattr_destroy(&attr);
  if (e)
    return -e;
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->room, NULL);
  r->tail = &r->head;
  return 0;
}

static void
free_entries(struct nbd_redo_entry *e)
{
  while (e) {
    struct nbd_redo_entry *next = e->next;

    free(e);
    e = next;
  }
}

void
nbd_redo_destroy(struct nbd_redo *r)
{
  free_entries(r->head);
  r->head = NULL;
  pthread_mutex_destroy(&r->room);
  pthread_mutex_destroy(&r->lock);
  pthread_rwlock_destroy(&r->order);
}

bool
nbd_redo_has_room(struct nbd_redo *r, uint32_t count)
{
  bool room;

  pthread_mutex_lock(&r->lock);
  room = r->nr == 0 || (r->nr < NBD_REDO_MAX_ENTRIES &&
                        r->bytes + count <= NBD_REDO_MAX_BYTES);
  pthread_mutex_unlock(&r->lock);
  return room;
}

static bool
half_full_locked(const struct nbd_redo *r)
{
  FC_ASSERT_HELD(&r->lock);
  return r->bytes >= NBD_REDO_MAX_BYTES / 2 || r->nr >= NBD_REDO_MAX_ENTRIES / 2;
}

bool
nbd_redo_half_full(struct nbd_redo *r)
{
  bool half;

  pthread_mutex_lock(&r->lock);
  half = half_full_locked(r);
  pthread_mutex_unlock(&r->lock);
  return half;
}

void
nbd_redo_begin(struct nbd_redo *r)
{
  pthread_rwlock_rdlock(&r->order);
}

void
nbd_redo_end(struct nbd_redo *r)
{
  pthread_rwlock_unlock(&r->order);
}

int
nbd_redo_record(struct nbd_redo *r, enum nbd_redo_op op, const void *buf,
                uint32_t count, uint64_t off)
{
  size_t data = op == NBD_REDO_WRITE ? count : 0;
  struct nbd_redo_entry *e = malloc(sizeof *e + data);
  bool half;

  if (!e)
    return -ENOMEM;
  e->next = NULL;
  e->off = off;
  e->count = count;
  e->op = op;
  if (data)
    memcpy(e->data, buf, data);
  pthread_mutex_lock(&r->lock);
  e->seq = r->next_seq++;
  *r->tail = e;
  r->tail = &e->next;
  r->nr++;
  r->bytes += data;
  half = half_full_locked(r);
  pthread_mutex_unlock(&r->lock);
  return half;
}

uint64_t
nbd_redo_mark(struct nbd_redo *r)
{
  uint64_t seq;

  pthread_mutex_lock(&r->lock);
  seq = r->next_seq;
  pthread_mutex_unlock(&r->lock);
  return seq;
}

void
nbd_redo_flushed(struct nbd_redo *r, uint64_t mark)
{
  struct nbd_redo_entry *gone = NULL, **last = &gone;

  /* Not while a replay walks the list. */
  pthread_rwlock_rdlock(&r->order);
  pthread_mutex_lock(&r->lock);
  while (r->head && r->head->seq < mark) {
    struct nbd_redo_entry *e = r->head;

    r->head = e->next;
    r->nr--;
    r->bytes -= e->op == NBD_REDO_WRITE ? e->count : 0;
    *last = e;
    last = &e->next;
  }
  *last = NULL;
  if (!r->head)
    r->tail = &r->head;
  pthread_mutex_unlock(&r->lock);
  pthread_rwlock_unlock(&r->order);
  free_entries(gone);           /* outside the locks: writers record meanwhile */
}

int
nbd_redo_replay(struct nbd_redo *r, nbd_redo_apply_fn *apply, void *ctx,
                unsigned *replayed)
{
  int e = 0;

  *replayed = 0;
  /* Held for writing, nothing records, starts a write or drops an entry
   * (nbd_redo_flushed reads under it too): the list stands still. */
  pthread_rwlock_wrlock(&r->order);
  for (struct nbd_redo_entry *x = r->head; x && !e; x = x->next) {
    e = apply(ctx, x->op, x->op == NBD_REDO_WRITE ? x->data : NULL,
              x->count, x->off);
    if (!e)
      ++*replayed;
  }
  pthread_rwlock_unlock(&r->order);
  return e;
}
