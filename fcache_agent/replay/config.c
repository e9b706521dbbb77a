/* SPDX-License-Identifier: Apache-2.0 */
/* The replayer's settings: defaults (the paper's), validation, names. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "replay_priv.h"
#include "common/enum_names.h"

void
fc_replay_config_default(struct fc_replay_config *c)
{
  memset(c, 0, sizeof *c);
  c->policy = FC_REPLAY_RWS;
  c->block_size = 4096;
  c->rws_n = 1;
  c->staging = FC_STAGING_HYBRID;
  c->staging_fraction = 0.01;
  c->predictor = FC_PRED_EXP_SELF;
  c->outlier_n = 20;
  c->outlier_lambda = 5;
  c->headroom = 0.10;
  c->spare = FC_SPARE_PROPORTIONAL;
  c->window_s = 3600;
  c->enforce = FC_ENFORCE_REPLACEMENT;
}

#define FAIL(...) do { snprintf(err, len, __VA_ARGS__); return -EINVAL; } while (0)

int
fc_replay_config_check(const struct fc_replay_config *c, char *err, size_t len)
{
  if ((unsigned)c->policy > FC_REPLAY_HEC)
    FAIL("unknown policy");
  if (c->block_size < 512 || (c->block_size & (c->block_size - 1)))
    FAIL("block size %u: a power of two >= 512", c->block_size);
  if (c->cache_blocks < 1 || c->cache_blocks >= CBLOCK_NONE)
    FAIL("cache size: 1 to %u blocks of %u bytes", CBLOCK_NONE - 1,
         c->block_size);
  if (c->volume_limit_blocks < 1)
    FAIL("volume limit: at least one block");
  if (c->rws_n < 1 || c->rws_n > FC_RWS_MAX_N)
    FAIL("--rws-n %u out of range 1..%u", c->rws_n, FC_RWS_MAX_N);
  if (!(c->staging_fraction >= 0.001 && c->staging_fraction <= 0.01))
    FAIL("--staging-fraction %g out of range 0.001..0.01 (0.1-1 %% of the "
         "cache)", c->staging_fraction);
  if (!(c->window_s > 0) || !isfinite(c->window_s))
    FAIL("--window %g: seconds, > 0", c->window_s);
  if (c->outlier_n < 1 || c->outlier_n > FC_OUTLIER_MAX_N || !(c->outlier_lambda > 1))
    FAIL("outlier filter: n 1..%u, lambda > 1", FC_OUTLIER_MAX_N);
  if (!(c->headroom >= 0) || !isfinite(c->headroom))
    FAIL("--headroom %g: >= 0", c->headroom);
  if ((unsigned)c->enforce > FC_ENFORCE_STRICT)
    FAIL("unknown enforcement");
  return 0;
}

static const char *const policy_names[] = {
  [FC_REPLAY_LRU] = "lru",
  [FC_REPLAY_NOALLOC] = "noalloc",
  [FC_REPLAY_WSS] = "wss",
  [FC_REPLAY_RWS] = "rws",
  [FC_REPLAY_HEC] = "hec",
};

static const char *const enforce_names[] = {
  [FC_ENFORCE_REPLACEMENT] = "replacement",
  [FC_ENFORCE_STRICT] = "strict",
};

FC_DEFINE_ENUM_NAMES(fc_replay_policy, enum fc_replay_policy, policy_names)

FC_DEFINE_ENUM_NAMES(fc_replay_enforce, enum fc_replay_enforce, enforce_names)
