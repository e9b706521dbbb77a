/* SPDX-License-Identifier: Apache-2.0 */
/* Live cache migration of one volume between two agents.
 *
 * The orchestrator (nova_ext.migration) gives both agents the same
 * migration id and a one-time token, then drives the source through the
 * phases: start (connect; firepan copies here while the VM is paused),
 * switchover (the VM has moved: freeze, flush or list dirty data, open the
 * destination's gate), finish (wait until the destination holds what it
 * needs, then release the source), or abort (before switchover only: the
 * source keeps the VM and its cache).  See doc/reference/migration.rst.
 */
#ifndef FCACHE_MIGRATION_H
#define FCACHE_MIGRATION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "common/ratelimit.h"
#include "engine/engine.h"
#include "xfer_conn.h"
#include "xfer_key.h"

struct fc_agent;
struct fc_invfilter;
struct fc_volume;

enum fc_migr_state {
  FC_MS_PREPARED = 0,   /* registered, no stream yet */
  FC_MS_CONNECTED,      /* stream authenticated */
  FC_MS_SWITCHED,       /* the VM runs on the destination */
  FC_MS_COMPLETED,      /* destination holds everything it needs */
  FC_MS_FAILED,
  FC_MS_ABORTED,
  FC_MS_SETTLED,        /* failed after the switch, then settled */
};

#define FC_TOKEN_HEX 64

struct fc_migration {
  /* Id, volume, role, strategy: what the engine sees (engine.h); e.vol is
   * cleared, under lock, when the volume is released. */
  struct fc_engine_migr e;
  char token[FC_TOKEN_HEX + 1];
  bool token_used;
  /* migration_tls = pinned: this end's key pair, and the fingerprint of
   * the peer's certificate, the only one the stream accepts. */
  struct fc_xfer_key *key;
  uint8_t peer_fp[FC_XFER_FP_BYTES];
  /* References (under agent->migr_lock): the registry's, and one per
   * caller of fc_migration_find / fc_migration_for_volume until its
   * fc_migration_put.  The last put joins the threads and frees. */
  unsigned refs;
  char peer[160];                /* source: destination's migration_listen */
  /* Kept with the volume's mark (fc_migr_mark_volume): the secret a later
   * settle session authenticates with, made by the destination and sent
   * in WELCOME ("" if the source's peer predates it), and the peer's
   * migration_listen (the destination learns the source's from HELLO). */
  char settle_secret[FC_SETTLE_SECRET_HEX + 1];
  char settle_peer[160];
  struct fc_agent *agent;
  uint32_t bs;

  pthread_mutex_t lock;
  pthread_cond_t cond;
  enum fc_migr_state state;
  char error[512];
  bool stopping;
  bool connected;
  struct fc_xfer_conn conn;
  pthread_t rx_thread, worker_thread;
  bool rx_running, worker_running;

  /* progress */
  uint64_t blocks_total, blocks_done, bytes_done;
  uint64_t started_ns, switch_begin_ns, switched_ns, completed_ns;
  uint64_t downtime_ns;
  uint64_t invalidated;
  uint64_t origin_read_at_switch;

  /* Both ends: the destination decides (WELCOME's "order") that it puts
   * its LRU back in the hot list's order afterwards, so the source's copy
   * may read the cache in the device's order; and the stream's credits
   * (blocks the source may send before the destination frees room). */
  bool order_after;
  uint32_t credits;

