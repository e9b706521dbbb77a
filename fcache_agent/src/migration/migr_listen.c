/* SPDX-License-Identifier: Apache-2.0 */
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
/* Handshakes in progress at once, each with its thread: a flood of
 * connections costs at most this many. */
#define MAX_HANDSHAKES 64
/* Of which anonymous: not yet naming a migration this agent prepared and
 * still waits for.  Only these are limited per address and cut early, so
 * that idle or dripping connections, from however many addresses, cannot
 * take the slots the sources of prepared migrations need: a source names
 * its migration in its first flight (pinned: the server name; psk: the
 * key's identity) and its handshake is then named, out of their reach.
 * The other MAX_HANDSHAKES - MAX_ANON are only ever named ones. */
#define MAX_ANON 32
#define MAX_ANON_PER_PEER 4
/* How long a connection may stay anonymous where the name comes in the
 * first flight: what a ClientHello takes to arrive, with room to spare. */
#define NAME_TIMEOUT_MS 2000
/* A full anonymous pool makes room for a newcomer by cutting its oldest
 * member, if at least this old: a source's own connection names itself
 * well within it, so a flood of newcomers cannot cut it first. */
#define EVICT_MIN_AGE_MS 250

struct hs_slot {
  char from[128];               /* address; empty: the slot is free */
  int fd;                       /* -1 once its thread has settled it */
  bool named;
  uint64_t started_ns;
};

struct fc_migr_listener {
  struct fc_agent *agent;
  int fd;
  int stop_pipe[2];
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  unsigned handshakes;
  unsigned name_ms;             /* NAME_TIMEOUT_MS, or the HELLO's */
  struct hs_slot slots[MAX_HANDSHAKES];
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
  bool settle;                  /* a settle session's key was given */
  struct fc_migr_listener *l;
  int slot;
};

/* The handshake in slot names a prepared migration: it no longer counts
 * as anonymous and is never cut early. */
static void
mark_named(struct fc_migr_listener *l, int slot)
{
  pthread_mutex_lock(&l->lock);
  l->slots[slot].named = true;
  pthread_mutex_unlock(&l->lock);
}

/* The handshake's thread closes or hands its fd on next: the listener must
 * not shutdown() that number any more. */
static void
settle_slot(struct fc_migr_listener *l, int slot)
{
  pthread_mutex_lock(&l->lock);
  l->slots[slot].fd = -1;
  pthread_mutex_unlock(&l->lock);
}

/* The TLS handshake's lookup: what an incoming migration still waiting for
 * its source expects, under its id. */
static int
auth_for(void *ctx, const char *identity, struct fc_xfer_auth *auth)
{
  struct lookup_ctx *lc = ctx;
  struct fc_migration *m;
  char token[FC_TOKEN_HEX + 1];
  bool waiting;
  int r = 0;

  /* A settle session (migr_settle_peer.c): keyed by the secret kept with
   * the volume's mark, which a restarted agent still has. */
  if (!strncmp(identity, FC_XFER_SETTLE_PREFIX, strlen(FC_XFER_SETTLE_PREFIX))) {
    if (lc->held || lc->settle || fc_migr_settle_auth(lc->agent, identity, auth))
      return -ENOENT;
    lc->settle = true;
    mark_named(lc->l, lc->slot);
    return 0;
  }
  m = fc_migration_find(lc->agent, identity);
  if (!m)
    return -ENOENT;
  pthread_mutex_lock(&m->lock);
  waiting = m->e.role == FC_MIGR_DEST && !m->token_used &&
            m->state == FC_MS_PREPARED;
  memcpy(token, m->token, sizeof token);
  pthread_mutex_unlock(&m->lock);
  if (!waiting || lc->held || lc->settle) {
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
    auth->psk_set = r == 0;
  }
  explicit_bzero(token, sizeof token);
  if (r) {
    fc_migration_put(m);
    return r;
  }
  lc->held = m;
  mark_named(lc->l, lc->slot);
  return 0;
}

/* The source's migration_listen as a settle session dials it: its own
 * address, or, where it listens on every address, the one it came from. */
static void
settle_address(const char *said, const char *peer, char *out, size_t outlen)
{
  char host[128], port[16], from[160];
  char *colon;

  out[0] = '\0';
  if (!said || fc_split_hostport(said, host, sizeof host, port, sizeof port) ||
      strlen(said) >= outlen)
    return;
  if (strcmp(host, "0.0.0.0") && strcmp(host, "::") && host[0]) {
    snprintf(out, outlen, "%s", said);
    return;
  }
  snprintf(from, sizeof from, "%s", peer);
  colon = strrchr(from, ':');
  if (!colon)
    return;
  *colon = '\0';
  snprintf(out, outlen, strchr(from, ':') ? "[%s]:%s" : "%s:%s", from, port);
}

