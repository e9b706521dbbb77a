/* SPDX-License-Identifier: Apache-2.0 */
/* Settling through the agents: one host's control socket is enough.
 *
 * migr_settle.c's steps are run by one agent, "the initiator" (step "all"
 * of migration-settle), on the host the operator is on: its own steps
 * directly, its peer's over a settle stream to the peer's migration
 * listener (migr_listen.c), in the order nova_ext.migration.settle relays
 * them (list -> write back or drop -> release -> end).  Nothing new
 * listens on the network.
 *
 * Authentication needs nothing the orchestrator carried and nothing kept
 * in memory only (a restarted agent settles too): the settle secret the
 * destination made for this migration and sent inside its authenticated
 * stream, which both agents keep beside the volume's mark (engine/volume.h).
 * The session is TLS 1.3 PSK with ECDHE under identity
 * "settle:<migration id>" (migration_tls pinned or psk), the host
 * certificates (x509), or plaintext (none); in every mode the HELLO
 * carries the secret too and the responder compares it.
 *
 * The responder answers only its own role's steps, for the migration and
 * volume its HELLO named, only while the volume still carries that
 * migration's mark and the migration failed (migr_settle.c checks that
 * at every step), and nothing but STEP frames.  It ends the stream after
 * its last step (release, or end).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "agent/agent.h"
#include "common/log.h"
#include "migr_settle_fetch.h"
#include "migration.h"
#include "xfer_tls.h"

#define SETTLE_CONNECT_MS 10000
#define SETTLE_HANDSHAKE_MS 10000
/* Between two steps, and for one step's answer: a write-back of 4096
 * blocks to a slow origin takes a while. */
#define SETTLE_STEP_MS (300u * 1000)

struct settle_peer {
  struct fc_agent *agent;
  const char *mid, *vid;
  bool source;                      /* this agent holds out:<mid> */
  char secret[FC_SETTLE_SECRET_HEX + 1];
  char peer[160];
  struct fc_xfer_conn conn;
  bool connected;
};

