/* SPDX-License-Identifier: Apache-2.0 */
/* Admission staging (staging.h): one hash table over every staged block,
 * and one or two intrusive LRU lists threaded through the same entries by
 * index.  Entries live in a pool that grows by doubling as the stage
 * fills (never past what the area can account for) and recycles freed
 * slots through a free list, so an access costs a hash lookup and a few
 * link updates: O(1), no allocation once the stage is warm.  Data buffers
 * are allocated when a read miss hands its data over and freed when the
 * entry loses it.
 *
 * Which list an entry sits on:
 *  - address kind: the address list only;
 *  - data kind: the data list only (an entry without data costs 24 B);
 *  - hybrid: the data list after a read, the address list after a write
 *    or after the data list pushed it out (it keeps its count there).
 *
 * Below the lists, the reuse history (reuse_history.h, when set): an
 * entry the bound pushes out of the area is remembered there by address
 * and count, and a later access takes it back into the area with its
 * count, or admits it.  A block is in the area or the history, never in
 * both.
 *
 * put_data(NULL): account a staged block without keeping its bytes.  The
 * replayer (fcache_agent/replay) simulates data staging on metadata only
 * and has no bytes to give; read_data then reports the hit and zero-fills buf. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reuse_history.h"
#include "rws.h"
#include "staging.h"
#include "common/enum_names.h"

#define NONE UINT32_MAX

enum { L_ADDR, L_DATA, NR_LISTS };

struct st_ent {
  uint64_t block;
  void *data;            /* the bytes, when put_data gave some */
  uint32_t hnext;        /* hash chain; the free list when unused */
  uint32_t prev, next;   /* LRU links within list */
  uint8_t count;         /* accesses while staged (<= FC_RWS_MAX_N + 1) */
  uint8_t list;
  uint8_t has_data;
};

struct st_list {
  uint32_t head, tail;   /* head: most recently used */
  size_t used, bound;    /* accounted bytes */
};

struct fc_staging {
  enum fc_staging_kind kind;
  uint32_t bs;
  unsigned reuse_n;
  size_t area;
  struct st_list l[NR_LISTS];
  struct st_ent *ents;
  uint32_t cap, nr_used_slots, free_head;
  uint32_t *buckets;
  uint32_t nr_buckets;   /* a power of two, or 0 before the first entry */
  uint64_t nr_entries, nr_data;
  uint64_t accesses, admitted, data_hits, evicted;
  uint64_t recalled;       /* accesses that found their count in hist */
  struct fc_rhist *hist;   /* NULL: the area alone */
};

static size_t
cost(const struct fc_staging *st, const struct st_ent *e)
{
  return FC_STAGING_ADDR_BYTES + (e->has_data ? st->bs : 0);
}

/* The same Fibonacci hashing as common/blockmap: sequential blocks (a
 * scan, the common case) spread across buckets. */
static uint32_t
bucket_of(const struct fc_staging *st, uint64_t block)
{
  return (uint32_t)((block * 0x9E3779B97F4A7C15ull) >> 32) & (st->nr_buckets - 1);
}

static uint32_t
lookup(const struct fc_staging *st, uint64_t block)
{
  if (!st->nr_buckets)
    return NONE;
  for (uint32_t i = st->buckets[bucket_of(st, block)]; i != NONE;
       i = st->ents[i].hnext)
    if (st->ents[i].block == block)
      return i;
  return NONE;
}

static void
hash_insert(struct fc_staging *st, uint32_t i)
{
  uint32_t b = bucket_of(st, st->ents[i].block);

  st->ents[i].hnext = st->buckets[b];
  st->buckets[b] = i;
}

static void
hash_remove(struct fc_staging *st, uint32_t i)
{
  uint32_t *link = &st->buckets[bucket_of(st, st->ents[i].block)];

  while (*link != i)
    link = &st->ents[*link].hnext;
  *link = st->ents[i].hnext;
}

