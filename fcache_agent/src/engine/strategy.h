/* SPDX-License-Identifier: Apache-2.0 */
/* How a live migration moves a volume's cache: each strategy as a
 * descriptor of what it does at each phase.  The migration layer and the
 * engines read these properties and never ask which strategy it is, so
 * adding one is a file, strategy_<name>.c, defining its descriptor, and
 * its line in strategy.c's table (doc/contributor/design.rst).
 *
 * The phases (doc/reference/migration.rst): start (the source connects;
 * the VM still runs there), the switchover (the VM pauses on the source
 * and resumes on the destination), and what comes after it until the
 * destination says COMPLETE. */
#ifndef FCACHE_STRATEGY_H
#define FCACHE_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>

/* Index into the table; volumes, migrations and the control socket carry
 * the name, never the number. */
enum fc_strategy {
  FC_STRAT_NONE = 0,
  FC_STRAT_CACHEMIOR,
  FC_STRAT_FIREPAN,
  FC_STRAT_FIREPAN_IF,
  FC_STRAT_CLOUDCACHE,
  FC_STRAT_HYBRID,
  FC_STRAT_COUNT,
};

/* What the source's SWITCH carries: block ids, hottest first. */
enum fc_switch_list {
  FC_SWITCH_LIST_NONE,
  FC_SWITCH_LIST_ALL,           /* every cached block */
  FC_SWITCH_LIST_DIRTY,         /* the dirty ones */
};

struct fc_strategy_desc {
  const char *name;
  /* One line for operators (the agent publishes it with the rest). */
  const char *summary;
  /* Start copies the whole cache, the VM paused by the caller and the
   * source frozen, before the switchover: the destination is complete
   * when the VM resumes there, and the copy is downtime. */
  bool copy_before_switch;
  /* The destination's VM reads the origin for what it misses from the
   * switch on, before any copy holds the source's dirty data: the source
   * writes its dirty blocks back first, and that is downtime. */
  bool flush_at_switch;
  enum fc_switch_list list;
  /* The listed blocks are read from the origin by the destination after
   * the switch (the hot list), rather than fetched from the source. */
  bool preload;
  /* A listed block the VM misses on is fetched from the source's cache
   * at once; the source must stay until the destination holds it.  The
   * kernel engine cannot hold a miss while a block crosses the network. */
  bool on_demand;
  /* The source sends its cached blocks after the switch, in the
   * background, under the migration's rate limit. */
  bool background_copy;
  /* CloudCache's background copy (§5.2): what the source agent's
   * cloudcache_variant names (by default the reuse working set, most
   * recent first, with every dirty block), and the source frees each
   * clean block once sent (the origin holds it too) as it frees a dirty
   * one once the destination acknowledged it durable. */
  bool background_variant;
  /* Until the copy ends the destination's VM bypasses its cache, and
   * every block it writes meanwhile is invalidated in the arriving copy
   * (FirepanIF's filter). */
  bool invalidation_filter;
  /* Nothing uses the copy before it ends, so it may arrive in the cache
   * device's order (a sequential read at the source) and be put in the
   * hot list's order afterwards. */
  bool copy_may_reorder;
};

const struct fc_strategy_desc *fc_strategy(enum fc_strategy s);
const char *fc_strategy_name(enum fc_strategy s);
int fc_strategy_parse(const char *s, enum fc_strategy *out);
/* "none, cachemior, ...": the names fc_strategy_parse takes, for a
 * refusal's message. */
void fc_strategy_names(char *buf, size_t len);

/* The descriptors, each in its own file. */
extern const struct fc_strategy_desc fc_strategy_none;
extern const struct fc_strategy_desc fc_strategy_cachemior;
extern const struct fc_strategy_desc fc_strategy_firepan;
extern const struct fc_strategy_desc fc_strategy_firepan_if;
extern const struct fc_strategy_desc fc_strategy_cloudcache;
extern const struct fc_strategy_desc fc_strategy_hybrid;

#endif