static void
handle(struct fc_migr_listener *l, int fd, int slot, const char *peer)
{
  struct timeval tv = { HELLO_TIMEOUT_S, 0 };
  uint64_t until = fc_monotonic_ns() + HELLO_TIMEOUT_S * 1000000000ull;
  char identity[FC_XFER_IDENTITY_MAX + 1], terr[512];
  struct fc_xfer_header h;
  struct fc_xfer_conn c;
  uint8_t buf[FC_XFER_MAX_JSON + 1];
  const char *id, *vol, *token;
  struct lookup_ctx lc = { l->agent, NULL, false, l, slot };
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
  explicit_bzero(buf, h.length);
  /* A settle session, and only one keyed for settling, goes to its own
   * responder; a transfer HELLO on it is refused below. */
  if (json_is_true(json_object_get(hello, "settle")) || lc.settle) {
    if (!json_is_true(json_object_get(hello, "settle"))) {
      refuse(&c, peer, "a settle session's key used for a transfer");
      goto out;
    }
    /* The session keeps its slot, named (never cut as idle), for its
     * length: stopping the listener shuts it down (fc_migr_listener_stop)
     * rather than waiting for a peer between two steps. */
    mark_named(l, slot);
    fc_migr_settle_serve(l->agent, &c, hello, identity, peer);
    goto out;
  }
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
  fc_migr_dest_hello_locked(m, hello);
  /* Where a settle session reaches the source; an older source does not
   * say, and gets no settle secret. */
  settle_address(json_string_value(json_object_get(hello, "settle_address")),
                 peer, m->settle_peer, sizeof m->settle_peer);
  pthread_mutex_unlock(&m->lock);
  tv.tv_sec = 0;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  settle_slot(l, slot);
  log_info("migration %s: stream from %s authenticated (TLS %s)", id, peer,
           fc_xfer_tls_mode_name(l->agent->tls));
  fc_migr_dest_allocation(m, json_object_get(hello, "allocation"));
  json_decref(hello);
  fc_migr_dest_accept(m, &c);
  fc_migration_put(m);
  fc_xfer_conn_destroy(&c);
  return;
out:
  settle_slot(l, slot);
  fc_migration_put(m);
  json_decref(hello);
  fc_xfer_conn_destroy(&c);
}

static uint64_t
age_ms(const struct hs_slot *s, uint64_t now)
{
  return (now - s->started_ns) / 1000000;
}

/* Cuts the oldest anonymous handshake (from host, if host is not NULL)
 * that is at least EVICT_MIN_AGE_MS old; its thread then ends and frees
 * the slot.  Under l->lock.  True if there was one. */
static bool
evict_oldest(struct fc_migr_listener *l, const char *host, uint64_t now)
{
  int victim = -1;

  for (int i = 0; i < MAX_HANDSHAKES; i++) {
    struct hs_slot *s = &l->slots[i];
    if (!s->from[0] || s->named || s->fd < 0 ||
        (host && strcmp(s->from, host)) ||
        age_ms(s, now) < EVICT_MIN_AGE_MS)
      continue;
    if (victim < 0 || s->started_ns < l->slots[victim].started_ns)
      victim = i;
  }
  if (victim < 0)
    return false;
  log_warning("migration stream from %s cut: it named no prepared migration "
              "in %u ms and its slot is wanted", l->slots[victim].from,
              (unsigned)age_ms(&l->slots[victim], now));
  shutdown(l->slots[victim].fd, SHUT_RDWR);
  l->slots[victim].fd = -1;       /* cut once; its thread frees the slot */
  l->slots[victim].named = true;  /* and it no longer counts as waiting */
  return true;
}

/* Prepared incoming migrations still waiting for their source's stream.
 * A source opens one connection per migration, all at once (eight
 * volumes, eight streams), each anonymous until its first flight is read:
 * one address may hold that many however small MAX_ANON_PER_PEER is, and
 * only an admin's migration-incoming makes one. */
static int
streams_awaited(struct fc_agent *agent)
{
  int n = 0;

  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++) {
    struct fc_migration *m = agent->migrations[i];
    pthread_mutex_lock(&m->lock);
    n += m->e.role == FC_MIGR_DEST && !m->token_used &&
         m->state == FC_MS_PREPARED;
    pthread_mutex_unlock(&m->lock);
  }
  pthread_mutex_unlock(&agent->migr_lock);
  return n;
}

/* A slot for a new, anonymous handshake on fd from host, or -1: at most
 * per_peer from one address and MAX_ANON in all, where an old enough
 * anonymous one gives way to the newcomer (the newcomer then waits for
 * the next connection's turn: its slot frees as the cut one ends). */
