/* SPDX-License-Identifier: Apache-2.0 */
/* relay_kdev: the relay of a dmcache hybrid migration, end to end against
 * the real kernel but in one process (tests/functional/
 * test_dmcache_uml.py::test_relay_source, inside user-mode Linux): a
 * /dev/nbdN connected by dmcache/dm_nbd.c and answered by
 * dmcache/dm_relay.c, whose fetches are the migration's own
 * (migration/migr_dest_remote.c: fc_migr_dest_fetch_start) over a
 * transfer stream on a socketpair, at whose other end a thread of this
 * program plays the source: it answers each FETCH of an origin block
 * with the block read from SOURCE_CACHE (the source's frozen cache-data
 * device, at the source's own cache block), or ABSENT.  What is not the
 * agent's: the migration around the fetches (no handshake, no agent), and
 * the destination's receiver, which here hands the source's replies to
 * the fetches as migr_dest.c's does.
 *
 *   relay_kdev [-b BLOCK] [-m MAX_INFLIGHT] [-d DEAD_S] SOURCE_CACHE MAP
 *
 * MAP: a first line "N" (the destination's cache blocks), then lines
 * "c ob s": destination cache block c holds origin block ob, which the
 * source caches at its cache block s (s = "-": the source does not hold
 * it, and answers ABSENT).  Unlisted cache blocks are unmapped.
 *
 * Prints "DEVICE /dev/nbdN" once the device serves, then reads commands,
 * one a line, from stdin:
 *   stats      "STATS reads R fetched F zero_blocks Z fetch_errors E
 *               inflight_peak P answered A"
 *   stall      the source stops answering ("STALLED")
 *   resume     it answers again, what it held first ("RESUMED")
 *   drop       the stream breaks: the destination's migration is no
 *              longer connected and the source forgets what it was asked
 *              and not answered ("DROPPED")
 *   reconnect  a stream again (a new connection's generation): the
 *              fetches waiting are sent again ("RECONNECTED")
 *   disconnect disconnect the device and exit ("DISCONNECTED rc"); also
 *              at the end of stdin
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"
#include "dmcache/dm_nbd.h"
#include "dmcache/dm_relay.h"
#include "migration/migr_dest_priv.h"
#include "migration/migration.h"

#define NO_BLOCK UINT64_MAX

struct source {
  struct fc_xfer_conn conn;     /* the source's end of the stream */
  int cache_fd;
  uint32_t bs;
  uint64_t *ob, *sblock;        /* origin block -> source cache block */
  size_t n;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stalled, dropped;
  unsigned long long answered;
};

static uint64_t
source_block(const struct source *s, uint64_t ob)
{
  for (size_t i = 0; i < s->n; i++)
    if (s->ob[i] == ob)
      return s->sblock[i];
  return NO_BLOCK;
}

/* Answer one FETCH of ob, unless stalled (wait) or dropped (forget). */
static int
source_answer(struct source *s, uint64_t ob, uint8_t *buf)
{
  uint64_t sb = source_block(s, ob);
  bool drop;
  int r;

  pthread_mutex_lock(&s->lock);
  while (s->stalled && !s->dropped)
    pthread_cond_wait(&s->cond, &s->lock);
  drop = s->dropped;
  pthread_mutex_unlock(&s->lock);
  if (drop)
    return 0;
  fc_put_le64(buf, ob);
  if (sb == NO_BLOCK)
    return fc_xfer_send(&s->conn, FC_XFER_BLOCK, FC_XFER_F_REPLY | FC_XFER_F_ABSENT, buf, 8,
                        NULL, 0);
  if ((r = fc_full_pread(s->cache_fd, buf + 8, s->bs, (off_t)(sb * s->bs))))
    return r;
  /* Counted before the send: once the reply is on the stream the kernel's
   * read can complete, and a "stats" the test sends then must see it. */
  pthread_mutex_lock(&s->lock);
  s->answered++;
  pthread_mutex_unlock(&s->lock);
  return fc_xfer_send(&s->conn, FC_XFER_BLOCK, FC_XFER_F_REPLY, buf, 8 + s->bs, NULL, 0);
}

