/* The listener on migration_listen: accepts a transfer stream, reads its
 * HELLO and hands it to the migration it authenticates for.  A stream
 * without a valid token, with a token already used, or for another volume
 * is refused; the peer learns only that it was refused, the log says why. */
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <fcntl.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/log.h"
#include "migration.h"
#include "xfer_tls.h"

#define HELLO_TIMEOUT_S 5
/* Handshakes in progress at once.  Each ends within HELLO_TIMEOUT_S, so a
 * peer that drips bytes holds a slot for that long and no longer, and a
 * flood of connections costs at most this many threads. */
#define MAX_HANDSHAKES 64
/* Of which from any one address: a host that floods or drips cannot keep
 * the others' sources out.  A VM with several volumes opens a stream per
 * volume at once, and Nova may migrate more than one VM between two hosts:
 * 4 made 8 concurrent migrations between the same two agents fail about
 * one in 30 (the soak); 16 holds two such VMs of eight volumes and still
 * leaves 48 slots to every other host. */
#define MAX_HANDSHAKES_PER_PEER 16

struct fc_migr_listener {
  struct fc_agent *agent;
  int fd;
  int stop_pipe[2];
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  unsigned handshakes;
  char from[MAX_HANDSHAKES][128];    /* address of each running handshake */
};

struct handshake {
  struct fc_migr_listener *l;
  int fd;
  int slot;
  char peer[160];
};