  /* What only the source end uses (e.role == FC_MIGR_SOURCE). */
  struct {
    struct fc_ratelimit rl;
    uint64_t rate_limit_bps;
    uint64_t *bg;                  /* background list: oblock | dirty bit */
    uint32_t bg_n, bg_next;
    bool bg_started, done_sent;
    /* cloudcache_variant = on_demand: the background copy (the dirty
     * blocks still here) is listed only at this CLOCK_MONOTONIC time; 0
     * when nothing is held. */
    uint64_t bg_hold_until_ns;
    /* Held so: the dirty blocks the destination fetched meanwhile, which
     * the copy after the hold leaves out (the destination has them). */
    struct fc_invfilter *fetched_dirty;
    uint64_t *fetchq;              /* on-demand requests, FIFO */
    uint32_t fetchq_n, fetchq_cap;
    bool complete_received;
    bool firepan_copied;
    /* Dirty blocks sent and not yet acknowledged: an ACK lets the source
     * forget only these -- the destination cannot hold anything else. */
    struct fc_invfilter *sent_dirty;
    /* The destination acknowledges the blocks it fetched too (WELCOME's
     * "ack_fetched"): then those served dirty to a FETCH and not yet
     * acknowledged are the other blocks an ACK may name.  A block served
     * clean is in neither set: the origin has it, and an ACK of it is a
     * broken peer's. */
    bool ack_fetched;
    struct fc_invfilter *served_dirty;
    /* The switchover has begun: from here on the destination, not this
     * host, answers for the volume, so READs get F_RETRY. */
    bool switch_begun;
    /* The destination confirms the SWITCH (WELCOME's "switch_ack"), and
     * has (SWITCHED). */
    bool switch_ack, switch_acked;
    /* The destination copies by fetching (WELCOME's "background":
     * false): the background list is empty. */
    bool no_background;
    struct peek_req *readq;        /* destination READs, FIFO */
    uint32_t readq_n;
    /* A migration-finish is forgetting the volume's blocks, without
     * host.lock; another finish waits on cond for it. */
    bool releasing_source;
  } src;

  /* What only the destination end uses (e.role == FC_MIGR_DEST). */
  struct {
    struct dest_queue *inq;        /* background blocks awaiting install */
    /* Frees inq: set with it, so that fc_migr_join (migr_common.c), which
     * every end and phase calls, frees it without calling up into the
     * destination's files. */
    void (*inq_free)(struct fc_migration *m);
    struct fetch_wait *waiters;    /* on-demand fetches in flight */
    /* Streams connected so far: a fetch sent on an older one (or none)
     * is sent again on the current one (migr_dest_remote.c). */
    uint64_t conn_gen;
    /* The thread that ends fetches past their time and sends those that
     * waited for a stream; started with the first fetch, and stopped by
     * fc_migr_join through fetcher_join (set with it, as inq_free). */
    pthread_t fetcher;
    bool fetcher_running, fetcher_stop;
    void (*fetcher_join)(struct fc_migration *m);
    uint64_t *hot;                 /* cachemior: hot list to preload */
    uint32_t hot_n, hot_cap;
    unsigned preload_peak;         /* cachemior: most preload reads in flight at once */
    uint64_t *to_ack;              /* dirty blocks installed, not yet acked */
    uint32_t to_ack_n, to_ack_cap;
    /* The source accepts ACKs of blocks it served dirty to a FETCH (its
     * HELLO's "ack_fetched") and this engine reports the ones it installs
     * (acks_fetched): WELCOME says so, and the fetcher acknowledges them
     * (migr_dest_remote.c).  An older source never gets such an ACK. */
    bool ack_fetched;
    bool fetched_to_ack;           /* to_ack holds fetched blocks: flush it */
    bool switch_received, done_received, complete_sent;
    bool peer_reads;               /* the source answers READ (its HELLO said so) */
    bool peer_switch_ack;          /* the source waits for SWITCHED (its HELLO said so) */
    /* The engine's in_switch fetches (fetch_hydrates): it runs in this
     * thread while the receiver goes on; joined by fc_migr_join. */
    pthread_t switcher;
    bool switcher_running;
    uint64_t listed;               /* LIST entries so far (receiver thread) */
    uint64_t ordered;              /* F_ORDER LIST entries so far (same) */
    struct read_wait *read_waiters;  /* READs in flight */
    uint32_t reads_inflight;
    uint64_t next_read_tag;
    uint64_t forwarded_reads;
    /* dest: COMPLETE is being sent.  The source may get it, let go and close
     * the stream before the send returns; the receiver must not take that
     * close for a lost source. */
    bool complete_sending;
  } dst;

  /* Counted in agent->migr_totals (fc_migr_account_locked). */
  bool accounted;
};