static bool
secret_equal(const char *a, const char *b)
{
  unsigned char diff = 0;

  if (strlen(a) != FC_SETTLE_SECRET_HEX || strlen(b) != FC_SETTLE_SECRET_HEX)
    return false;
  for (size_t i = 0; i < FC_SETTLE_SECRET_HEX; i++)
    diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

/* The volume's mark for migration mid, and what it keeps to settle it:
 * 0, -ENOENT (no such volume), -ESRCH (not marked for mid) or -ENOKEY
 * (marked, but its peer predates settle secrets). */
static int
find_marked(struct fc_agent *agent, const char *vid, const char *mid,
            bool *source, char *secret, char *peer, size_t peerlen)
{
  struct fc_volume *v;
  int r = 0;

  pthread_mutex_lock(&agent->host.lock);
  v = fc_agent_find_locked(agent, vid);
  if (!v)
    r = -ENOENT;
  else if ((strncmp(v->p.migration, "out:", 4) && strncmp(v->p.migration, "in:", 3)) ||
           strcmp(strchr(v->p.migration, ':') + 1, mid))
    r = -ESRCH;
  else if (!v->p.settle_secret[0])
    r = -ENOKEY;
  if (!r) {
    *source = v->p.migration[0] == 'o';
    memcpy(secret, v->p.settle_secret, FC_SETTLE_SECRET_HEX + 1);
    snprintf(peer, peerlen, "%s", v->p.settle_peer);
  }
  pthread_mutex_unlock(&agent->host.lock);
  return r;
}

/* A migration this agent still runs has not failed: nothing to settle. */
static int
check_failed(struct fc_agent *agent, const char *mid, char *err, size_t errlen)
{
  struct fc_migration *m = fc_migration_find(agent, mid);
  enum fc_migr_state st;

  if (!m)
    return 0;                 /* restarted since: only the mark is left */
  pthread_mutex_lock(&m->lock);
  st = m->state;
  pthread_mutex_unlock(&m->lock);
  fc_migration_put(m);
  if (st == FC_MS_SWITCHED || st == FC_MS_CONNECTED || st == FC_MS_PREPARED) {
    snprintf(err, errlen, "migration %s is %s: it has not failed, so there is "
             "nothing to settle (finish or abort it)", mid, fc_migr_state_name(st));
    return -EBUSY;
  }
  return 0;
}

int
fc_migr_settle_auth(struct fc_agent *agent, const char *identity,
                    struct fc_xfer_auth *auth)
{
  const char *mid = identity + strlen(FC_XFER_SETTLE_PREFIX);
  char secret[FC_SETTLE_SECRET_HEX + 1] = "";
  bool found = false;
  int r;

  if (strncmp(identity, FC_XFER_SETTLE_PREFIX, strlen(FC_XFER_SETTLE_PREFIX)) ||
      !fc_migration_id_valid(mid))
    return -ENOENT;
  pthread_mutex_lock(&agent->host.lock);
  for (unsigned i = 0; i < agent->host.nr_volumes && !found; i++) {
    const struct fc_volume *v = agent->host.volumes[i];
    const char *colon = strchr(v->p.migration, ':');

    if (colon && !strcmp(colon + 1, mid) && v->p.settle_secret[0]) {
      memcpy(secret, v->p.settle_secret, sizeof secret);
      found = true;
    }
  }
  pthread_mutex_unlock(&agent->host.lock);
  if (!found)
    return -ENOENT;
  r = fc_xfer_tls_psk(secret, identity, auth->psk);
  explicit_bzero(secret, sizeof secret);
  if (r)
    return r;
  auth->psk_set = true;
  return 0;
}

/* --- the initiator ------------------------------------------------------ */

static int
peer_connect(struct settle_peer *s, char *err, size_t errlen)
{
  char host[128], port[16], identity[FC_XFER_IDENTITY_MAX + 1], terr[400];
  uint8_t psk[FC_TLS_PSK_BYTES];
  uint8_t buf[FC_XFER_MAX_JSON + 1];
  struct timeval tv = { SETTLE_STEP_MS / 1000, 0 };
  struct fc_xfer_header h;
  json_t *hello;
  char *text;
  int fd, r;

  if (fc_split_hostport(s->peer, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "the peer's kept address %.160s is not host:port", s->peer);
    return -EINVAL;
  }
  r = fc_xfer_connect(s->peer, SETTLE_CONNECT_MS, &fd, terr, sizeof terr);
  if (r) {
    snprintf(err, errlen, "cannot reach the %s agent of migration %s at %s: %s",
             s->source ? "destination" : "source", s->mid, s->peer, terr);
    return r;
  }
  fc_xfer_conn_init(&s->conn, fd);
  s->connected = true;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  snprintf(identity, sizeof identity, "%s%s", FC_XFER_SETTLE_PREFIX, s->mid);
  r = fc_xfer_tls_psk(s->secret, identity, psk);
  if (!r)
    r = fc_xfer_tls_settle_client(s->agent->tls, &s->conn, host, identity, psk,
                                  SETTLE_HANDSHAKE_MS, terr, sizeof terr);
  explicit_bzero(psk, sizeof psk);
  if (r) {
    snprintf(err, errlen, "settle session with %s: %s (the peer agent refused "
             "this host's settle secret or holds no migration %s, and its log "
             "says why; or the link dropped)", s->peer, terr, s->mid);
    return r == -ECONNRESET ? -EACCES : r;
  }
  hello = json_pack("{s:b, s:s, s:s, s:s}", "settle", 1, "migration_id", s->mid,
                    "volume_id", s->vid, "secret", s->secret);
  text = hello ? json_dumps(hello, JSON_COMPACT) : NULL;
  json_decref(hello);
  r = text ? fc_xfer_send_json(&s->conn, FC_XFER_HELLO, text) : -ENOMEM;
  if (text) {
    explicit_bzero(text, strlen(text));
    free(text);
  }
  if (!r)
    r = fc_xfer_recv(&s->conn, &h, buf, FC_XFER_MAX_JSON);
  if (!r && h.type != FC_XFER_WELCOME) {
    json_t *e = h.type == FC_XFER_ERROR ?
                json_loadb((const char *)buf, h.length, 0, NULL) : NULL;
    const char *why = json_string_value(json_object_get(e, "error"));
    json_int_t no = json_integer_value(json_object_get(e, "errno"));

    snprintf(err, errlen, "the agent at %s refused to settle migration %s: %s",
             s->peer, s->mid, why ? why : "unexpected frame");
    json_decref(e);
    /* Its reason as an errno: EBUSY (not failed there yet) is worth
     * another try, as the two-socket settle's is. */
    return no > 0 && no < 4096 ? -(int)no : -EACCES;
  }
  if (r) {
    snprintf(err, errlen, "settle session with %s: %s", s->peer, strerror(-r));
    return r == -ECONNRESET ? -EACCES : r;
  }
  return 0;
}

/* One step of the peer's, over the stream. */
static int
peer_step(struct settle_peer *s, json_t *args, json_t **result, char *err,
          size_t errlen)
{
  uint8_t *buf = malloc(FC_XFER_MAX_STEP_JSON + 1);
  struct fc_xfer_header h;
  char *text = json_dumps(args, JSON_COMPACT);
  int r;

  if (!buf || !text) {
    free(buf);
    free(text);
    return -ENOMEM;
  }
  r = strlen(text) > FC_XFER_MAX_STEP_JSON ? -EMSGSIZE :
      fc_xfer_send_json(&s->conn, FC_XFER_STEP, text);
  free(text);
  if (!r)
    r = fc_xfer_recv(&s->conn, &h, buf, FC_XFER_MAX_STEP_JSON);
  if (r) {
    snprintf(err, errlen, "settle session with %s lost during step %s: %s",
             s->peer, json_string_value(json_object_get(args, "step")), strerror(-r));
    free(buf);
    return r;
  }
  buf[h.length] = '\0';
  if (h.type == FC_XFER_STEP_DONE) {
    *result = json_loadb((const char *)buf, h.length, 0, NULL);
    r = *result ? 0 : -EPROTO;
    if (r)
      snprintf(err, errlen, "the agent at %s answered step %s with no JSON",
               s->peer, json_string_value(json_object_get(args, "step")));
  } else {
    json_t *e = json_loadb((const char *)buf, h.length, 0, NULL);
    json_int_t no = json_integer_value(json_object_get(e, "errno"));

    snprintf(err, errlen, "the agent at %s: %s", s->peer,
             json_string_value(json_object_get(e, "error")) ?
             json_string_value(json_object_get(e, "error")) : "unexpected frame");
    r = h.type == FC_XFER_ERROR && no > 0 && no < 4096 ? -(int)no : -EPROTO;
    json_decref(e);
  }
  free(buf);
  return r;
}

/* One step: this agent's own (local) or its peer's. */
static int
step(struct settle_peer *s, bool local, json_t *args, json_t **result, char *err,
     size_t errlen)
{
  int r;

  json_object_set_new(args, "migration_id", json_string(s->mid));
  json_object_set_new(args, "volume_id", json_string(s->vid));
  *result = NULL;
  r = local ? fc_migration_settle(s->agent, args, result, err, errlen) :
              peer_step(s, args, result, err, errlen);
  json_decref(args);
  return r;
}

static int
run(struct settle_peer *s, json_t **result, char *err, size_t errlen)
{
  bool dest_local = !s->source, src_local = s->source;
  json_int_t after = -1, listed = 0, nmissing = 0;
  json_t *page = NULL, *done = NULL, *end = NULL, *missing = json_array();
  const char *mode = NULL;
  char modebuf[16] = "";
  int r;

  if (!missing)
    return -ENOMEM;
  for (;;) {
    json_t *args = json_pack("{s:s, s:i}", "step", "list", "limit", 4096);
    json_t *blocks;

    if (after >= 0)
      json_object_set_new(args, "after", json_integer(after));
    r = step(s, dest_local, args, &page, err, errlen);
    if (r)
      goto out;
    snprintf(modebuf, sizeof modebuf, "%s",
             json_string_value(json_object_get(page, "mode")) ? json_string_value(json_object_get(page, "mode")) : "");
    mode = modebuf;
    blocks = json_object_get(page, "blocks");
    if (strcmp(mode, "missing") && strcmp(mode, "held") && strcmp(mode, "completed")) {
      snprintf(err, errlen, "the destination listed in an unknown mode %.15s", mode);
      r = -EPROTO;
      goto out;
    }
    if (json_array_size(blocks)) {
      json_t *a = json_pack("{s:s, s:O}", "step",
                            !strcmp(mode, "missing") ? "writeback" : "drop",
                            "blocks", blocks);
      json_t *b;
      size_t i;

      r = step(s, src_local, a, &done, err, errlen);
      if (r)
        goto out;
      json_array_foreach(json_object_get(done, "missing"), i, b) {
        if (nmissing++ < 5)
          json_array_append(missing, b);
      }
      json_decref(done);
      done = NULL;
      listed += (json_int_t)json_array_size(blocks);
      after = json_integer_value(json_array_get(blocks, json_array_size(blocks) - 1));
    }
    if (!json_is_true(json_object_get(page, "more")))
      break;
    json_decref(page);
    page = NULL;
  }
  if (nmissing) {
    char *first = json_dumps(missing, JSON_COMPACT);

    snprintf(err, errlen, "%lld blocks the destination needs are not dirty on "
             "the source (first: %s); nothing was released", (long long)nmissing,
             first ? first : "?");
    free(first);
    r = -EIO;
    goto out;
  }
  r = step(s, src_local, json_pack("{s:s, s:s}", "step", "release", "rest",
                                   !strcmp(mode, "held") ? "writeback" : "drop"),
           &done, err, errlen);
  if (r)
    goto out;
  r = step(s, dest_local, json_pack("{s:s, s:s}", "step", "end", "source", "released"),
           &end, err, errlen);
  if (r) {
    size_t len = strlen(err);

    /* The source wrote back what only it had before it released: the
     * destination's end with source=lost reads exactly those from the
     * origin (its given_up_blocks then counts blocks written back). */
    snprintf(err + len, errlen - len, "; the source has released volume %s "
             "after writing back what only it had: end the settle on the "
             "destination host with fcache migrate %s --to DST --migration %s "
             "--phase settle --source-lost", s->vid, s->vid, s->mid);
    goto out;
  }
  *result = json_pack("{s:s, s:s, s:s, s:I, s:O, s:s}", "migration_id", s->mid,
                      "volume_id", s->vid, "mode", mode, "blocks", listed,
                      "given_up_blocks", json_object_get(end, "given_up_blocks"),
                      "settled_from", s->source ? "source" : "destination");
  r = *result ? 0 : -ENOMEM;
  log_info("migration %s of volume %s settled from this host (the %s) with %s "
           "(%s, %lld blocks listed)", s->mid, s->vid,
           s->source ? "source" : "destination", s->peer, mode, (long long)listed);
out:
  json_decref(page);
  json_decref(done);
  json_decref(end);
  json_decref(missing);
  return r;
}

/* A destination whose engine reads blocks from the source's frozen cache
 * itself (dmcache's hybrid) copies what is left over this session before
 * the steps: the source serves FETCH here, and only then is nothing of
 * the volume left there to write back or lose. */
static int
finish_from_source(struct settle_peer *s, char *err, size_t errlen)
{
  const struct fc_engine_settle_ops *ops = s->agent->host.ops->migr->settle;
  struct fc_settle_fetch *f = NULL;
  struct fc_volume *v;
  json_t *done = NULL;
  bool needs;
  int r, rc;

  if (!ops->dest_needs_source || !ops->dest_finish)
    return 0;
  pthread_mutex_lock(&s->agent->host.lock);
  v = fc_agent_find_locked(s->agent, s->vid);
  needs = v && ops->dest_needs_source(&s->agent->host, v);
  pthread_mutex_unlock(&s->agent->host.lock);
  if (!needs)
    return 0;
  r = step(s, false, json_pack("{s:s}", "step", "serve"), &done, err, errlen);
  json_decref(done);
  if (r)
    return r;
  r = fc_settle_fetch_open(&s->conn, s->agent->host.cfg.block_size, &f);
  if (r) {
    snprintf(err, errlen, "cannot fetch from the source: %s", strerror(-r));
    return r;
  }
  log_info("migration %s: volume %s copies what is left of its cache from the "
           "source at %s", s->mid, s->vid, s->peer);
  r = ops->dest_finish(&s->agent->host, v, fc_settle_fetch_start, f, err, errlen);
  rc = fc_settle_fetch_close(f);
  if (!r && rc) {
    snprintf(err, errlen, "the settle session with %s broke after the copy", s->peer);
    r = rc;
  }
  return r;
}

/* A source whose engine's destination finishes the copy itself (dmcache)
 * cannot drive that copy: it asks the destination to settle from its side
 * (step "all" there), which comes back to this agent's listener for the
 * blocks, and reports what it did. */
static int
delegate(struct settle_peer *s, json_t **result, char *err, size_t errlen)
{
  int r = step(s, false, json_pack("{s:s}", "step", "all"), result, err, errlen);

  if (!r) {
    json_object_set_new(*result, "asked_by", json_string("source"));
    log_info("migration %s of volume %s settled by the destination at %s, asked "
             "from this host (the source)", s->mid, s->vid, s->peer);
  }
  return r;
}

int
fc_migr_settle_here(struct fc_agent *agent, json_t *args, json_t **result,
                    char *err, size_t errlen)
{
  struct settle_peer s = { .agent = agent };
  int r;

  s.mid = json_string_value(json_object_get(args, "migration_id"));
  s.vid = json_string_value(json_object_get(args, "volume_id"));
  if (!s.mid || !s.vid) {
    snprintf(err, errlen, "settle needs volume_id and migration_id");
    return -EINVAL;
  }
  r = find_marked(agent, s.vid, s.mid, &s.source, s.secret, s.peer, sizeof s.peer);
  if (r == -ENOENT)
    snprintf(err, errlen, "volume %.80s is not attached to this agent", s.vid);
  else if (r == -ESRCH)
    snprintf(err, errlen, "volume %.80s has no unsettled migration %.80s on this "
             "host (settled already, or it did not fail after its switchover)",
             s.vid, s.mid);
  else if (r == -ENOKEY)
    snprintf(err, errlen, "migration %.80s was run with an agent that predates "
             "settling through the agents (no settle secret kept): settle it "
             "with both control sockets (fcache migrate %.80s --from SRC --to DST "
             "--migration %.80s --phase settle)", s.mid, s.vid, s.mid);
  if (!r)
    r = check_failed(agent, s.mid, err, errlen);
  if (!r)
    r = peer_connect(&s, err, errlen);
  if (!r && !s.source)
    r = finish_from_source(&s, err, errlen);
  if (!r && s.source && agent->host.ops->migr->settle->source_read)
    r = delegate(&s, result, err, errlen);
  else if (!r)
    r = run(&s, result, err, errlen);
  explicit_bzero(s.secret, sizeof s.secret);
  if (s.connected)
    fc_xfer_conn_destroy(&s.conn);
  return r;
}

/* --- the responder ------------------------------------------------------ */

static void
refuse(struct fc_xfer_conn *c, const char *peer, const char *mid, int no,
       const char *why)
{
  json_t *e = json_pack("{s:s, s:i}", "error", why, "errno", -no);
  char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;

  log_warning("settle session from %s for migration %s refused: %s", peer,
              mid ? mid : "?", why);
  fc_xfer_send_json(c, FC_XFER_ERROR, text ? text : "{\"error\": \"refused\"}");
  free(text);
  json_decref(e);
}

/* The step a peer may ask of this agent, its arguments copied from the
 * request (only those steps take) and the migration and volume from the
 * HELLO, whatever the request says. */
static json_t *
allowed_step(json_t *req, bool source, const char *mid, const char *vid,
             char *why, size_t whylen)
{
  static const char *const keys[] = { "after", "limit", "blocks", "rest" };
  const char *name = json_string_value(json_object_get(req, "step"));
  json_t *args;

  if (!name) {
    snprintf(why, whylen, "a STEP frame without a step");
    return NULL;
  }
  if (source ? strcmp(name, "writeback") && strcmp(name, "drop") &&
               strcmp(name, "release") && strcmp(name, "serve")
             : strcmp(name, "list") && strcmp(name, "end") && strcmp(name, "all")) {
    snprintf(why, whylen, "this agent is the %s of migration %s: step %.20s is "
             "not its to take", source ? "source" : "destination", mid, name);
    return NULL;
  }
  /* Giving up the source's blocks is the operator's call on the
   * destination's host, never a peer's. */
  if (!strcmp(name, "end") &&
      (!json_is_string(json_object_get(req, "source")) ||
       strcmp(json_string_value(json_object_get(req, "source")), "released"))) {
    snprintf(why, whylen, "a peer may only end a settle with source=released");
    return NULL;
  }
  args = json_pack("{s:s, s:s, s:s}", "step", name, "migration_id", mid,
                   "volume_id", vid);
  for (size_t i = 0; args && i < sizeof keys / sizeof *keys; i++)
    if (json_object_get(req, keys[i]))
      json_object_set(args, keys[i], json_object_get(req, keys[i]));
  if (args && !strcmp(name, "end"))
    json_object_set_new(args, "source", json_string("released"));
  return args;
}

/* Step "serve" (the source, for a destination that finishes its copy
 * itself): FETCH frames are taken on this session from now on. */
static int
serve_begin(struct fc_agent *agent, const char *vid, uint8_t **block, json_t **result,
            char *why, size_t whylen)
{
  const struct fc_engine_settle_ops *ops = agent->host.ops->migr->settle;

  if (!ops->source_read) {
    snprintf(why, whylen, "engine %s does not serve its frozen cache to a settle",
             agent->host.ops->name);
    return -ENOTSUP;
  }
  if (!*block && !(*block = malloc(8 + (size_t)agent->host.cfg.block_size)))
    return -ENOMEM;
  *result = json_pack("{s:s, s:b, s:i}", "volume_id", vid, "serving", 1,
                      "block_size", (int)agent->host.cfg.block_size);
  return *result ? 0 : -ENOMEM;
}

/* One FETCH: each block it names, from the frozen cache, in order. */
static int
serve_fetch(struct fc_agent *agent, struct fc_xfer_conn *c, const char *vid,
            const uint8_t *req, uint32_t len, uint8_t *block, char *why, size_t whylen)
{
  const struct fc_engine_settle_ops *ops = agent->host.ops->migr->settle;
  uint32_t bs = agent->host.cfg.block_size;
  struct fc_volume *v;
  bool dirty = false;
  int r = 0;

  if (!len || len % 8 || len > FC_XFER_MAX_JSON) {
    snprintf(why, whylen, "a FETCH of %u bytes", len);
    return -EPROTO;
  }
  for (uint32_t i = 0; !r && i < len; i += 8) {
    uint64_t ob = fc_get_le64(req + i);

    pthread_mutex_lock(&agent->host.lock);
    v = fc_agent_find_locked(agent, vid);
    pthread_mutex_unlock(&agent->host.lock);
    if (!v) {
      snprintf(why, whylen, "volume %s is gone from this agent", vid);
      return -ENOENT;
    }
    r = ob & FC_XFER_DIRTY_BIT ? -ENOENT :
        ops->source_read(&agent->host, v, to_oblock(ob), block + 8, &dirty);
    if (r == -ENOENT) {
      fc_put_le64(block, ob);
      r = fc_xfer_send(c, FC_XFER_BLOCK, FC_XFER_F_ABSENT, block, 8, NULL, 0);
      continue;
    }
    if (r) {
      snprintf(why, whylen, "cannot read block %llu of volume %s: %s",
               (unsigned long long)ob, vid, strerror(-r));
      return r;
    }
    fc_put_le64(block, ob | (dirty ? FC_XFER_DIRTY_BIT : 0));
    r = fc_xfer_send(c, FC_XFER_BLOCK, 0, block, 8 + bs, NULL, 0);
  }
  if (r)
    snprintf(why, whylen, "sending to the destination: %s", strerror(-r));
  return r;
}

void
fc_migr_settle_serve(struct fc_agent *agent, struct fc_xfer_conn *c, json_t *hello,
                     const char *identity, const char *peer)
{
  const char *mid = json_string_value(json_object_get(hello, "migration_id"));
  const char *vid = json_string_value(json_object_get(hello, "volume_id"));
  const char *said = json_string_value(json_object_get(hello, "secret"));
  char secret[FC_SETTLE_SECRET_HEX + 1] = "", addr[160], why[512] = "";
  char want[FC_XFER_IDENTITY_MAX + 1];
  struct timeval tv = { SETTLE_STEP_MS / 1000, 0 };
  struct fc_xfer_header h;
  uint8_t *buf = NULL, *block = NULL;
  bool source = false, last = false, serving = false;
  int r;

  if (!mid || !vid || !said || !fc_migration_id_valid(mid)) {
    refuse(c, peer, mid, -EINVAL, "malformed settle HELLO");
    return;
  }
  snprintf(want, sizeof want, "%s%s", FC_XFER_SETTLE_PREFIX, mid);
  if (identity[0] && strcmp(identity, want)) {
    refuse(c, peer, mid, -EACCES, "HELLO names another migration than its TLS key");
    return;
  }
  r = find_marked(agent, vid, mid, &source, secret, addr, sizeof addr);
  if (r || !secret_equal(secret, said)) {
    explicit_bzero(secret, sizeof secret);
    refuse(c, peer, mid, r == -ENOKEY || !r ? -EACCES : -ENOENT,
           r == -ENOENT ? "no such volume on this agent" :
           r == -ESRCH ? "the volume has no unsettled migration with that id "
                         "(settled already?)" :
           "wrong settle secret");
    return;
  }
  explicit_bzero(secret, sizeof secret);
  r = check_failed(agent, mid, why, sizeof why);
  if (r) {
    refuse(c, peer, mid, r, why);
    return;
  }
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  r = fc_xfer_send_json(c, FC_XFER_WELCOME, source ?
                        "{\"settle\": true, \"role\": \"source\"}" :
                        "{\"settle\": true, \"role\": \"destination\"}");
  buf = malloc(FC_XFER_MAX_STEP_JSON + 1);
  if (r || !buf)
    goto out;
  log_info("migration %s of volume %s: settle session from %s authenticated",
           mid, vid, peer);
  while (!last) {
    json_t *req, *args, *result = NULL;
    char *text;

    r = fc_xfer_recv(c, &h, buf, FC_XFER_MAX_STEP_JSON);
    if (r) {
      log_warning("migration %s: settle session from %s ended: %s", mid, peer,
                  strerror(-r));
      break;
    }
    if (h.type == FC_XFER_FETCH && serving) {
      r = serve_fetch(agent, c, vid, buf, h.length, block, why, sizeof why);
      if (r) {
        refuse(c, peer, mid, r, why);
        break;
      }
      continue;
    }
    if (h.type != FC_XFER_STEP) {
      snprintf(why, sizeof why, "frame type %u on a settle stream (only STEP is "
               "taken%s)", h.type, serving ? ", and FETCH" : "");
      refuse(c, peer, mid, -EPROTO, why);
      break;
    }
    buf[h.length] = '\0';
    req = json_loadb((const char *)buf, h.length, 0, NULL);
    args = allowed_step(req, source, mid, vid, why, sizeof why);
    json_decref(req);
    if (!args) {
      refuse(c, peer, mid, -EPERM, why);
      break;
    }
    why[0] = '\0';
    if (!strcmp(json_string_value(json_object_get(args, "step")), "serve")) {
      r = serve_begin(agent, vid, &block, &result, why, sizeof why);
      serving = !r;
    } else {
      r = fc_migration_settle(agent, args, &result, why, sizeof why);
    }
    last = !r && (!strcmp(json_string_value(json_object_get(args, "step")), "release") ||
                  !strcmp(json_string_value(json_object_get(args, "step")), "end") ||
                  !strcmp(json_string_value(json_object_get(args, "step")), "all"));
    json_decref(args);
    if (r) {
      refuse(c, peer, mid, r, why[0] ? why : strerror(-r));
      break;
    }
    text = json_dumps(result, JSON_COMPACT);
    json_decref(result);
    r = text ? fc_xfer_send_json(c, FC_XFER_STEP_DONE, text) : -ENOMEM;
    free(text);
    if (r)
      break;
  }
out:
  free(block);
  free(buf);
}

/* migration-settle: step "all" is this file's (both agents, over the
 * peer's listener), every other step one agent's own (migr_settle.c). */
int
fc_migration_settle(struct fc_agent *agent, json_t *args, json_t **result,
                    char *err, size_t errlen)
{
  const char *step = json_string_value(json_object_get(args, "step"));

  if (!step) {
    snprintf(err, errlen, "settle needs a step: all (this agent and its peer), "
             "list or end (destination), writeback, drop or release (source)");
    return -EINVAL;
  }
  if (!strcmp(step, "all"))
    return fc_migr_settle_here(agent, args, result, err, errlen);
  return fc_migr_settle_step(agent, step, args, result, err, errlen);
}