/* Keep chains short: one bucket per entry at most. */
static int
grow_buckets(struct fc_staging *st)
{
  uint32_t n = st->nr_buckets ? st->nr_buckets * 2 : 64;
  uint32_t *b = malloc((size_t)n * sizeof *b);

  if (!b)
    return -ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    b[i] = NONE;
  free(st->buckets);
  st->buckets = b;
  st->nr_buckets = n;
  for (uint32_t i = 0; i < st->nr_used_slots; i++)
    if (st->ents[i].list != NR_LISTS)
      hash_insert(st, i);
  return 0;
}

static void
link_head(struct fc_staging *st, int li, uint32_t i)
{
  struct st_list *l = &st->l[li];
  struct st_ent *e = &st->ents[i];

  e->list = (uint8_t)li;
  e->prev = NONE;
  e->next = l->head;
  if (l->head != NONE)
    st->ents[l->head].prev = i;
  else
    l->tail = i;
  l->head = i;
  l->used += cost(st, e);
}

static void
unlink_ent(struct fc_staging *st, uint32_t i)
{
  struct st_ent *e = &st->ents[i];
  struct st_list *l = &st->l[e->list];

  if (e->prev != NONE)
    st->ents[e->prev].next = e->next;
  else
    l->head = e->next;
  if (e->next != NONE)
    st->ents[e->next].prev = e->prev;
  else
    l->tail = e->prev;
  l->used -= cost(st, e);
}

/* Called on an unlinked entry, or with its list's accounting fixed up by
 * the caller. */
static void
strip_data(struct fc_staging *st, struct st_ent *e)
{
  if (!e->has_data)
    return;
  free(e->data);
  e->data = NULL;
  e->has_data = 0;
  st->nr_data--;
}

static void
drop(struct fc_staging *st, uint32_t i)
{
  struct st_ent *e = &st->ents[i];

  unlink_ent(st, i);
  hash_remove(st, i);
  strip_data(st, e);
  e->list = NR_LISTS;
  e->hnext = st->free_head;
  st->free_head = i;
  st->nr_entries--;
}

/* Push entries out of list li until it fits its bound.  The hybrid data
 * list demotes its victims to the address list, which is then trimmed in
 * turn: a read that is pushed out of memory is still a candidate for
 * admission by its count. */
static void
shrink(struct fc_staging *st, int li)
{
  struct st_list *l = &st->l[li];

  while (l->used > l->bound && l->tail != NONE) {
    uint32_t i = l->tail;

    if (st->kind == FC_STAGING_HYBRID && li == L_DATA) {
      unlink_ent(st, i);
      strip_data(st, &st->ents[i]);
      link_head(st, L_ADDR, i);
    } else {
      if (st->hist)
        fc_rhist_put(st->hist, st->ents[i].block, st->ents[i].count);
      drop(st, i);
      st->evicted++;
    }
  }
  if (st->kind == FC_STAGING_HYBRID && li == L_DATA)
    shrink(st, L_ADDR);
}

static void
set_bounds(struct fc_staging *st, size_t area)
{
  st->area = area;
  switch (st->kind) {
  case FC_STAGING_ADDRESS:
    st->l[L_ADDR].bound = area;
    st->l[L_DATA].bound = 0;
    break;
  case FC_STAGING_DATA:
    st->l[L_ADDR].bound = 0;
    st->l[L_DATA].bound = area;
    break;
  case FC_STAGING_HYBRID:
    /* 1:7 by bytes, as the paper settles on (§4.4.2). */
    st->l[L_ADDR].bound = area / 8;
    st->l[L_DATA].bound = area - area / 8;
    break;
  }
}