/* migr_common.c */
const char *fc_migr_state_name(enum fc_migr_state s);

/* The agent's listener for incoming streams (migration_listen). */
struct fc_migr_listener;
struct fc_migr_listener *fc_migr_listen(struct fc_agent *agent, const char *hostport,
                                        char *err, size_t errlen);
void fc_migr_listener_stop(struct fc_migr_listener *l);

/* The listener and the registry live in struct fc_agent but belong here:
 * start them after fc_agent_open, stop them before fc_agent_close
 * (migr_phases.c, at the top of the folder: it starts the listener and
 * registers the host's forgetting hook). */
int fc_migrations_start(struct fc_agent *agent, char *err, size_t errlen);
void fc_migrations_stop(struct fc_agent *agent);

/* Registry (agent->migr_lock).  Both return a reference, or NULL: give it
 * back with fc_migration_put.  A finished migration stays listed for
 * migration-status until a new one needs its slot. */
struct fc_migration *fc_migration_find(struct fc_agent *agent, const char *id);
/* The migration that holds v now (not one that ended), or NULL. */
struct fc_migration *fc_migration_for_volume(struct fc_agent *agent,
                                             const struct fc_volume *v);
void fc_migration_put(struct fc_migration *m);
/* Migrations under way (not ended) by role, 0 source and 1 destination,
 * for the metrics. */
void fc_migrations_in_progress(struct fc_agent *agent, unsigned out[2]);
/* volume-detach under agent->host.lock: refused while a live migration
 * holds the volume (unless that migration is releasing it); afterwards no
 * migration points at the volume.  discard_dirty: drop the volume's
 * dirty blocks instead of writing them back (fc_agent_discard_locked). */
int fc_migration_detach_locked(struct fc_agent *agent, const char *id,
                               bool discard_dirty, uint32_t *dropped, char *err,
                               size_t errlen);

/* Control operations (control_migr.c calls these). */
int fc_migration_incoming(struct fc_agent *agent, json_t *args, json_t **result,
                          char *err, size_t errlen);
int fc_migration_outgoing(struct fc_agent *agent, json_t *args, json_t **result,
                          char *err, size_t errlen);
/* migr_keys.c: the source's key pair, made before the destination prepares
 * (migration_tls = pinned); migration-outgoing takes it. */
int fc_migration_key(struct fc_agent *agent, json_t *args, json_t **result,
                     char *err, size_t errlen);
int fc_migration_start(struct fc_migration *m, char *err, size_t errlen);
int fc_migration_switchover(struct fc_migration *m, char *err, size_t errlen);
/* migration-finish waits at most this long (its timeout_s). */
#define FC_MIGRATION_FINISH_MAX_S 86400u
int fc_migration_finish(struct fc_migration *m, int timeout_ms, char *err, size_t errlen);
int fc_migration_abort(struct fc_migration *m, char *err, size_t errlen);
json_t *fc_migration_json(struct fc_migration *m);
/* After a failure past the switchover: step "all" runs both agents'
 * steps (migr_settle_peer.c), any other step is fc_migr_settle_step.  A
 * page of the destination's list, and the blocks one writeback or drop
 * step names, hold at most FC_SETTLE_LIST_MAX blocks. */
#define FC_SETTLE_LIST_MAX 4096u
int fc_migration_settle(struct fc_agent *agent, json_t *args, json_t **result,
                        char *err, size_t errlen);
/* migr_settle.c: one of this agent's own settle steps (list, end,
 * writeback, drop, release). */
int fc_migr_settle_step(struct fc_agent *agent, const char *step, json_t *args,
                        json_t **result, char *err, size_t errlen);

/* migr_settle_peer.c: step "all" of migration-settle, run by one agent
 * with its peer over the peer's migration listener. */
int fc_migr_settle_here(struct fc_agent *agent, json_t *args, json_t **result,
                        char *err, size_t errlen);
struct fc_xfer_auth;
/* The PSK of a settle session's identity ("settle:<id>"): 0, or -ENOENT
 * when no volume here keeps a settle secret for that migration. */
