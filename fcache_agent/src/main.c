/* fcache-agent: the per-host data-plane daemon.  Runs in the foreground;
 * SIGTERM or SIGINT shut it down cleanly (exports stopped, cache map
 * saved). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "engine/engine.h"
#include "migration/migration.h"
#include "common/config.h"
#include "control/control.h"
#include "control/control_ops.h"
#include "control/metrics.h"
#include "common/log.h"

static void
usage(FILE *f)
{
  fprintf(f, "usage: fcache-agent --config FILE\n"
             "       fcache-agent --version\n"
             "Runs in the foreground; SIGTERM/SIGINT stop it cleanly.\n");
}

int
main(int argc, char **argv)
{
  static const struct option longopts[] = {
    { "config", required_argument, NULL, 'c' },
    { "version", no_argument, NULL, 'V' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *config_path = NULL;
  struct fc_config cfg;
  const struct fc_engine_ops *engine;
  struct fc_agent *agent = NULL;
  struct fc_control *ctl = NULL;
  char err[1024] = "";
  sigset_t stop_signals;
  int c, sig, r;

  while ((c = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
    switch (c) {
    case 'c': config_path = optarg; break;
    case 'V': printf("fcache-agent %s\n", FC_VERSION); return 0;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!config_path || optind != argc) {
    usage(stderr);
    return 2;
  }
  fc_config_defaults(&cfg);
  r = fc_config_load(config_path, &cfg, err, sizeof err);
  if (r) {
    fprintf(stderr, "fcache-agent: %s\n", err);
    return 1;
  }
  fc_log_setup(cfg.log_target, cfg.log_level);

  /* Every thread inherits this mask, so the signals reach only sigwait()
   * below and a shutdown never runs inside a signal handler. */
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  engine = fc_engine_find(cfg.engine);
  if (!engine) {
    log_error("cannot start: engine '%s' is not available in this build; use engine = "
              "ucache or dmcache", cfg.engine);
    return 1;
  }
  r = fc_agent_open(&cfg, engine, &agent, err, sizeof err);
  if (r) {
    log_error("cannot start: %s", err);
    return 1;
  }
  r = fc_migrations_start(agent, err, sizeof err);
  if (r) {
    log_error("cannot start: %s", err);
    fc_agent_close(agent);
    return 1;
  }
  r = fc_metrics_start(agent, &agent->metrics, err, sizeof err);
  if (r) {
    log_error("cannot start: %s", err);
    fc_migrations_stop(agent);
    fc_agent_close(agent);
    return 1;
  }
  ctl = fc_control_start(cfg.control_socket, cfg.control_group,
                         cfg.control_admin_group,
                         fc_agent_control_ops, agent);
  if (ctl)
    fc_control_set_idle_timeout(ctl, cfg.control_idle_timeout_s);
  if (!ctl) {
    log_error("cannot open control socket %s: %s", cfg.control_socket, strerror(errno));
    fc_metrics_stop(agent->metrics);
    fc_migrations_stop(agent);
    fc_agent_close(agent);
    return 1;
  }
  log_info("fcache-agent %s ready: engine %s, cache %s (%llu bytes, %u-byte blocks), "
           "control %s", FC_VERSION, cfg.engine, cfg.cache_path,
           (unsigned long long)cfg.cache_size, cfg.block_size, cfg.control_socket);

  if (sigwait(&stop_signals, &sig) == 0)
    log_info("received %s, shutting down", strsignal(sig));
  fc_control_stop(ctl);
  /* Before the volumes go: the sampler reads them. */
  fc_metrics_stop(agent->metrics);
  agent->metrics = NULL;
  fc_migrations_stop(agent);
  r = fc_agent_close(agent);
  return r ? 1 : 0;
}
