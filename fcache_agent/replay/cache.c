/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated flash: the agent's block table (common/entry.h), one
 * blockmap and one LRU list per volume (common/blockmap, common/lru),
 * and the replacement rule that enforces shares (CloudCache §4.3): a
 * volume under its share takes a free block, or when the cache is full
 * the LRU block of the volume most over its share; a volume at its share
 * replaces its own LRU block.  noalloc has no shares: the least recently
 * used block of the whole cache goes, found by comparing the volumes'
 * LRU tails (a per-block stamp), so each volume keeps its own list. */
#include <errno.h>
#include <stdlib.h>

#include "replay_priv.h"

#define MAP_FIRST 1024u

int
rp_cache_init(struct rp_sim *s)
{
  uint64_t n = s->cfg.cache_blocks;

  /* calloc/malloc pages arrive on first touch: a large cache that a
   * short trace never fills costs little. */
  s->table = calloc(n, sizeof *s->table);
  s->free_stack = malloc(n * sizeof *s->free_stack);
  if (s->cfg.policy == FC_REPLAY_NOALLOC)
    s->stamp = calloc(n, sizeof *s->stamp);
  if (!s->table || !s->free_stack ||
      (s->cfg.policy == FC_REPLAY_NOALLOC && !s->stamp))
    return -ENOMEM;
  return 0;
}

void
rp_cache_destroy(struct rp_sim *s)
{
  free(s->table);
  free(s->free_stack);
  free(s->stamp);
  s->table = NULL;
  s->free_stack = NULL;
  s->stamp = NULL;
}

int
rp_cache_vol_init(struct rp_sim *s, struct rp_vol *v)
{
  fc_lru_init(&v->lru);
  return fc_blockmap_init(&v->map, MAP_FIRST);
}

/* fc_blockmap is sized once; the agent sizes it for the volume's quota.
 * Here a volume's use is unknown beforehand and many volumes may each
 * have the whole cache as their limit, so the map starts small and is
 * rebuilt larger (walking the volume's LRU) when chains grow long. */
static int
grow_map(struct rp_sim *s, struct rp_vol *v)
{
  struct fc_blockmap map;
  int r = fc_blockmap_init(&map, v->map.count * 2);

  if (r)
    return r;
  for (uint32_t i = v->lru.head; i != CBLOCK_NONE; i = s->table[i].lru_next)
    fc_blockmap_insert(&map, s->table, to_cblock(i));
  fc_blockmap_destroy(&v->map);
  v->map = map;
  return 0;
}

uint32_t
rp_cache_lookup(struct rp_sim *s, struct rp_vol *v, uint64_t block)
{
  return fc_blockmap_lookup(&v->map, s->table, to_oblock(block)).n;
}

void
rp_cache_hit(struct rp_sim *s, struct rp_vol *v, uint32_t cb)
{
  fc_lru_touch(&v->lru, s->table, to_cblock(cb));
  if (s->stamp)
    s->stamp[cb] = ++s->clock;
}

/* Take o's LRU block out of the cache; its index is the caller's now. */
static uint32_t
evict(struct rp_sim *s, struct rp_vol *o)
{
  uint32_t cb = o->lru.tail;

  fc_blockmap_remove(&o->map, s->table, to_cblock(cb));
  fc_lru_remove(&o->lru, s->table, to_cblock(cb));
  s->table[cb].flags = 0;
  o->used--;
  s->used--;
  return cb;
}

static bool
have_free(const struct rp_sim *s)
{
  return s->nr_free || s->next_fresh < s->cfg.cache_blocks;
}

static uint32_t
take_free(struct rp_sim *s)
{
  if (s->nr_free)
    return s->free_stack[--s->nr_free];
  return (uint32_t)s->next_fresh++;
}

/* The volume whose blocks go first: for noalloc the one holding the
 * cache's least recently used block (a global LRU, which the agent does
 * not have), otherwise the agent's own rule, alloc/victim: the one most
 * over its share.  The limits of the lru policy may add up to more than
 * the cache, so "most over" may still be under: then the least under
 * (under_ok; the agent's shares never overcommit its device). */
static struct rp_vol *
victim_volume(struct rp_sim *s)
{
  struct rp_vol *best = NULL;
  size_t i;

  if (s->stamp) {
    for (i = 0; i < s->nr_vols; i++) {
      struct rp_vol *o = s->vols[i];

      if (o->used && (!best || s->stamp[o->lru.tail] < s->stamp[best->lru.tail]))
        best = o;
    }
    return best;
  }
  for (i = 0; i < s->nr_vols; i++) {
    s->victim_cand[i] = (struct fc_victim_cand){
      .used = s->vols[i]->used, .share = s->vols[i]->share,
    };
  }
  if (fc_victim_pick(s->victim_cand, s->nr_vols, true, &s->victim_cursor, &i))
    return NULL;
  return s->vols[i];
}

static int
get_block(struct rp_sim *s, struct rp_vol *v, uint32_t *out)
{
  struct rp_vol *o;

  if (s->cfg.policy == FC_REPLAY_NOALLOC || v->used < v->share) {
    if (have_free(s)) {
      *out = take_free(s);
      return 0;
    }
    o = victim_volume(s);
  } else {
    o = v->used ? v : NULL;
  }
  if (!o)
    return 1;
  *out = evict(s, o);
  return 0;
}

int
rp_cache_insert(struct rp_sim *s, struct rp_vol *v, uint64_t block)
{
  uint32_t cb;
  int r;

  if (v->map.count >= 2 * (v->map.mask + 1)) {
    r = grow_map(s, v);
    if (r)
      return r;
  }
  r = get_block(s, v, &cb);
  if (r)
    return r;
  s->table[cb].oblock = block;
  s->table[cb].flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID;
  fc_blockmap_insert(&v->map, s->table, to_cblock(cb));
  fc_lru_push_head(&v->lru, s->table, to_cblock(cb));
  if (s->stamp)
    s->stamp[cb] = ++s->clock;
  v->used++;
  s->used++;
  if (v->used > v->c.max_cached_blocks)
    v->c.max_cached_blocks = v->used;
  if (s->used > s->max_used)
    s->max_used = s->used;
  return 0;
}

void
rp_cache_trim(struct rp_sim *s, struct rp_vol *v)
{
  while (v->used > v->share)
    s->free_stack[s->nr_free++] = evict(s, v);
}
