/* SPDX-License-Identifier: Apache-2.0 */
/* A real agent for the harnesses whose input reaches it through its
 * control operations or a migration stream: the ucache engine on a cache
 * of 64 blocks of 4 KiB in the scratch directory, one 1 MiB file that
 * volumes may use as their origin, no control socket and no migration
 * listener (the harness hands its input to the code behind them).
 *
 * fuzz_agent_reset() closes the agent and opens a fresh one over an empty
 * state directory, so that what one input attached or registered cannot
 * change how the next one runs (a crash must reproduce from its input
 * alone). */
#ifndef FCACHE_FUZZ_AGENT_H
#define FCACHE_FUZZ_AGENT_H

#include <dirent.h>

#include "fuzz.h"
#include "agent/agent.h"
#include "engine/engine.h"
#include "migration/migration.h"

#define FUZZ_CACHE_BLOCK 4096u
#define FUZZ_CACHE_BLOCKS 64u

static struct fc_config fuzz_cfg;
static char fuzz_origin[512];

static inline void fuzz_empty_dir(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *de;
  char p[1024];

  if (!d)
    return;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  closedir(d);
}

/* The agent's configuration (fuzz_cfg) and its scratch origin, once. */
static inline void fuzz_agent_config(void)
{
  const char *dir = fuzz_setup();
  char err[1024];
  int fd;

  if (!fuzz_origin[0]) {
    char conf[2048];
    int n;

    /* Through a configuration file, as the agent gets it: a key that this
     * tree's agent does not know yet (origin_prefixes, while the origin
     * policy is new) is left out rather than failing the set-up. */
    snprintf(fuzz_origin, sizeof fuzz_origin, "%s/origin.img", fuzz_setup_tmp());
    n = snprintf(conf, sizeof conf,
                 "[agent]\nstate_dir = %s/state\ncache_path = %s/cache.img\n"
                 "export_dir = %s/exports\ncache_size = %u\nblock_size = %u\n"
                 "nbd_threads = 1\nmigration_listen = 127.0.0.1:1\n"
                 "migration_tls = none\n", dir, dir, dir,
                 FUZZ_CACHE_BLOCKS * FUZZ_CACHE_BLOCK, FUZZ_CACHE_BLOCK);
    snprintf(conf + n, sizeof conf - (size_t)n, "origin_prefixes = %s/\n",
             fuzz_setup_tmp());
    fc_config_defaults(&fuzz_cfg);
    if (fc_config_load(fuzz_file("agent.conf", (const uint8_t *)conf, strlen(conf)),
                       &fuzz_cfg, err, sizeof err)) {
      conf[n] = '\0';
      fc_config_defaults(&fuzz_cfg);
      if (fc_config_load(fuzz_file("agent.conf", (const uint8_t *)conf, strlen(conf)),
                         &fuzz_cfg, err, sizeof err)) {
        fprintf(stderr, "fuzz: agent configuration: %s\n", err);
        abort();
      }
    }
    fd = open(fuzz_origin, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
      abort();
    close(fd);
  }
}

static inline struct fc_agent *fuzz_agent_open(void)
{
  struct fc_agent *agent;
  char err[1024], path[600];

  fuzz_agent_config();
  /* Nothing of the previous agent: no volume, no metadata. */
  snprintf(path, sizeof path, "%s/volumes", fuzz_cfg.state_dir);
  fuzz_empty_dir(path);
  fuzz_empty_dir(fuzz_cfg.state_dir);
  fuzz_empty_dir(fuzz_cfg.export_dir);
  if (fc_agent_open(&fuzz_cfg, fc_engine_find("ucache"), &agent, err, sizeof err)) {
    fprintf(stderr, "fuzz: cannot open the agent: %s\n", err);
    abort();
  }
  return agent;
}

static inline struct fc_agent *fuzz_agent_reset(struct fc_agent *agent)
{
  fc_migrations_stop(agent);
  fc_agent_close(agent);
  return fuzz_agent_open();
}

#endif