static uint32_t
alloc_ent(struct fc_staging *st)
{
  uint32_t i;

  if (st->free_head != NONE) {
    i = st->free_head;
    st->free_head = st->ents[i].hnext;
  } else {
    if (st->nr_used_slots == st->cap) {
      uint32_t ncap = st->cap ? st->cap * 2 : 64;
      struct st_ent *n;

      if (st->cap >= NONE / 2)
        return NONE;
      n = realloc(st->ents, (size_t)ncap * sizeof *n);
      if (!n)
        return NONE;
      st->ents = n;
      st->cap = ncap;
    }
    i = st->nr_used_slots++;
  }
  /* Unlinked until the caller links it: a rehash must skip it. */
  memset(&st->ents[i], 0, sizeof st->ents[i]);
  st->ents[i].list = NR_LISTS;
  if (st->nr_entries + 1 > st->nr_buckets && grow_buckets(st) < 0) {
    st->ents[i].hnext = st->free_head;
    st->free_head = i;
    return NONE;
  }
  return i;
}

int
fc_staging_new(enum fc_staging_kind kind, size_t area_bytes, uint32_t block_size,
               unsigned reuse_n, struct fc_staging **out)
{
  struct fc_staging *st;
  size_t data_min = (size_t)FC_STAGING_ADDR_BYTES + block_size;

  if (!out || block_size == 0 || reuse_n < 1 || reuse_n > FC_RWS_MAX_N)
    return -EINVAL;
  switch (kind) {
  case FC_STAGING_ADDRESS:
    if (area_bytes < FC_STAGING_ADDR_BYTES)
      return -EINVAL;
    break;
  case FC_STAGING_DATA:
    if (area_bytes < data_min)
      return -EINVAL;
    break;
  case FC_STAGING_HYBRID:
    if (area_bytes / 8 < FC_STAGING_ADDR_BYTES ||
        area_bytes - area_bytes / 8 < data_min)
      return -EINVAL;
    break;
  default:
    return -EINVAL;
  }
  st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  st->kind = kind;
  st->bs = block_size;
  st->reuse_n = reuse_n;
  st->free_head = NONE;
  for (int li = 0; li < NR_LISTS; li++)
    st->l[li].head = st->l[li].tail = NONE;
  set_bounds(st, area_bytes);
  *out = st;
  return 0;
}

void
fc_staging_free(struct fc_staging *st)
{
  if (!st)
    return;
  for (uint32_t i = 0; i < st->nr_used_slots; i++)
    if (st->ents[i].list != NR_LISTS)
      free(st->ents[i].data);
  free(st->ents);
  free(st->buckets);
  fc_rhist_free(st->hist);
  free(st);
}

bool
fc_staging_access(struct fc_staging *st, uint64_t block, bool is_write)
{
  uint32_t i = lookup(st, block);
  struct st_ent *e;
  int li;

  st->accesses++;
  if (i != NONE) {
    e = &st->ents[i];
    if (++e->count > st->reuse_n) {
      drop(st, i);
      st->admitted++;
      return true;
    }
    unlink_ent(st, i);
    /* A write makes any staged copy stale; the caller invalidates too,
     * but the hybrid move below must not carry the bytes along. */
    if (is_write)
      strip_data(st, e);
  } else {
    /* Pushed out of the area before: its count comes back. */
    unsigned count = st->hist ? fc_rhist_take(st->hist, block) : 0;

    if (count)
      st->recalled++;
    if (++count > st->reuse_n) {
      st->admitted++;
      return true;
    }
    i = alloc_ent(st);
    if (i == NONE)
      return false;   /* out of memory: not staged, so not admitted */
    e = &st->ents[i];
    e->block = block;
    e->count = (uint8_t)count;
    hash_insert(st, i);
    st->nr_entries++;
  }
  if (st->kind == FC_STAGING_ADDRESS)
    li = L_ADDR;
  else if (st->kind == FC_STAGING_DATA)
    li = L_DATA;
  else
    li = is_write ? L_ADDR : L_DATA;
  link_head(st, li, i);
  shrink(st, li);
  return false;
}

