/* SPDX-License-Identifier: Apache-2.0 */
/* The host's volumes, created as the trace names them: an open-addressing
 * table from id to index, with the last volume remembered (requests of
 * one volume come in runs). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replay_priv.h"

static uint64_t
hash_id(const char *id)
{
  uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */

  for (; *id; id++)
    h = (h ^ (unsigned char)*id) * 0x100000001b3ull;
  return h;
}

static void
slot_insert(uint32_t *slots, size_t n, struct rp_vol *v)
{
  size_t i = hash_id(v->id) & (n - 1);

  while (slots[i])
    i = (i + 1) & (n - 1);
  slots[i] = v->idx + 1;
}

static int
grow(struct rp_sim *s)
{
  size_t cap = s->cap_vols ? s->cap_vols * 2 : 8;
  size_t nslots = cap * 2;
  struct rp_vol **vols = realloc(s->vols, cap * sizeof *vols);
  struct fc_share_demand *d;
  uint64_t *sh;
  struct fc_victim_cand *vc;
  uint32_t *slots;

  if (!vols)
    return -ENOMEM;
  s->vols = vols;
  d = realloc(s->demand, cap * sizeof *d);
  if (!d)
    return -ENOMEM;
  s->demand = d;
  sh = realloc(s->shares, cap * sizeof *sh);
  if (!sh)
    return -ENOMEM;
  s->shares = sh;
  vc = realloc(s->victim_cand, cap * sizeof *vc);
  if (!vc)
    return -ENOMEM;
  s->victim_cand = vc;
  slots = calloc(nslots, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; i < s->nr_vols; i++)
    slot_insert(slots, nslots, s->vols[i]);
  free(s->vol_slots);
  s->vol_slots = slots;
  s->nr_vol_slots = nslots;
  s->cap_vols = cap;
  return 0;
}

static void
vol_free(struct rp_vol *v)
{
  if (!v)
    return;
  fc_blockmap_destroy(&v->map);
  fc_staging_free(v->stage);
  if (v->rws)
    fc_rws_free(v->rws);
  rp_u64set_free(&v->hec.touched);
  free(v->obs.v);
  free(v->predv.v);
  free(v);
}

static int
vol_new(struct rp_sim *s, const char *id, struct rp_vol **out)
{
  const struct fc_replay_config *c = &s->cfg;
  struct rp_vol *v = calloc(1, sizeof *v);
  int r;

  if (!v)
    return -ENOMEM;
  snprintf(v->id, sizeof v->id, "%s", id);
  v->idx = (uint32_t)s->nr_vols;
  v->limit = c->volume_limit_blocks < c->cache_blocks ?
             c->volume_limit_blocks : c->cache_blocks;
  /* lru: a fixed partition; noalloc: the whole cache; the others get a
   * share from rp_shares_update below. */
  v->share = c->policy == FC_REPLAY_NOALLOC ? c->cache_blocks : v->limit;
  r = rp_cache_vol_init(s, v);
  if (r)
    goto out;
  if (c->policy == FC_REPLAY_WSS || c->policy == FC_REPLAY_RWS ||
      c->policy == FC_REPLAY_HEC) {
    /* Exact: the replayer's figures are the reference the agent's
     * sampled tracker is judged by. */
    r = fc_rws_new(FC_RWS_EXACT, 1u << 20, &v->rws);
    if (r)
      goto out;
    r = fc_outlier_filter_init(&v->filt, c->outlier_n, c->outlier_lambda);
    if (r)
      goto out;
    r = fc_predictor_init(&v->pred, c->predictor, 0.3, 0.3);
    if (r)
      goto out;
  }
  if (c->policy == FC_REPLAY_RWS) {
    /* Created roomy (a new stage must hold one entry of each kind), then
     * cut to its real size by rp_shares_update. */
    r = fc_staging_new(c->staging, 16 * ((size_t)FC_STAGING_ADDR_BYTES +
                                         c->block_size),
                       c->block_size, c->rws_n, &v->stage);
    if (r)
      goto out;
  }
  *out = v;
  return 0;
out:
  vol_free(v);
  return r;
}

int
rp_vol_get(struct rp_sim *s, const char *id, struct rp_vol **out)
{
  struct rp_vol *v = s->last_vol;
  size_t i;
  int r;

  if (v && strcmp(v->id, id) == 0) {
    *out = v;
    return 0;
  }
  if (s->nr_vol_slots) {
    for (i = hash_id(id) & (s->nr_vol_slots - 1); s->vol_slots[i];
         i = (i + 1) & (s->nr_vol_slots - 1)) {
      v = s->vols[s->vol_slots[i] - 1];
      if (strcmp(v->id, id) == 0) {
        *out = s->last_vol = v;
        return 0;
      }
    }
  }
  if (s->nr_vols == s->cap_vols) {
    r = grow(s);
    if (r)
      return r;
  }
  r = vol_new(s, id, &v);
  if (r)
    return r;
  s->vols[s->nr_vols++] = v;
  slot_insert(s->vol_slots, s->nr_vol_slots, v);
  /* A newcomer wants its limit until its first window closes; the others
   * make room for it at replacement time. */
  r = rp_shares_update(s);
  if (r)
    return r;
  *out = s->last_vol = v;
  return 0;
}

void
rp_vols_destroy(struct rp_sim *s)
{
  for (size_t i = 0; i < s->nr_vols; i++)
    vol_free(s->vols[i]);
  free(s->vols);
  free(s->vol_slots);
  free(s->demand);
  free(s->shares);
  free(s->victim_cand);
  s->victim_cand = NULL;
  s->vols = NULL;
  s->nr_vols = s->cap_vols = 0;
}
