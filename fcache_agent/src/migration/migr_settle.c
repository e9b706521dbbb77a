/* SPDX-License-Identifier: Apache-2.0 */
/* Settling a live migration that failed after its switchover.
 *
 * From the switch on, the newest copy of a block may be on either host, so
 * after a failure both agents hold the volume, persistently (the volume's
 * "migration" mark): the source neither serves nor writes it back, the
 * destination fails reads of blocks still only on the source.  Settling
 * decides block by block, with the orchestrator relaying the lists
 * (nova_ext.migration.settle, doc/reference/migration.rst):
 *
 *   "missing": the destination has run since the switch and knows exactly
 *     which blocks are still only on the source.  The source writes those
 *     back and forgets everything else; then the origin answers for them
 *     on the destination.
 *   "held": the destination restarted and lost that knowledge.  It lists
 *     the dirty blocks it holds, which are newer than the source's copies;
 *     the source forgets those and writes back every other dirty block.
 *     Sound because a destination never lets a block that was dirty on the
 *     source at the switch reach the origin before the migration completes
 *     (ucache's pinned set): a block it does not hold was never superseded
 *     durably.
 *   "completed": the destination holds everything; the source forgets all.
 *
 * The source writes back before the destination lets the origin answer:
 * the orchestrator ends the source first.  Step "all" runs the whole
 * sequence from either agent, with its peer (migr_settle_peer.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/log.h"
#include "migration.h"

enum settle_mode { SETTLE_MISSING, SETTLE_HELD, SETTLE_COMPLETED };

static const char *const mode_names[] = { "missing", "held", "completed" };

struct settle_ctx {
  struct fc_agent *agent;
  const struct fc_engine_settle_ops *ops;
  const char *mid;
  struct fc_volume *v;
  struct fc_migration *m;     /* this agent's record, if it did not restart */
  bool source;                /* the volume is marked out:<mid> */
};

static int
cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

  return x < y ? -1 : x > y;
}

/* Find the volume and check it belongs to this migration. */
static int
locate(struct fc_agent *agent, json_t *args, struct settle_ctx *c, char *err,
       size_t errlen)
{
  const char *vid = json_string_value(json_object_get(args, "volume_id"));
  char out[80], in[80];
  int r;

  c->agent = agent;
  c->ops = agent->host.ops->migr->settle;
  c->mid = json_string_value(json_object_get(args, "migration_id"));
  if (!vid || !c->mid) {
    snprintf(err, errlen, "settle needs volume_id and migration_id");
    return -EINVAL;
  }
  snprintf(out, sizeof out, "out:%s", c->mid);
  snprintf(in, sizeof in, "in:%s", c->mid);
  pthread_mutex_lock(&agent->host.lock);
  c->v = fc_agent_find_locked(agent, vid);
  if (c->v) {
    c->source = !strcmp(c->v->p.migration, out);
    if (!c->source && c->v->p.migration[0] && strcmp(c->v->p.migration, in)) {
      snprintf(err, errlen, "volume %s belongs to migration %s, not %s", vid,
               c->v->p.migration + (c->v->p.migration[0] == 'o' ? 4 : 3), c->mid);
      c->v = NULL;
      pthread_mutex_unlock(&agent->host.lock);
      return -EINVAL;
    }
  }
  pthread_mutex_unlock(&agent->host.lock);
  if (!c->v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", vid);
    return -ENOENT;
  }
  r = c->ops->usable(&agent->host, c->v, err, errlen);
  if (r)
    return r;
  c->m = fc_migration_find(agent, c->mid);
  if (c->m && c->m->e.vol != c->v) {
    fc_migration_put(c->m);
    c->m = NULL;     /* released or aborted: only the volume's mark counts */
  }
  if (c->m && (c->m->state == FC_MS_SWITCHED || c->m->state == FC_MS_CONNECTED ||
               c->m->state == FC_MS_PREPARED)) {
    snprintf(err, errlen, "migration %s is %s: it has not failed, so there is "
             "nothing to settle (finish or abort it)", c->mid,
             fc_migr_state_name(c->m->state));
    return -EBUSY;
  }
  if (c->m)
    fc_migr_join(c->m);   /* its threads must be done with the volume */
  return 0;
}

static enum settle_mode
dest_mode(const struct settle_ctx *c)
{
  if (!c->v->p.migration[0])
    return SETTLE_COMPLETED;
  if (c->m && c->m->e.role == FC_MIGR_DEST && c->m->dst.switch_received)
    return SETTLE_MISSING;
  return c->ops->dest_exact_after_restart &&
         c->ops->dest_exact_after_restart(&c->agent->host, c->v) ? SETTLE_MISSING :
                                                                   SETTLE_HELD;
}