int fc_migr_settle_auth(struct fc_agent *agent, const char *identity,
                        struct fc_xfer_auth *auth);
/* Answer a settle stream whose HELLO was read (identity: what its TLS
 * session authenticated, "" in x509 and none mode). */
void fc_migr_settle_serve(struct fc_agent *agent, struct fc_xfer_conn *c,
                          json_t *hello, const char *identity, const char *peer);

/* Internal, shared by the files of migration/.
 *
 * migr_common.c, the bottom of the folder (it calls none of the files
 * below but the transfer stream's): */
bool fc_migration_id_valid(const char *id);
/* The nice value of the threads that move blocks (sender, receivers,
 * installers): what lets a rate-limited copy keep its rate on a busy host. */
#define FC_MIGR_NICE (-5)
/* Name the calling transfer thread (seen in perf and top) and give it
 * FC_MIGR_NICE. */
void fc_migr_thread_setup(const char *name);
/* m just reached COMPLETED, FAILED or ABORTED: count it in the agent's
 * totals, once.  Under m->lock. */
void fc_migr_account_locked(struct fc_migration *m);
void fc_migr_fail(struct fc_migration *m, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));
/* Stop m's transfer threads and close its stream, either end. */
void fc_migr_join(struct fc_migration *m);
/* Persist (or clear, with tag NULL) the volume's unfinished migration. */
int fc_migr_mark_volume(struct fc_migration *m, const char *tag);

/* migr_keys.c: the key migration-key made for id and volume_id, taken out
 * of the store (*out is the caller's): 0, or -ENOENT / -EINVAL with a
 * message. */
int fc_migr_key_take(const char *id, const char *volume_id, struct fc_xfer_key **out,
                     char *err, size_t errlen);
/* Drop every key no migration took (at exit). */
void fc_migr_keys_clear(void);
/* migr_registry.c: add a new migration to the registry (its one reference
 * becomes the registry's), evicting a finished one if full; -EBUSY with a
 * message. */
int fc_migr_registry_add(struct fc_agent *agent, struct fc_migration *m, char *err,
                         size_t errlen);
/* Its threads joined, everything it owns freed (the last reference). */
void fc_migr_free(struct fc_migration *m);
/* At exit, once the control socket and the listener are closed: drop
 * every migration (nobody else holds a reference any more). */
void fc_migr_registry_stop_all(struct fc_agent *agent);
/* migr_source.c */
int fc_migr_source_connect(struct fc_migration *m, char *err, size_t errlen);
int fc_migr_source_switch(struct fc_migration *m, char *err, size_t errlen);
int fc_migr_source_copy_before_switch(struct fc_migration *m, char *err, size_t errlen);
/* migr_dest.c.  The source's HELLO carried the volume's allocation
 * account (state: its "allocation", or NULL): the engine takes it. */
void fc_migr_dest_allocation(struct fc_migration *m, json_t *state);
/* The listener authenticated a stream for m: m takes it over (c is left
 * empty). */
int fc_migr_dest_accept(struct fc_migration *m, struct fc_xfer_conn *c);
int fc_migr_dest_begin(struct fc_migration *m);
/* migr_dest_remote.c: the engine's way to the source (struct
 * fc_engine_migr's calls). */
int fc_migr_dest_read(void *ctx, void *buf, uint32_t count, uint64_t off);
int fc_migr_dest_fetch(void *ctx, oblock_t ob, void *data, bool *dirty, bool required);
int fc_migr_dest_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                             fc_engine_fetch_done_fn *done, void *arg);
/* The engine installed a dirty block it fetched (fc_engine_migr's
 * fetched_dirty): acknowledged to the source once durable, where the
 * source accepts that. */
void fc_migr_dest_fetched(void *ctx, oblock_t ob);
/* migr_dest.c: what the source's authenticated HELLO says about the
 * stream (reads, switch_ack, rate_limit_bps, ack_fetched).  Under
 * m->lock. */
void fc_migr_dest_hello_locked(struct fc_migration *m, json_t *hello);

#endif