static void *
source_main(void *arg)
{
  struct source *s = arg;
  uint8_t *buf = malloc(FC_XFER_MAX_PAYLOAD), *out = malloc(8 + s->bs);
  struct fc_xfer_header h;

  while (buf && out && fc_xfer_recv(&s->conn, &h, buf, FC_XFER_MAX_PAYLOAD) == 0) {
    if (h.type != FC_XFER_FETCH)
      continue;
    for (uint32_t i = 0; i + 8 <= h.length; i += 8)
      if (source_answer(s, fc_get_le64(buf + i), out))
        goto out;
  }
out:
  free(buf);
  free(out);
  return NULL;
}

/* The destination's receiver: the source's replies to the fetches. */
static void *
receiver_main(void *arg)
{
  struct fc_migration *m = arg;
  uint8_t *buf = malloc(FC_XFER_MAX_PAYLOAD);
  struct fc_xfer_header h;

  while (buf && fc_xfer_recv(&m->conn, &h, buf, FC_XFER_MAX_PAYLOAD) == 0)
    if (h.type == FC_XFER_BLOCK && (h.flags & FC_XFER_F_REPLY) &&
        h.length == 8 + ((h.flags & FC_XFER_F_ABSENT) ? 0 : m->bs))
      fc_migr_dest_deliver_reply(m, fc_get_le64(buf), h.flags, buf + 8);
  free(buf);
  return NULL;
}

static void
set_connected(struct fc_migration *m, bool on)
{
  pthread_mutex_lock(&m->lock);
  m->connected = on;
  if (on)
    m->dst.conn_gen++;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
}