/* The destination's list, sorted, from the first block after `after`. */
static int
dest_list(struct settle_ctx *c, json_t *args, json_t **result, char *err,
          size_t errlen)
{
  json_t *after_j = json_object_get(args, "after");
  json_int_t limit = json_integer_value(json_object_get(args, "limit"));
  enum settle_mode mode = dest_mode(c);
  uint64_t *list = NULL;
  uint32_t n = 0, first = 0, k = 0;
  json_t *blocks;
  int r = 0;

  if (after_j && (!json_is_integer(after_j) || json_integer_value(after_j) < 0)) {
    snprintf(err, errlen, "after must be a block number");
    return -EINVAL;
  }
  if (limit <= 0 || limit > FC_SETTLE_LIST_MAX)
    limit = FC_SETTLE_LIST_MAX;
  if (mode != SETTLE_COMPLETED)
    r = c->ops->dest_list(&c->agent->host, c->v, mode == SETTLE_MISSING, &list, &n,
                          err, errlen);
  if (r) {
    if (!err[0])
      snprintf(err, errlen, "cannot list blocks: %s", strerror(-r));
    return r;
  }
  if (n)
    qsort(list, n, sizeof *list, cmp_u64);
  if (after_j)
    while (first < n && list[first] <= (uint64_t)json_integer_value(after_j))
      first++;
  blocks = json_array();
  for (uint32_t i = first; blocks && i < n && k < limit; i++, k++)
    json_array_append_new(blocks, json_integer((json_int_t)list[i]));
  free(list);
  *result = json_pack("{s:s, s:s, s:I, s:o, s:b}", "mode", mode_names[mode],
                      "role", "destination", "total", (json_int_t)n, "blocks", blocks,
                      "more", first + k < n);
  return *result ? 0 : -ENOMEM;
}

static int
dest_end(struct settle_ctx *c, json_t *args, json_t **result, char *err,
         size_t errlen)
{
  const char *source = json_string_value(json_object_get(args, "source"));
  enum settle_mode mode = dest_mode(c);
  uint32_t given_up = 0;
  int r = 0;

  /* Only the orchestrator knows whether the source wrote back what this
   * host listed ("released") or is gone for good ("lost"): it must say. */
  if (!source || (strcmp(source, "released") && strcmp(source, "lost"))) {
    snprintf(err, errlen, "end needs source=released (the source wrote back "
             "the listed blocks and released the volume) or source=lost (give "
             "up the blocks only the source had: the origin's older copies "
             "will be read instead)");
    return -EINVAL;
  }
  if (mode != SETTLE_COMPLETED) {
    struct fc_host *host = &c->agent->host;

    r = c->ops->dest_end(host, c->v, mode == SETTLE_MISSING, !strcmp(source, "lost"),
                         &given_up, err, errlen);
    if (r)
      return r;
    pthread_mutex_lock(&host->lock);
    c->v->p.migration[0] = '\0';
    explicit_bzero(c->v->p.settle_secret, sizeof c->v->p.settle_secret);
    c->v->p.settle_peer[0] = '\0';
    r = fc_volume_params_save(host->volumes_dir, &c->v->p, err, errlen);
    if (!r && mode == SETTLE_HELD) {
      c->v->error[0] = '\0';
      r = c->ops->dest_resume(host, c->v, err, errlen);
    }
    pthread_mutex_unlock(&host->lock);
    if (r)
      return r;
  }
  if (c->m) {
    pthread_mutex_lock(&c->m->lock);
    if (c->m->state == FC_MS_FAILED)
      c->m->state = FC_MS_SETTLED;
    pthread_mutex_unlock(&c->m->lock);
  }
  if (given_up)
    log_error("migration %s: volume %s settled by force: %u blocks whose newest "
              "copy was on the source now read from the origin", c->mid,
              c->v->p.id, given_up);
  else
    log_info("migration %s: volume %s settled on the destination (%s)", c->mid,
             c->v->p.id, mode_names[mode]);
  *result = json_pack("{s:s, s:s, s:s, s:i}", "migration_id", c->mid,
                      "volume_id", c->v->p.id, "mode", mode_names[mode],
                      "given_up_blocks", (int)given_up);
  return *result ? 0 : -ENOMEM;
}

/* Source: write back (or forget) each listed block now. */
static int
source_blocks(struct settle_ctx *c, json_t *args, bool write_back, json_t **result,
              char *err, size_t errlen)
{
  json_t *blocks = json_object_get(args, "blocks");
  json_t *missing = json_array();
  uint32_t done = 0;
  size_t i;
  json_t *b;
  int r = 0;

  if (!json_is_array(blocks) || json_array_size(blocks) > FC_SETTLE_LIST_MAX) {
    snprintf(err, errlen, "blocks must be a list of at most %u block numbers",
             FC_SETTLE_LIST_MAX);
    json_decref(missing);
    return -EINVAL;
  }
  json_array_foreach(blocks, i, b) {
    json_int_t ob = json_integer_value(b);

    if (!json_is_integer(b) || ob < 0) {
      snprintf(err, errlen, "blocks[%zu] is not a block number", i);
      r = -EINVAL;
      break;
    }
    r = c->ops->source_block(c->v, to_oblock((uint64_t)ob), write_back);
    if (write_back && (r == -ENOENT || r == 1 || r == -ERANGE)) {
      /* The destination needs it and this host has no dirty copy. */
      json_array_append_new(missing, json_integer(ob));
      r = 0;
      continue;
    }
    if (r) {
      snprintf(err, errlen, "cannot %s block %lld of volume %s: %s",
               write_back ? "write back" : "forget", (long long)ob, c->v->p.id,
               strerror(-r));
      break;
    }
    done++;
  }
  if (!r && (done || !write_back))
    r = c->ops->source_sync(c->v, write_back);
  if (r) {
    if (!err[0])
      snprintf(err, errlen, "volume %s: %s", c->v->p.id, strerror(-r));
    json_decref(missing);
    return r;
  }
  *result = json_pack("{s:s, s:i, s:o}", "role", "source", "done", (int)done,
                      "missing", missing);
  return *result ? 0 : -ENOMEM;
}