static bool
token_equal(const char *a, const char *b)
{
  unsigned char diff = 0;

  if (strlen(a) != FC_TOKEN_HEX || strlen(b) != FC_TOKEN_HEX)
    return false;
  for (size_t i = 0; i < FC_TOKEN_HEX; i++)
    diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

static void
refuse(struct fc_xfer_conn *c, const char *peer, const char *why)
{
  log_warning("migration stream from %s refused: %s", peer, why);
  fc_xfer_send_json(c, FC_XFER_ERROR, "{\"error\": \"authentication failed\"}");
}

/* What the TLS handshake's lookup (xfer_tls.h) found: the migration it
 * holds a reference to, so that its key outlives the handshake. */
struct lookup_ctx {
  struct fc_agent *agent;
  struct fc_migration *held;
};

/* The TLS handshake's lookup: what an incoming migration still waiting for
 * its source expects, under its id. */
static int
auth_for(void *ctx, const char *identity, struct fc_xfer_auth *auth)
{
  struct lookup_ctx *lc = ctx;
  struct fc_migration *m = fc_migration_find(lc->agent, identity);
  char token[FC_TOKEN_HEX + 1];
  bool waiting;
  int r = 0;

  if (!m)
    return -ENOENT;
  pthread_mutex_lock(&m->lock);
  waiting = m->e.role == FC_MIGR_DEST && !m->token_used &&
            m->state == FC_MS_PREPARED;
  memcpy(token, m->token, sizeof token);
  pthread_mutex_unlock(&m->lock);
  if (!waiting || lc->held) {
    fc_migration_put(m);
    return -ENOENT;
  }
  if (fc_xfer_tls_pinned(lc->agent->tls)) {
    if (!m->key)
      r = -ENOENT;
    auth->key = m->key;
    memcpy(auth->peer_fp, m->peer_fp, sizeof auth->peer_fp);
  } else {
    r = fc_xfer_tls_psk(token, identity, auth->psk);
  }
  explicit_bzero(token, sizeof token);
  if (r) {
    fc_migration_put(m);
    return r;
  }
  lc->held = m;
  return 0;
}

static void
handle(struct fc_migr_listener *l, int fd, const char *peer)
{
  struct timeval tv = { HELLO_TIMEOUT_S, 0 };
  uint64_t until = fc_monotonic_ns() + HELLO_TIMEOUT_S * 1000000000ull;
  char identity[FC_MIGRATION_ID_MAX + 1], terr[512];
  struct fc_xfer_header h;
  struct fc_xfer_conn c;
  uint8_t buf[FC_XFER_MAX_JSON + 1];
  const char *id, *vol, *token;
  struct lookup_ctx lc = { l->agent, NULL };
  struct fc_migration *m = NULL;
  json_t *hello = NULL;
  uint64_t now;
  int r;

  fc_xfer_conn_init(&c, fd);
  /* The handshake and the whole HELLO within one deadline, however slowly
   * they trickle in; the refusal is sent under the same bound. */
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  r = fc_xfer_tls_server(l->agent->tls, &c, auth_for, &lc, identity,
                         sizeof identity, HELLO_TIMEOUT_S * 1000, terr, sizeof terr);
  /* The handshake is over: the key it used is no longer needed. */
  fc_migration_put(lc.held);
  if (r) {
    /* Nothing to answer: the peer proved nothing, and a refusal frame
     * would go out in clear. */
    log_warning("migration stream from %s refused: %s", peer, terr);
    goto out;
  }
  now = fc_monotonic_ns();
  r = now < until ? fc_xfer_recv_by(&c, &h, buf, FC_XFER_MAX_JSON,
                                    (unsigned)((until - now) / 1000000)) : -ETIMEDOUT;
  if (r || h.type != FC_XFER_HELLO) {
    refuse(&c, peer, r ? strerror(-r) : "first frame is not HELLO");
    goto out;
  }
  buf[h.length] = '\0';
  hello = json_loadb((const char *)buf, h.length, 0, NULL);
  id = json_string_value(json_object_get(hello, "migration_id"));
  vol = json_string_value(json_object_get(hello, "volume_id"));
  token = json_string_value(json_object_get(hello, "token"));
  if (!id || !vol || !token) {
    refuse(&c, peer, "malformed HELLO");
    goto out;
  }
  if (identity[0] && strcmp(identity, id)) {
    refuse(&c, peer, "HELLO names another migration than its TLS key");
    goto out;
  }
  m = fc_migration_find(l->agent, id);
  if (!m || m->e.role != FC_MIGR_DEST) {
    refuse(&c, peer, "no incoming migration with that id");
    goto out;
  }
  pthread_mutex_lock(&m->lock);
  if (!token_equal(m->token, token)) {
    pthread_mutex_unlock(&m->lock);
    refuse(&c, peer, "wrong token");
    goto out;
  }
  if (strcmp(m->e.volume_id, vol)) {
    pthread_mutex_unlock(&m->lock);
    refuse(&c, peer, "token is for another volume");
    goto out;
  }
  if (m->token_used || m->state != FC_MS_PREPARED) {
    pthread_mutex_unlock(&m->lock);
    refuse(&c, peer, "token already used");
    goto out;
  }
  m->token_used = true;
  /* An older source does not answer READ: reads then wait for SWITCH. */
  m->peer_reads = json_is_true(json_object_get(hello, "reads"));
  pthread_mutex_unlock(&m->lock);
  tv.tv_sec = 0;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  log_info("migration %s: stream from %s authenticated (TLS %s)", id, peer,
           fc_xfer_tls_mode_name(l->agent->tls));
  json_decref(hello);
  fc_migr_dest_accept(m, &c);
  fc_migration_put(m);
  fc_xfer_conn_destroy(&c);
  return;
out:
  fc_migration_put(m);
  json_decref(hello);
  fc_xfer_conn_destroy(&c);
}

/* A slot for a handshake from host, or -1 (too many running, in all or
 * from host). */
static int
take_slot(struct fc_migr_listener *l, const char *host)
{
  int slot = -1, same = 0;

  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < MAX_HANDSHAKES; i++) {
    if (!l->from[i][0])
      slot = slot < 0 ? i : slot;
    else if (!strcmp(l->from[i], host))
      same++;
  }
  if (same >= MAX_HANDSHAKES_PER_PEER)
    slot = -1;
  if (slot >= 0) {
    snprintf(l->from[slot], sizeof l->from[slot], "%s", host);
    l->handshakes++;
  }
  pthread_mutex_unlock(&l->lock);
  return slot;
}

static void
release_slot(struct fc_migr_listener *l, int slot)
{
  pthread_mutex_lock(&l->lock);
  l->from[slot][0] = '\0';
  if (--l->handshakes == 0)
    pthread_cond_broadcast(&l->idle);
  pthread_mutex_unlock(&l->lock);
}

static void *
handshake_thread(void *arg)
{
  struct handshake *hs = arg;
  struct fc_migr_listener *l = hs->l;

  handle(l, hs->fd, hs->peer);
  release_slot(l, hs->slot);
  free(hs);
  return NULL;
}

