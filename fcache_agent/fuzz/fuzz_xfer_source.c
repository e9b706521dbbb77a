/* SPDX-License-Identifier: Apache-2.0 */
/* The migration stream, as a source agent receives it from the
 * destination: WELCOME, then FETCH, READ, CREDIT, ACK, COMPLETE and ERROR
 * frames (migration/migr_source.c's receiver and sender, the ucache
 * engine's reads behind FETCH and READ).
 *
 * Each input attaches a volume on a real agent, registers an outgoing
 * migration of it (fc_migration_outgoing) towards a listening socket of the
 * harness, and starts it (fc_migration_start: connect, HELLO, WELCOME),
 * with the stream's encryption off (migration_tls = none), which is what
 * the stream carries inside TLS.  A thread of the harness plays the
 * destination: it accepts, sends WELCOME and the input's frames, then
 * reads whatever the source sends until the source hangs up.  Input:
 *   byte 0:  the strategy (value & 0x0f, % 6); bit 7: call switchover
 *            once started (ACK and COMPLETE mean more then); bit 6:
 *            WELCOME says "switch_ack" (the switchover then waits for
 *            SWITCHED, or for the stream's end); bit 5: WELCOME says
 *            "background": false (no background copy, DONE at once);
 *            bit 4: WELCOME says "ack_fetched" (ACKs may name blocks
 *            served dirty to a FETCH)
 *   then records as in fuzz_xfer.c (u8 type, u16 flags, u16 length,
 *   payload; sealed into frames, type bit 7: raw bytes).
 */
#include <netinet/in.h>
#include <pthread.h>
#include <time.h>

#include "fuzz_agent.h"
#include "fuzz_frames.h"

static struct fc_agent *agent;
static int listen_fd;
static char listen_addr[64];

static const char *const strategies[] = {
  "none", "cachemior", "firepan", "firepan_if", "cloudcache", "hybrid",
};

struct peer {
  uint8_t *stream;
  size_t len;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct sockaddr_in a = { .sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t alen = sizeof a;

  agent = fuzz_agent_open();
  listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) ||
      listen(listen_fd, 4) || getsockname(listen_fd, (struct sockaddr *)&a, &alen))
    abort();
  snprintf(listen_addr, sizeof listen_addr, "127.0.0.1:%u", ntohs(a.sin_port));
  return 0;
}

/* WELCOME, then the stream the input describes (caller frees). */
static uint8_t *encode(const uint8_t *data, size_t size, size_t *out_len)
{
  char welcome[128];
  size_t wlen = (size_t)snprintf(welcome, sizeof welcome, "{\"credits\": 256%s%s%s}",
                                 data[0] & 0x40 ? ", \"switch_ack\": true" : "",
                                 data[0] & 0x20 ? ", \"background\": false" : "",
                                 data[0] & 0x10 ? ", \"ack_fetched\": true" : "");
  uint8_t *out = malloc(size * 4 + 128), *p = out;

  if (!out)
    abort();
  fc_xfer_encode_header(p, FC_XFER_WELCOME, 0, welcome, (uint32_t)wlen);
  memcpy(p + FC_XFER_HEADER_SIZE, welcome, wlen);
  p += FC_XFER_HEADER_SIZE + wlen;
  p = fuzz_frames(p, data + 1, size - 1);
  *out_len = (size_t)(p - out);
  return out;
}

/* The destination: send everything, then drain until the source closes,
 * so that the source never blocks on a full socket. */
static void *destination(void *arg)
{
  struct peer *p = arg;
  int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
  uint8_t sink[65536];

  if (fd < 0)
    return NULL;
  fuzz_send(fd, p->stream, p->len);
  shutdown(fd, SHUT_WR);
  while (recv(fd, sink, sizeof sink, 0) > 0)
    ;
  close(fd);
  return NULL;
}

static bool settled(struct fc_migration *m)
{
  return m->state == FC_MS_COMPLETED || m->state == FC_MS_FAILED ||
         m->state == FC_MS_ABORTED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fc_attach_request req = {
    .volume_id = "vol-1", .origin = fuzz_origin,
    .cache_size = FUZZ_CACHE_BLOCKS / 2 * FUZZ_CACHE_BLOCK,
    .write_policy = FC_WRITE_BACK,
  };
  struct fc_volume *v;
  struct fc_migration *m;
  struct peer p;
  pthread_t t;
  json_t *args, *result = NULL;
  char err[512];

  if (size < 1)
    return 0;
  pthread_mutex_lock(&agent->host.lock);
  if (fc_agent_attach_locked(agent, &req, &v, err, sizeof err)) {
    fprintf(stderr, "fuzz: attach: %s\n", err);
    abort();
  }
  pthread_mutex_unlock(&agent->host.lock);
  args = json_pack("{s:s, s:s, s:s, s:s, s:s}", "migration_id", "m-1",
                   "volume_id", "vol-1",
                   "token", "0123456789abcdef0123456789abcdef"
                            "0123456789abcdef0123456789abcdef",
                   "strategy", strategies[(data[0] & 0x0f) % 6],
                   "destination", listen_addr);
  if (fc_migration_outgoing(agent, args, &result, err, sizeof err)) {
    fprintf(stderr, "fuzz: migration-outgoing: %s\n", err);
    abort();
  }
  json_decref(args);
  json_decref(result);
  m = fc_migration_find(agent, "m-1");

  p.stream = encode(data, size, &p.len);
  if (pthread_create(&t, NULL, destination, &p))
    abort();
  if (fc_migration_start(m, err, sizeof err) == 0 && (data[0] & 0x80))
    (void)fc_migration_switchover(m, err, sizeof err);
  /* The receiver reads the stream to its end (or to the frame that breaks
   * the rules) and the migration then fails or completes.  A source that
   * neither does within 10 s is a hang the fuzzer should report. */
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < 100 && !settled(m); i++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&m->cond, &m->lock, &ts);
  }
  if (!settled(m))
    abort();
  pthread_mutex_unlock(&m->lock);
  fc_migration_put(m);              /* fc_migration_find's reference */
  agent = fuzz_agent_reset(agent);   /* closes the source's end */
  pthread_join(t, NULL);
  free(p.stream);
  return 0;
}