static int
take_slot(struct fc_migr_listener *l, const char *host, int fd, int per_peer)
{
  uint64_t now = fc_monotonic_ns();
  int slot = -1, same = 0, anon = 0;

  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < MAX_HANDSHAKES; i++) {
    const struct hs_slot *s = &l->slots[i];
    if (!s->from[0]) {
      slot = slot < 0 ? i : slot;
      continue;
    }
    if (s->named)
      continue;
    anon++;
    if (!strcmp(s->from, host))
      same++;
  }
  /* Making room counts the cut one as gone: its thread ends at once. */
  if (same >= per_peer && evict_oldest(l, host, now)) {
    same--;
    anon--;
  }
  if (same < per_peer && anon >= MAX_ANON && evict_oldest(l, NULL, now))
    anon--;
  if (same >= per_peer || anon >= MAX_ANON)
    slot = -1;
  if (slot >= 0) {
    struct hs_slot *s = &l->slots[slot];
    snprintf(s->from, sizeof s->from, "%s", host);
    s->fd = fd;
    s->named = false;
    s->started_ns = now;
    l->handshakes++;
  }
  pthread_mutex_unlock(&l->lock);
  return slot;
}

/* Cuts the anonymous handshakes past their time to name a migration.
 * Returns how long until the next one is due, in ms (-1: none). */
static int
cut_unnamed(struct fc_migr_listener *l)
{
  uint64_t now = fc_monotonic_ns();
  int next = -1;

  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < MAX_HANDSHAKES; i++) {
    struct hs_slot *s = &l->slots[i];
    uint64_t age;

    if (!s->from[0] || s->named || s->fd < 0)
      continue;
    age = age_ms(s, now);
    if (age >= l->name_ms) {
      log_warning("migration stream from %s cut: it named no prepared "
                  "migration within %u ms", s->from, l->name_ms);
      shutdown(s->fd, SHUT_RDWR);
      s->fd = -1;
      continue;
    }
    if (next < 0 || l->name_ms - age < (uint64_t)next)
      next = (int)(l->name_ms - age);
  }
  pthread_mutex_unlock(&l->lock);
  return next < 0 ? -1 : next + 1;
}

static void
release_slot(struct fc_migr_listener *l, int slot)
{
  pthread_mutex_lock(&l->lock);
  memset(&l->slots[slot], 0, sizeof l->slots[slot]);
  l->slots[slot].fd = -1;
  if (--l->handshakes == 0)
    pthread_cond_broadcast(&l->idle);
  pthread_mutex_unlock(&l->lock);
}

static void *
handshake_thread(void *arg)
{
  struct handshake *hs = arg;
  struct fc_migr_listener *l = hs->l;

  handle(l, hs->fd, hs->slot, hs->peer);
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
  int awaited = streams_awaited(l->agent);
  int per_peer = awaited > MAX_ANON_PER_PEER ? awaited : MAX_ANON_PER_PEER;
  int slot = take_slot(l, host, fd, per_peer);

  if (slot < 0) {
    log_warning("migration stream from %s refused: too many handshakes in "
                "progress naming no prepared migration yet (at most %d, %d "
                "from one address)", peer, MAX_ANON, per_peer);
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
  release_slot(l, slot);
  close(fd);
}

static void *
listener_thread(void *arg)
{
  struct fc_migr_listener *l = arg;

  for (;;) {
    struct pollfd p[2] = { { l->fd, POLLIN, 0 }, { l->stop_pipe[0], POLLIN, 0 } };
    int wait_ms = cut_unnamed(l);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[128] = "?", serv[16] = "?", peer[160];
    int fd;

    if (poll(p, 2, wait_ms) < 0 && errno != EINTR)
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
  /* Where the first flight names no migration (none, x509), the name
   * comes with the HELLO. */
  l->name_ms = !strcmp(fc_xfer_tls_mode_name(agent->tls), "pinned") ||
               !strcmp(fc_xfer_tls_mode_name(agent->tls), "psk") ?
               NAME_TIMEOUT_MS : HELLO_TIMEOUT_S * 1000;
  for (int i = 0; i < MAX_HANDSHAKES; i++)
    l->slots[i].fd = -1;
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
  /* Handshakes still running end within HELLO_TIMEOUT_S; settle sessions
   * would wait for their peer's next step: cut them all now.  A thread
   * gives up its fd (settle_slot) under the lock before closing it. */
  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < MAX_HANDSHAKES; i++)
    if (l->slots[i].from[0] && l->slots[i].fd >= 0)
      shutdown(l->slots[i].fd, SHUT_RDWR);
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