/* Hand the connection to a thread of its own, or close it if as many
 * handshakes as allowed are running (from that host, or in all). */
static void
start_handshake(struct fc_migr_listener *l, int fd, const char *host,
                const char *peer)
{
  struct handshake *hs;
  pthread_attr_t attr;
  pthread_t t;
  int slot = take_slot(l, host);

  if (slot < 0) {
    log_warning("migration stream from %s refused: too many handshakes in "
                "progress (at most %d, %d from one address)", peer,
                MAX_HANDSHAKES, MAX_HANDSHAKES_PER_PEER);
    close(fd);
    return;
  }
  hs = malloc(sizeof *hs);
  if (hs) {
    hs->l = l;
    hs->fd = fd;
    hs->slot = slot;
    snprintf(hs->peer, sizeof hs->peer, "%s", peer);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, handshake_thread, hs) == 0) {
      pthread_attr_destroy(&attr);
      return;
    }
    pthread_attr_destroy(&attr);
    free(hs);
  }
  log_warning("migration stream from %s refused: cannot start its handshake",
              peer);
  close(fd);
  release_slot(l, slot);
}

static void *
listener_thread(void *arg)
{
  struct fc_migr_listener *l = arg;

  for (;;) {
    struct pollfd p[2] = { { l->fd, POLLIN, 0 }, { l->stop_pipe[0], POLLIN, 0 } };
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[128] = "?", serv[16] = "?", peer[160];
    int fd;

    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[1].revents)
      break;
    if (!(p[0].revents & POLLIN))
      continue;
    fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(peer, sizeof peer, "%s:%s", host, serv);
    start_handshake(l, fd, host, peer);
  }
  return NULL;
}

struct fc_migr_listener *
fc_migr_listen(struct fc_agent *agent, const char *hostport, char *err, size_t errlen)
{
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  struct fc_migr_listener *l;
  struct addrinfo *res = NULL;
  char host[256], port[16];
  int one = 1, r;

  if (fc_split_hostport(hostport, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "migration_listen '%s' is not host:port", hostport);
    return NULL;
  }
  r = getaddrinfo(host, port, &hints, &res);
  if (r) {
    snprintf(err, errlen, "migration_listen %s: %s", hostport, gai_strerror(r));
    return NULL;
  }
  l = calloc(1, sizeof *l);
  if (!l)
    goto fail;
  l->agent = agent;
  l->stop_pipe[0] = l->stop_pipe[1] = -1;
  pthread_mutex_init(&l->lock, NULL);
  pthread_cond_init(&l->idle, NULL);
  l->fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l->fd < 0 ||
      setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(l->fd, res->ai_addr, res->ai_addrlen) < 0 || listen(l->fd, 16) < 0 ||
      pipe2(l->stop_pipe, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "cannot listen for migrations on %s: %s", hostport,
             strerror(errno));
    goto fail;
  }
  r = pthread_create(&l->thread, NULL, listener_thread, l);
  if (r) {
    snprintf(err, errlen, "cannot start migration listener: %s", strerror(r));
    goto fail;
  }
  freeaddrinfo(res);
  log_info("listening for cache migrations on %s", hostport);
  return l;
fail:
  freeaddrinfo(res);
  if (l) {
    if (l->fd >= 0)
      close(l->fd);
    if (l->stop_pipe[0] >= 0) {
      close(l->stop_pipe[0]);
      close(l->stop_pipe[1]);
    }
    free(l);
  }
  return NULL;
}

void
fc_migr_listener_stop(struct fc_migr_listener *l)
{
  if (!l)
    return;
  if (write(l->stop_pipe[1], "x", 1) < 0)
    log_warning("cannot wake the migration listener: %m");
  pthread_join(l->thread, NULL);
  /* Handshakes still running end within HELLO_TIMEOUT_S. */
  pthread_mutex_lock(&l->lock);
  while (l->handshakes)
    pthread_cond_wait(&l->idle, &l->lock);
  pthread_mutex_unlock(&l->lock);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->idle);
  close(l->fd);
  close(l->stop_pipe[0]);
  close(l->stop_pipe[1]);
  free(l);
}
