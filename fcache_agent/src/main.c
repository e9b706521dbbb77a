/* SPDX-License-Identifier: Apache-2.0 */
/* fcache-agent: the per-host data-plane daemon.  Runs in the foreground;
 * SIGTERM or SIGINT shut it down cleanly (exports stopped, cache map
 * saved). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "engine/engine.h"
#include "migration/migration.h"
#include "common/config.h"
#include "control/control.h"
#include "control/control_ops.h"
#include "control/metrics.h"
#include "common/log.h"
#include "common/sd_notify.h"
#include "common/version.h"

/* Waits for SIGTERM or SIGINT and returns it.  Under a systemd watchdog
 * (WatchdogSec=), wakes at half the interval to send WATCHDOG=1: a main
 * thread stuck elsewhere, or a process stopped, then misses the deadline
 * and systemd restarts the agent.  What the ping proves is that the
 * process runs and its signal handling works; the control socket's own
 * liveness is what nova-compute's calls check. */
static int
wait_for_stop(const sigset_t *stop_signals, const struct fc_notify *notify)
{
  uint64_t interval = fc_notify_watchdog_interval_usec(notify);
  struct timespec ts;
  int sig, r;

  if (interval == 0)
    return sigwait(stop_signals, &sig) == 0 ? sig : SIGTERM;
  ts.tv_sec = (time_t)(interval / 1000000u);
  ts.tv_nsec = (long)(interval % 1000000u) * 1000;
  for (;;) {
    r = fc_notify_send(notify, "WATCHDOG=1");
    if (r < 0)
      log_warning("cannot send WATCHDOG=1 to systemd: %s", strerror(-r));
    sig = sigtimedwait(stop_signals, NULL, &ts);
    if (sig > 0)
      return sig;
    if (errno != EAGAIN && errno != EINTR)
      return SIGTERM;
  }
}

static void
usage(FILE *f)
{
  fprintf(f, "usage: fcache-agent --config FILE\n"
             "       fcache-agent --version\n"
             "       fcache-agent --control-schema\n"
             "Runs in the foreground; SIGTERM/SIGINT stop it cleanly.\n");
}

/* The control operations and their arguments as JSON, for
 * tools/gen-control-schema.py: nova_ext's copy is made from this. */
static int
print_control_schema(void)
{
  json_t *ops = fc_control_ops_json(fc_agent_control_ops);
  int r = ops ? json_dumpf(ops, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) : -1;

  json_decref(ops);
  if (r == 0)
    putchar('\n');
  return r == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
  static const struct option longopts[] = {
    { "config", required_argument, NULL, 'c' },
    { "version", no_argument, NULL, 'V' },
    { "control-schema", no_argument, NULL, 'S' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *config_path = NULL;
  struct fc_config cfg;
  const struct fc_engine_ops *engine;
  struct fc_agent *agent = NULL;
  struct fc_control *ctl = NULL;
  char err[1024] = "";
  struct fc_notify notify;
  sigset_t stop_signals;
  int c, sig, r;

  while ((c = getopt_long(argc, argv, "c:VSh", longopts, NULL)) != -1) {
    switch (c) {
    case 'c': config_path = optarg; break;
    case 'V': printf("%s\n", fc_version()); return 0;
    case 'S': return print_control_schema();
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
           "control %s", fc_version(), cfg.engine, cfg.cache_path,
           (unsigned long long)cfg.cache_size, cfg.block_size, cfg.control_socket);

  /* READY=1 only now: a Type=notify unit's dependents (nova-compute) start
   * once the control socket answers.  A bad NOTIFY_SOCKET is logged, not
   * fatal: the agent serves its guests all the same. */
  r = fc_notify_open(&notify, getenv("NOTIFY_SOCKET"), getenv("WATCHDOG_USEC"),
                     getenv("WATCHDOG_PID"), getpid());
  if (r < 0)
    log_warning("cannot use NOTIFY_SOCKET=%s WATCHDOG_USEC=%s: %s",
                getenv("NOTIFY_SOCKET"),
                getenv("WATCHDOG_USEC") ? getenv("WATCHDOG_USEC") : "",
                strerror(-r));
  r = fc_notify_send(&notify, "READY=1\nSTATUS=serving, control socket listening");
  if (r < 0)
    log_warning("cannot send READY=1 to systemd: %s", strerror(-r));

  sig = wait_for_stop(&stop_signals, &notify);
  log_info("received %s, shutting down", strsignal(sig));
  fc_notify_send(&notify, "STOPPING=1");
  fc_notify_close(&notify);
  fc_control_stop(ctl);
  /* Before the volumes go: the sampler reads them. */
  fc_metrics_stop(agent->metrics);
  agent->metrics = NULL;
  fc_migrations_stop(agent);
  r = fc_agent_close(agent);
  return r ? 1 : 0;
}