void
fc_staging_put_data(struct fc_staging *st, uint64_t block, const void *data)
{
  uint32_t i;
  struct st_ent *e;

  if (st->kind == FC_STAGING_ADDRESS)
    return;
  i = lookup(st, block);
  if (i == NONE)
    return;
  e = &st->ents[i];
  if (e->has_data) {
    if (data && e->data)
      memcpy(e->data, data, st->bs);
    return;
  }
  if (data) {
    e->data = malloc(st->bs);
    if (!e->data)
      return;   /* out of memory: stay an address, a missed staging hit */
    memcpy(e->data, data, st->bs);
  }
  unlink_ent(st, i);
  e->has_data = 1;
  st->nr_data++;
  link_head(st, L_DATA, i);
  shrink(st, L_DATA);
}

bool
fc_staging_read_data(struct fc_staging *st, uint64_t block, void *buf)
{
  uint32_t i = lookup(st, block);
  struct st_ent *e;

  if (i == NONE || !st->ents[i].has_data)
    return false;
  e = &st->ents[i];
  if (buf) {
    if (e->data)
      memcpy(buf, e->data, st->bs);
    else
      memset(buf, 0, st->bs);
  }
  st->data_hits++;
  return true;
}

static void
invalidate_one(struct fc_staging *st, uint32_t i)
{
  struct st_ent *e = &st->ents[i];

  if (!e->has_data)
    return;
  st->l[e->list].used -= st->bs;
  strip_data(st, e);
}

void
fc_staging_invalidate(struct fc_staging *st, uint64_t first, uint64_t n)
{
  if (!st->nr_data || n == 0)
    return;
  /* A trim of a whole volume must not walk billions of blocks: walk
   * whichever is smaller, the range or the stage. */
  if (n <= st->nr_entries) {
    for (uint64_t b = first; b - first < n; b++) {
      uint32_t i = lookup(st, b);

      if (i != NONE)
        invalidate_one(st, i);
    }
    return;
  }
  for (uint32_t i = 0; i < st->nr_used_slots; i++) {
    struct st_ent *e = &st->ents[i];

    if (e->list != NR_LISTS && e->block - first < n)
      invalidate_one(st, i);
  }
}

void
fc_staging_resize(struct fc_staging *st, size_t area_bytes)
{
  set_bounds(st, area_bytes);
  /* Data first: in the hybrid its victims land in the address list. */
  shrink(st, L_DATA);
  shrink(st, L_ADDR);
}

int
fc_staging_set_history(struct fc_staging *st, uint64_t gen_blocks)
{
  uint32_t gen = gen_blocks > FC_RHIST_MAX_GEN ? FC_RHIST_MAX_GEN : (uint32_t)gen_blocks;

  if (!gen_blocks) {
    fc_rhist_free(st->hist);
    st->hist = NULL;
    return 0;
  }
  if (st->hist) {
    fc_rhist_resize(st->hist, gen);
    return 0;
  }
  return fc_rhist_new(gen, &st->hist);
}

void
fc_staging_end_window(struct fc_staging *st)
{
  if (st->hist)
    fc_rhist_age(st->hist);
}

void
fc_staging_get_stats(const struct fc_staging *st, struct fc_staging_stats *out)
{
  out->accesses = st->accesses;
  out->admitted = st->admitted;
  out->data_hits = st->data_hits;
  out->evicted = st->evicted;
  out->addresses = st->nr_entries;
  out->data_blocks = st->nr_data;
  out->area_bytes = st->area;
  out->used_bytes = st->l[L_ADDR].used + st->l[L_DATA].used;
  out->recalled = st->recalled;
  out->history_blocks = st->hist ? fc_rhist_entries(st->hist) : 0;
  out->history_bytes = st->hist ? fc_rhist_memory(st->hist) : 0;
}

static const char *const kind_names[] = {
  [FC_STAGING_ADDRESS] = "address",
  [FC_STAGING_DATA] = "data",
  [FC_STAGING_HYBRID] = "hybrid",
};

FC_DEFINE_ENUM_NAMES(fc_staging_kind, enum fc_staging_kind, kind_names)
