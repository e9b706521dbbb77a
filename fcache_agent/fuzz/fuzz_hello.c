/* SPDX-License-Identifier: Apache-2.0 */
/* The migration listener: what anyone who can reach migration_listen
 * sends first.  With migration_tls = none (what TLS carries otherwise),
 * the listener's own thread reads the HELLO frame within its deadline,
 * parses its JSON, checks the migration id, token and volume
 * (migration/migr_listen.c) and, if they match, hands the stream to the
 * destination, which reads the rest (as in fuzz_xfer.c).
 *
 * A real agent listens on a loopback port and holds one incoming
 * migration, m-1 of vol-1 (hybrid), whose token the seeds know.  The input
 * is sent over TCP as frame records (fuzz_frames.h) and the write side
 * closed; the harness then reads until the agent closes the connection or
 * the migration is over.  The agent is renewed only after an input that
 * used the migration's token.  Settle sessions (their HELLO says
 * "settle": true) are refused before their first STEP here: the volume
 * keeps a known settle secret, but its migration has not failed.
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>

#include "fuzz_agent.h"
#include "fuzz_frames.h"

#define TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SETTLE_SECRET "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"

static struct fc_agent *agent;
static struct fc_migration *mig;
static struct sockaddr_in addr = { .sin_family = AF_INET };

static void start(void)
{
  json_t *args, *result = NULL;
  char err[512];

  if (fc_migrations_start(agent, err, sizeof err)) {
    fprintf(stderr, "fuzz: migration listener: %s\n", err);
    abort();
  }
  args = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "migration_id", "m-1",
                   "volume_id", "vol-1", "token", TOKEN, "strategy", "hybrid",
                   "origin", fuzz_origin, "write_policy", "write_back",
                   "cache_size", (json_int_t)(FUZZ_CACHE_BLOCKS / 2 * FUZZ_CACHE_BLOCK));
  if (fc_migration_incoming(agent, args, &result, err, sizeof err)) {
    fprintf(stderr, "fuzz: migration-incoming: %s\n", err);
    abort();
  }
  json_decref(args);
  json_decref(result);
  mig = fc_migration_find(agent, "m-1");
  /* What a source's HELLO would have made it keep: settle HELLOs then
   * reach the secret's check and the migration's state. */
  pthread_mutex_lock(&agent->host.lock);
  snprintf(mig->e.vol->p.settle_secret, sizeof mig->e.vol->p.settle_secret,
           "%s", SETTLE_SECRET);
  snprintf(mig->e.vol->p.settle_peer, sizeof mig->e.vol->p.settle_peer,
           "127.0.0.1:9");
  pthread_mutex_unlock(&agent->host.lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  socklen_t alen = sizeof addr;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  /* A free port for the listener: the kernel's choice, released again
   * (the listener sets SO_REUSEADDR). */
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) ||
      getsockname(fd, (struct sockaddr *)&addr, &alen))
    abort();
  close(fd);
  fuzz_agent_config();
  snprintf(fuzz_cfg.migration_listen, sizeof fuzz_cfg.migration_listen,
           "127.0.0.1:%u", ntohs(addr.sin_port));
  agent = fuzz_agent_open();
  start();
  return 0;
}

static bool over(void)
{
  bool r;

  pthread_mutex_lock(&mig->lock);
  r = !mig->connected && mig->state != FC_MS_PREPARED;
  pthread_mutex_unlock(&mig->lock);
  return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t *stream = malloc(size * 4 + 16), sink[4096];
  size_t len;
  int fd, waited = 0;

  if (!stream)
    abort();
  len = (size_t)(fuzz_frames(stream, data, size) - stream);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr))
    abort();
  fuzz_send(fd, stream, len);
  free(stream);
  shutdown(fd, SHUT_WR);
  /* Until the agent hangs up (a refusal, or the destination giving up on
   * the stream) or the migration is over; 10 s of neither is a hang. */
  for (;;) {
    struct pollfd p = { .fd = fd, .events = POLLIN };

    if (poll(&p, 1, 100) > 0 && recv(fd, sink, sizeof sink, 0) <= 0)
      break;
    if (over())
      break;
    if (++waited > 100)
      abort();
  }
  close(fd);
  pthread_mutex_lock(&mig->lock);
  waited = mig->token_used || mig->state != FC_MS_PREPARED;
  pthread_mutex_unlock(&mig->lock);
  if (waited) {
    while (!over())
      usleep(1000);
    /* The harness's reference (fc_migration_find) goes before the agent. */
    fc_migration_put(mig);
    agent = fuzz_agent_reset(agent);
    start();
  }
  return 0;
}