static void
source_set(struct source *s, bool *flag, bool on)
{
  pthread_mutex_lock(&s->lock);
  *flag = on;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

static void
usage(const char *prog)
{
  fprintf(stderr, "usage: %s [-b BLOCK] [-m MAX_INFLIGHT] [-d DEAD_S] SOURCE_CACHE MAP\n", prog);
  exit(2);
}

int
main(int argc, char **argv)
{
  static struct fc_migration m;
  static struct source s = { .cache_fd = -1, .bs = 32768 };
  struct dm_relay_params rp = { .volume = "relay_kdev", .max_inflight = 32 };
  struct dm_nbd_params np = { .index = -1, .threads = 4 };
  struct dm_relay *relay;
  struct dm_relay_stats st;
  struct fc_export exp;
  struct dm_nbd *d;
  pthread_t src_thr, rx_thr;
  unsigned long long nb, c, ob;
  char line[128], sb[32];
  uint64_t *map;
  FILE *f;
  int opt, sv[2], r;

  fc_log_setup(FC_LOG_STDERR, FC_LOG_INFO);
  while ((opt = getopt(argc, argv, "b:m:d:")) != -1) {
    switch (opt) {
    case 'b': s.bs = (uint32_t)strtoul(optarg, NULL, 10); break;
    case 'm': rp.max_inflight = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'd': np.dead_conn_timeout_s = (unsigned)strtoul(optarg, NULL, 10); break;
    default: usage(argv[0]);
    }
  }
  if (optind + 2 != argc)
    usage(argv[0]);
  s.cache_fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
  f = fopen(argv[optind + 1], "r");
  if (s.cache_fd < 0 || !f || fscanf(f, "%llu", &nb) != 1 || !nb) {
    fprintf(stderr, "relay_kdev: cannot read %s or %s\n", argv[optind], argv[optind + 1]);
    return 1;
  }
  map = malloc(nb * sizeof *map);
  s.ob = malloc(nb * sizeof *s.ob);
  s.sblock = malloc(nb * sizeof *s.sblock);
  if (!map || !s.ob || !s.sblock)
    return 1;
  for (c = 0; c < nb; c++)
    map[c] = DM_RELAY_UNMAPPED;
  while (fscanf(f, "%llu %llu %31s", &c, &ob, sb) == 3 && c < nb && s.n < nb) {
    map[c] = ob;
    s.ob[s.n] = ob;
    s.sblock[s.n++] = strcmp(sb, "-") ? strtoull(sb, NULL, 10) : NO_BLOCK;
  }
  fclose(f);

  /* The destination's migration, as far as its fetches need one. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return 1;
  fc_xfer_conn_init(&m.conn, sv[0]);
  fc_xfer_conn_init(&s.conn, sv[1]);
  pthread_mutex_init(&m.lock, NULL);
  pthread_cond_init(&m.cond, NULL);
  pthread_mutex_init(&s.lock, NULL);
  pthread_cond_init(&s.cond, NULL);
  m.e.role = FC_MIGR_DEST;
  m.bs = s.bs;
  m.state = FC_MS_SWITCHED;
  set_connected(&m, true);
  if (pthread_create(&src_thr, NULL, source_main, &s) ||
      pthread_create(&rx_thr, NULL, receiver_main, &m))
    return 1;

  rp.block_size = s.bs;
  rp.nr_blocks = nb;
  rp.oblock = map;
  rp.fetch = fc_migr_dest_fetch_start;
  rp.fetch_ctx = &m;
  if ((r = dm_relay_new(&rp, &relay))) {
    fprintf(stderr, "relay_kdev: %s\n", strerror(-r));
    return 1;
  }
  dm_relay_export(relay, &exp);
  if ((r = dm_nbd_connect(&exp, &np, &d)) < 0) {
    fprintf(stderr, "relay_kdev: %s\n", strerror(-r));
    return 1;
  }
  printf("DEVICE /dev/nbd%d\n", dm_nbd_index(d));
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
    if (!strcmp(line, "stats\n")) {
      unsigned long long answered;

      dm_relay_stats(relay, &st);
      pthread_mutex_lock(&s.lock);
      answered = s.answered;
      pthread_mutex_unlock(&s.lock);
      printf("STATS reads %llu fetched %llu zero_blocks %llu fetch_errors %llu "
             "inflight_peak %u answered %llu\n", (unsigned long long)st.reads,
             (unsigned long long)st.fetched, (unsigned long long)st.zero_blocks,
             (unsigned long long)st.fetch_errors, st.inflight_peak, answered);
    } else if (!strcmp(line, "stall\n")) {
      source_set(&s, &s.stalled, true);
      printf("STALLED\n");
    } else if (!strcmp(line, "resume\n")) {
      source_set(&s, &s.stalled, false);
      printf("RESUMED\n");
    } else if (!strcmp(line, "drop\n")) {
      set_connected(&m, false);
      source_set(&s, &s.dropped, true);
      printf("DROPPED\n");
    } else if (!strcmp(line, "reconnect\n")) {
      source_set(&s, &s.dropped, false);
      set_connected(&m, true);
      printf("RECONNECTED\n");
    } else if (!strcmp(line, "disconnect\n")) {
      break;
    } else {
      printf("ERROR unknown command\n");
    }
    fflush(stdout);
  }
  /* The kernel first (it fails what it still queues), then the
   * migration's end ends any fetch left, then the relay. */
  source_set(&s, &s.stalled, false);
  r = dm_nbd_disconnect(d);
  pthread_mutex_lock(&m.lock);
  m.stopping = true;
  pthread_cond_broadcast(&m.cond);
  pthread_mutex_unlock(&m.lock);
  if (m.dst.fetcher_join)
    m.dst.fetcher_join(&m);
  fc_xfer_conn_shutdown(&m.conn);
  fc_xfer_conn_shutdown(&s.conn);
  pthread_join(rx_thr, NULL);
  pthread_join(src_thr, NULL);
  dm_relay_free(relay);
  printf("DISCONNECTED %d\n", r);
  return r < 0 ? 1 : 0;
}