/* Source: the rest is stale (dropped) or the newest copy (written back);
 * then the volume leaves this host. */
static int
source_release(struct settle_ctx *c, json_t *args, json_t **result, char *err,
               size_t errlen)
{
  const char *rest = json_string_value(json_object_get(args, "rest"));
  char id[FC_VOLUME_ID_MAX + 1];
  bool write_rest;
  int r;

  if (!rest || (strcmp(rest, "drop") && strcmp(rest, "writeback"))) {
    snprintf(err, errlen, "rest must be drop or writeback");
    return -EINVAL;
  }
  write_rest = !strcmp(rest, "writeback");
  snprintf(id, sizeof id, "%s", c->v->p.id);   /* detach frees the volume */
  pthread_mutex_lock(&c->agent->host.lock);
  if (c->m) {
    /* A migration-finish forgets the volume without host.lock: it owns
     * the release until it is done. */
    pthread_mutex_lock(&c->m->lock);
    r = c->m->src.releasing_source ? -EBUSY : 0;
    pthread_mutex_unlock(&c->m->lock);
    if (r) {
      pthread_mutex_unlock(&c->agent->host.lock);
      snprintf(err, errlen, "migration %s is being finished: its source "
               "releases volume %s itself", c->mid, id);
      return r;
    }
  }
  r = write_rest ? 0 : c->ops->source_forget_all(c->v);
  c->v->releasing = true;
  if (r == 0)
    r = fc_agent_detach_locked(c->agent, id, err, errlen);
  else
    snprintf(err, errlen, "cannot forget the cache of volume %s: %s", id,
             strerror(-r));
  if (r)
    c->v->releasing = false;
  else
    c->v = NULL;
  pthread_mutex_unlock(&c->agent->host.lock);
  if (r)
    return r;
  if (c->m) {
    pthread_mutex_lock(&c->m->lock);
    c->m->e.vol = NULL;
    if (c->m->state == FC_MS_FAILED)
      c->m->state = FC_MS_SETTLED;
    pthread_mutex_unlock(&c->m->lock);
  }
  log_info("migration %s of volume %s: source released its copy (%s the rest)",
           c->mid, id, write_rest ? "writing back" : "dropping");
  *result = json_pack("{s:s, s:s, s:s}", "migration_id", c->mid, "role", "source",
                      "rest", rest);
  return *result ? 0 : -ENOMEM;
}

static int settle_step(struct settle_ctx *c, const char *step, json_t *args,
                       json_t **result, char *err, size_t errlen);

int
fc_migr_settle_step(struct fc_agent *agent, const char *step, json_t *args,
                    json_t **result, char *err, size_t errlen)
{
  struct settle_ctx c = { 0 };
  int r;

  r = locate(agent, args, &c, err, errlen);
  if (!r)
    r = settle_step(&c, step, args, result, err, errlen);
  fc_migration_put(c.m);
  return r;
}

static int
settle_step(struct settle_ctx *c, const char *step, json_t *args,
            json_t **result, char *err, size_t errlen)
{
  if (!strcmp(step, "list") || !strcmp(step, "end")) {
    if (c->source) {
      snprintf(err, errlen, "this agent is the source of migration %s; %s is a "
               "destination step", c->mid, step);
      return -EINVAL;
    }
    return step[0] == 'l' ? dest_list(c, args, result, err, errlen) :
                            dest_end(c, args, result, err, errlen);
  }
  if (!strcmp(step, "writeback") || !strcmp(step, "drop") ||
      !strcmp(step, "release")) {
    if (!c->source) {
      snprintf(err, errlen, "volume %s is not held by this agent as the source of "
               "migration %s; %s is a source step", c->v->p.id, c->mid, step);
      return -EINVAL;
    }
    const char *rest = json_string_value(json_object_get(args, "rest"));

    if (c->ops->source_no_writeback &&
        (!strcmp(step, "writeback") ||
         (!strcmp(step, "release") && rest && !strcmp(rest, "writeback")))) {
      snprintf(err, errlen, "volume %s: %s", c->v->p.id, c->ops->source_no_writeback);
      return -ENOTSUP;
    }
    if (!strcmp(step, "release"))
      return source_release(c, args, result, err, errlen);
    return source_blocks(c, args, step[0] == 'w', result, err, errlen);
  }
  snprintf(err, errlen, "unknown settle step %.40s", step);
  return -EINVAL;
}
