/* SPDX-License-Identifier: Apache-2.0 */
/* vmload: the "VM" of the benchmarks.
 *
 * fio's job of the FirepanIF paper (Figure 5: 4 jobs, rw=randrw,
 * rwmixread=80, random_distribution=zoned:50/5:30/15:20/80, iodepth=32,
 * bs=4k, exclusive region per job) issued over NBD with libnbd's
 * asynchronous API, one connection and one thread per job.  It reports one
 * line per second on stdout and reads commands on stdin: pause (stop
 * issuing and drain), switch URI (reconnect every job to another export),
 * resume, stats, quit: what a VM sees during a live migration.
 *
 * With --verify every write carries a pattern derived from
 * (seed, block, generation) and every read of a block whose last
 * acknowledged write is known is compared with that pattern.
 *
 * See doc/research/vmload.rst for the options, the command protocol, the output
 * format and the verification rule.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <jansson.h>
#include <libnbd.h>

#include "common/config.h"

#define MAX_ZONES 16
#define MAX_JOBS 64
#define MAX_IODEPTH 1024
#define MIN_BS 512u
#define MAX_BS (32u << 20)
#define PICK_TRIES 16
#define MISMATCH_REPORTS 10
#define DRAIN_TIMEOUT_NS (30ull * 1000000000ull)
/* Generation flag: the block's content is unknown (a write to it failed). */
#define GEN_UNKNOWN 0x80000000u
#define GEN_MASK 0x7fffffffu

enum { EXIT_OK = 0, EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_NBD = 3 };
enum { CMD_RUN, CMD_PAUSE, CMD_QUIT };
enum { SLOT_FREE, SLOT_ISSUING, SLOT_INFLIGHT };

struct zone {
  unsigned access_pct;
  unsigned size_pct;
  unsigned cum_access;     /* access_pct of this and earlier zones */
  uint64_t first, count;   /* block range within a job region */
};

struct options {
  const char *uri;
  unsigned jobs;
  unsigned iodepth;
  uint32_t bs;
  uint64_t size;           /* bytes per job region; 0 = export / jobs */
  unsigned rwmix_read;
  struct zone zones[MAX_ZONES];
  unsigned nzones;
  uint64_t seed;
  bool seed_given;
  double duration;
  bool verify;
  bool json;
  const char *trace_path;
};

struct job;

struct slot {
  struct job *job;
  uint8_t *buf;
  uint64_t block;          /* block index within the job region */
  uint32_t gen;            /* write: generation written; read: expected */
  bool write;
  int state;
  uint64_t t0;             /* issue time, ns */
};

struct job {
  unsigned idx;
  pthread_t tid;
  bool started;
  struct nbd_handle *h;
  uint64_t rng[4];
  uint64_t base_block;     /* first block of the region in the export */
  uint64_t nblocks;
  uint32_t *gen;           /* last acknowledged write per block */
  uint16_t *busy;          /* requests in flight per block */
  struct slot *slots;
  unsigned *free_slots;
  unsigned nfree;
  unsigned inflight;
  uint8_t *scratch;        /* expected pattern of a verified read */
  _Atomic uint64_t reads, writes, read_bytes, write_bytes;
  _Atomic uint64_t errors, mismatches, lat_ns, completions;
};

static struct options opt = {
  .jobs = 4, .iodepth = 32, .bs = 4096, .size = 64ull << 20,
  .rwmix_read = 80,
};

static struct job *jobs;
static uint64_t export_size;
static uint32_t pattern_tag;
static FILE *trace_fp;

/* Control shared by the main thread and the jobs. */
static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctl_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int g_cmd = CMD_RUN;
static uint64_t g_epoch;         /* bumped at every command change */
static unsigned g_drained;       /* jobs idle in the current epoch */
static int notify_pipe[2] = { -1, -1 };   /* jobs -> main */
static int signal_pipe[2] = { -1, -1 };   /* signal handler -> main */
static _Atomic int g_fatal;
static char g_fatal_msg[512];
static _Atomic unsigned g_mismatch_reports;

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
  va_list ap;
  fputs("vmload: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (see --help)\n", stderr);
  exit(EXIT_USAGE);
}

__attribute__((format(printf, 2, 3), noreturn))
static void die(int status, const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  fputs("vmload: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(status);
}

static void notify_main(void)
{
  char c = 1;
  ssize_t r;
  do
    r = write(notify_pipe[1], &c, 1);
  while (r < 0 && errno == EINTR);
  /* EAGAIN: the pipe is full, main is going to wake up anyway. */
}

/* The first fatal error wins; the main thread reports it and exits 3. */
__attribute__((format(printf, 1, 2)))
static void job_fatal(const char *fmt, ...)
{
  va_list ap;
  pthread_mutex_lock(&ctl_mu);
  if (!atomic_load(&g_fatal)) {
    va_start(ap, fmt);
    vsnprintf(g_fatal_msg, sizeof g_fatal_msg, fmt, ap);
    va_end(ap);
    atomic_store(&g_fatal, 1);
  }
  pthread_mutex_unlock(&ctl_mu);
  notify_main();
}

static uint64_t splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static uint64_t rng_next(uint64_t s[4])
{
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in [0, n), n > 0 (Lemire's multiply-shift, bias < 2^-32 for
 * the sizes used here). */
static uint64_t rng_below(uint64_t s[4], uint64_t n)
{
  return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

static void put_le64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static uint32_t get_le32(const uint8_t *p)
{
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* The content of export block `block` written with generation `gen`:
 * a 16-byte header (block number, generation, tag derived from the seed),
 * then a splitmix64 stream seeded from (seed, block, gen). */
static void fill_pattern(uint8_t *buf, uint64_t block, uint32_t gen)
{
  uint64_t st = opt.seed ^ (block * 0xd6e8feb86659fd93ull) ^
                ((uint64_t)gen * 0xa0761d6478bd642full);
  put_le64(buf, block);
  put_le32(buf + 8, gen);
  put_le32(buf + 12, pattern_tag);
  for (uint32_t i = 16; i < opt.bs; i += 8) {
    uint64_t v = splitmix64(&st);
    memcpy(buf + i, &v, 8);
  }
}

/* ------------------------------------------------------------------ */
/* NBD connections                                                      */
/* ------------------------------------------------------------------ */

/* Connect to `uri`; on error return NULL with a message in err. */
static struct nbd_handle *connect_export(const char *uri, unsigned idx,
                                         int64_t *size, char *err,
                                         size_t errlen)
{
  char name[32];
  struct nbd_handle *h = nbd_create();
  if (!h) {
    snprintf(err, errlen, "nbd_create: %s", nbd_get_error());
    return NULL;
  }
  snprintf(name, sizeof name, "vmload-job%u", idx);
  nbd_set_handle_name(h, name);
  if (nbd_connect_uri(h, uri) == -1) {
    snprintf(err, errlen, "cannot connect to %s: %s", uri, nbd_get_error());
    nbd_close(h);
    return NULL;
  }
  *size = nbd_get_size(h);
  if (*size < 0) {
    snprintf(err, errlen, "%s: cannot get the export size: %s", uri,
             nbd_get_error());
    nbd_close(h);
    return NULL;
  }
  if (nbd_is_read_only(h) == 1) {
    snprintf(err, errlen, "%s: the export is read-only", uri);
    nbd_close(h);
    return NULL;
  }
  return h;
}

static void disconnect(struct nbd_handle *h)
{
  if (!h)
    return;
  /* A polite NBD_CMD_DISC when the connection still works; an old server
   * that went away during a migration is just closed. */
  if (nbd_aio_is_ready(h) == 1)
    nbd_shutdown(h, 0);
  nbd_close(h);
}

/* ------------------------------------------------------------------ */
/* The jobs                                                             */
/* ------------------------------------------------------------------ */

static void check_read(struct job *j, struct slot *s)
{
  uint64_t block = j->base_block + s->block;
  fill_pattern(j->scratch, block, s->gen);
  if (memcmp(j->scratch, s->buf, opt.bs) == 0)
    return;
  atomic_fetch_add(&j->mismatches, 1);
  if (atomic_fetch_add(&g_mismatch_reports, 1) >= MISMATCH_REPORTS)
    return;
  char got[96];
  uint64_t hb = get_le64(s->buf);
  uint32_t hg = get_le32(s->buf + 8);
  uint32_t ht = get_le32(s->buf + 12);
  if (ht == pattern_tag && hb == block)
    snprintf(got, sizeof got, "gen:%" PRIu32 "%s", hg,
             hg == s->gen ? "(body differs)" : "");
  else if (ht == pattern_tag)
    snprintf(got, sizeof got, "block:%" PRIu64 ",gen:%" PRIu32, hb, hg);
  else
    snprintf(got, sizeof got, "unrecognised:%016" PRIx64 "%016" PRIx64,
             __builtin_bswap64(get_le64(s->buf)),
             __builtin_bswap64(get_le64(s->buf + 8)));
  fprintf(stderr, "MISMATCH job=%u block=%" PRIu64 " expected_gen=%" PRIu32
          " got=%s\n", j->idx, block, s->gen, got);
}

/* Completion callback: runs in the job's thread (inside
 * nbd_aio_notify_*), with the handle's lock held: no nbd_* calls here. */
static int on_complete(void *user_data, int *error)
{
  struct slot *s = user_data;
  struct job *j = s->job;
  uint64_t lat = now_ns() - s->t0;
  uint64_t b = s->block;

  j->busy[b]--;
  if (*error) {
    atomic_fetch_add(&j->errors, 1);
    if (s->write)
      j->gen[b] |= GEN_UNKNOWN;   /* the write may or may not have landed */
  } else if (s->write) {
    j->gen[b] = s->gen;
    atomic_fetch_add(&j->writes, 1);
    atomic_fetch_add(&j->write_bytes, opt.bs);
  } else {
    atomic_fetch_add(&j->reads, 1);
    atomic_fetch_add(&j->read_bytes, opt.bs);
    /* Checked only when the block's last acknowledged write is known and
     * no write to it was issued (or acknowledged) since the read was. */
    if (opt.verify && s->gen != 0 && j->busy[b] == 0 && j->gen[b] == s->gen)
      check_read(j, s);
  }
  atomic_fetch_add(&j->lat_ns, lat);
  atomic_fetch_add(&j->completions, 1);

  j->inflight--;
  j->free_slots[j->nfree++] = (unsigned)(s - j->slots);
  s->state = SLOT_FREE;
  return 1;   /* auto-retire */
}

/* Pick a block of the job region according to the zoned distribution.
 * With --verify a block with a request in flight is not picked again
 * (another one of the same zone is); returns false if none was found. */
static bool pick_block(struct job *j, uint64_t *block)
{
  unsigned r = (unsigned)rng_below(j->rng, 100);
  const struct zone *z = &opt.zones[0];
  for (unsigned i = 0; i < opt.nzones; i++) {
    if (r < opt.zones[i].cum_access) {
      z = &opt.zones[i];
      break;
    }
  }
  for (int tries = 0; tries < PICK_TRIES; tries++) {
    uint64_t b = z->first + rng_below(j->rng, z->count);
    if (!opt.verify || j->busy[b] == 0) {
      *block = b;
      return true;
    }
  }
  return false;
}

/* Issue one request.  1: issued, 0: no block free right now, -1: fatal. */
static int issue_one(struct job *j)
{
  uint64_t b;
  if (j->nfree == 0 || !pick_block(j, &b))
    return 0;
  struct slot *s = &j->slots[j->free_slots[--j->nfree]];
  bool write = rng_below(j->rng, 100) >= opt.rwmix_read;
  uint64_t offset = (j->base_block + b) * opt.bs;
  nbd_completion_callback cb = { .callback = on_complete, .user_data = s };
  int64_t cookie;

  s->block = b;
  s->write = write;
  s->state = SLOT_ISSUING;
  if (write) {
    s->gen = (j->gen[b] & GEN_MASK) + 1;
    if (s->gen > GEN_MASK)
      s->gen = 1;
    fill_pattern(s->buf, j->base_block + b, s->gen);
  } else {
    s->gen = (j->gen[b] & GEN_UNKNOWN) ? 0 : j->gen[b];
  }
  if (trace_fp)
    fprintf(trace_fp, "%u %c %" PRIu64 "\n", j->idx, write ? 'W' : 'R',
            offset);
  j->busy[b]++;
  j->inflight++;
  s->t0 = now_ns();
  if (write)
    cookie = nbd_aio_pwrite(j->h, s->buf, opt.bs, offset, cb, 0);
  else
    cookie = nbd_aio_pread(j->h, s->buf, opt.bs, offset, cb, 0);
  if (cookie == -1) {
    if (s->state == SLOT_ISSUING) {
      /* The completion callback was not called: undo. */
      j->busy[b]--;
      j->inflight--;
      j->free_slots[j->nfree++] = (unsigned)(s - j->slots);
      s->state = SLOT_FREE;
    }
    job_fatal("job %u: cannot issue a request: %s", j->idx, nbd_get_error());
    return -1;
  }
  if (s->state == SLOT_ISSUING)
    s->state = SLOT_INFLIGHT;
  return 1;
}

/* Wait for the socket and let libnbd move (what nbd_poll does, spelled
 * out with a timeout so that a stuck server does not hide the state). */
static int poll_handle(struct job *j)
{
  int fd = nbd_aio_get_fd(j->h);
  if (fd < 0) {
    job_fatal("job %u: NBD connection lost: %s", j->idx, nbd_get_error());
    return -1;
  }
  unsigned dir = nbd_aio_get_direction(j->h);
  struct pollfd pfd = { .fd = fd };
  if (dir & LIBNBD_AIO_DIRECTION_READ)
    pfd.events |= POLLIN;
  if (dir & LIBNBD_AIO_DIRECTION_WRITE)
    pfd.events |= POLLOUT;
  int r = poll(&pfd, 1, 100);
  if (r < 0) {
    if (errno == EINTR)
      return 0;
    job_fatal("job %u: poll: %s", j->idx, strerror(errno));
    return -1;
  }
  if (r == 0)
    return 0;
  if (pfd.revents & (POLLIN | POLLHUP))
    r = nbd_aio_notify_read(j->h);
  else if (pfd.revents & POLLOUT)
    r = nbd_aio_notify_write(j->h);
  else if (pfd.revents & (POLLERR | POLLNVAL)) {
    job_fatal("job %u: NBD connection lost: server closed the socket",
              j->idx);
    return -1;
  } else
    r = 0;
  if (r == -1) {
    job_fatal("job %u: NBD connection lost: %s", j->idx, nbd_get_error());
    return -1;
  }
  return 0;
}

static void *job_main(void *arg)
{
  struct job *j = arg;

  for (;;) {
    int cmd = atomic_load(&g_cmd);
    if (atomic_load(&g_fatal))
      return NULL;
    if (cmd == CMD_RUN) {
      while (j->inflight < opt.iodepth) {
        int r = issue_one(j);
        if (r < 0)
          return NULL;
        if (r == 0)
          break;
      }
    } else if (j->inflight == 0) {
      /* Drained: tell main, then idle until the next command. */
      pthread_mutex_lock(&ctl_mu);
      cmd = atomic_load(&g_cmd);
      if (cmd == CMD_RUN) {
        pthread_mutex_unlock(&ctl_mu);
        continue;
      }
      uint64_t epoch = g_epoch;
      g_drained++;
      notify_main();
      if (cmd == CMD_QUIT) {
        pthread_mutex_unlock(&ctl_mu);
        return NULL;
      }
      while (g_epoch == epoch)
        pthread_cond_wait(&ctl_cv, &ctl_mu);
      pthread_mutex_unlock(&ctl_mu);
      continue;
    }
    if (j->inflight == 0)
      continue;   /* cannot happen: something is always free when idle */
    if (poll_handle(j) < 0)
      return NULL;
  }
}

static void job_init(struct job *j, unsigned idx, uint64_t blocks_per_job)
{
  uint64_t st = opt.seed ^ ((uint64_t)(idx + 1) * 0x2545f4914f6cdd1dull);
  j->idx = idx;
  for (int i = 0; i < 4; i++)
    j->rng[i] = splitmix64(&st);
  j->base_block = (uint64_t)idx * blocks_per_job;
  j->nblocks = blocks_per_job;
  j->gen = calloc(blocks_per_job, sizeof *j->gen);
  j->busy = calloc(blocks_per_job, sizeof *j->busy);
  j->slots = calloc(opt.iodepth, sizeof *j->slots);
  j->free_slots = calloc(opt.iodepth, sizeof *j->free_slots);
  j->scratch = aligned_alloc(4096, ((size_t)opt.bs + 4095) & ~(size_t)4095);
  if (!j->gen || !j->busy || !j->slots || !j->free_slots || !j->scratch)
    die(EXIT_USAGE, "out of memory");
  for (unsigned i = 0; i < opt.iodepth; i++) {
    struct slot *s = &j->slots[i];
    s->job = j;
    s->buf = aligned_alloc(4096, ((size_t)opt.bs + 4095) & ~(size_t)4095);
    if (!s->buf)
      die(EXIT_USAGE, "out of memory");
    memset(s->buf, 0, opt.bs);
    j->free_slots[opt.iodepth - 1 - i] = i;
  }
  j->nfree = opt.iodepth;
}

/* ------------------------------------------------------------------ */
/* Statistics and output                                                */
/* ------------------------------------------------------------------ */

struct totals {
  uint64_t reads, writes, read_bytes, write_bytes;
  uint64_t errors, mismatches, lat_ns, completions;
};

static void sum_totals(struct totals *t)
{
  memset(t, 0, sizeof *t);
  for (unsigned i = 0; i < opt.jobs; i++) {
    struct job *j = &jobs[i];
    t->reads += atomic_load(&j->reads);
    t->writes += atomic_load(&j->writes);
    t->read_bytes += atomic_load(&j->read_bytes);
    t->write_bytes += atomic_load(&j->write_bytes);
    t->errors += atomic_load(&j->errors);
    t->mismatches += atomic_load(&j->mismatches);
    t->lat_ns += atomic_load(&j->lat_ns);
    t->completions += atomic_load(&j->completions);
  }
}

static double round_to(double v, double unit)
{
  return (double)(int64_t)(v / unit + (v >= 0 ? 0.5 : -0.5)) * unit;
}

static void print_json(json_t *o)
{
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER |
                          JSON_REAL_PRECISION(12));
  json_decref(o);
  if (!s)
    die(EXIT_NBD, "out of memory");
  fputs(s, stdout);
  fputc('\n', stdout);
  fflush(stdout);
  free(s);
}

static void report_sample(double t, double interval, const struct totals *cur,
                          const struct totals *prev, bool paused)
{
  double rd = (double)(cur->reads - prev->reads) / interval;
  double wr = (double)(cur->writes - prev->writes) / interval;
  double rmb = (double)(cur->read_bytes - prev->read_bytes) / interval / 1e6;
  double wmb = (double)(cur->write_bytes - prev->write_bytes) / interval / 1e6;
  uint64_t n = cur->completions - prev->completions;
  double lat = n ? (double)(cur->lat_ns - prev->lat_ns) / (double)n / 1e6 : 0;
  const char *state = paused ? "paused" : "running";

  if (opt.json) {
    json_t *o = json_pack("{s:f, s:I, s:I, s:f, s:f, s:f, s:I, s:s, s:I}",
                          "t", round_to(t, 0.1),
                          "read_iops", (json_int_t)(rd + 0.5),
                          "write_iops", (json_int_t)(wr + 0.5),
                          "read_mbps", round_to(rmb, 0.01),
                          "write_mbps", round_to(wmb, 0.01),
                          "lat_ms_avg", round_to(lat, 0.001),
                          "errors", (json_int_t)cur->errors,
                          "state", state,
                          "mismatches", (json_int_t)cur->mismatches);
    print_json(o);
  } else {
    printf("t=%.1f read_iops=%.0f write_iops=%.0f read_mbps=%.2f "
           "write_mbps=%.2f lat_ms_avg=%.3f errors=%" PRIu64 " state=%s\n",
           t, rd, wr, rmb, wmb, lat, cur->errors, state);
    fflush(stdout);
  }
}

static void print_stats(double elapsed, const char *state)
{
  struct totals t;
  char seed[24];
  sum_totals(&t);
  /* The seed as a string: a 64-bit value does not fit every parser's
   * integers, and it is an identifier anyway. */
  snprintf(seed, sizeof seed, "%" PRIu64, opt.seed);
  json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:s}",
                        "type", "stats",
                        "reads", (json_int_t)t.reads,
                        "writes", (json_int_t)t.writes,
                        "read_bytes", (json_int_t)t.read_bytes,
                        "write_bytes", (json_int_t)t.write_bytes,
                        "errors", (json_int_t)t.errors,
                        "mismatches", (json_int_t)t.mismatches,
                        "elapsed_s", round_to(elapsed, 0.001),
                        "state", state,
                        "seed", seed);
  if (!o)
    die(EXIT_NBD, "out of memory");
  print_json(o);
}

/* ------------------------------------------------------------------ */
/* Command line                                                         */
/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
  fprintf(f,
    "usage: vmload --uri URI [--jobs N] [--iodepth N] [--bs BYTES]\n"
    "              [--size BYTES] [--rwmix-read PCT] [--zoned SPEC]\n"
    "              [--seed N] [--duration SECONDS] [--verify] [--json]\n"
    "\n"
    "fio's zoned random read/write job over NBD (libnbd, asynchronous),\n"
    "one connection per job; one report line per second on stdout.\n"
    "Commands on stdin: pause, switch URI, resume, stats, quit.\n"
    "\n"
    "  --uri URI          NBD URI of the export (nbd://, nbd+unix://...)\n"
    "  --jobs N           jobs (connections, exclusive regions); default 4\n"
    "  --iodepth N        requests in flight per job; default 32\n"
    "  --bs BYTES         request size, a multiple of 512; default 4K\n"
    "  --size BYTES       region of each job; default 64M; 0 = export/jobs\n"
    "  --rwmix-read PCT   percentage of reads; default 80\n"
    "  --zoned SPEC       access%%/size%%:...; default 50/5:30/15:20/80\n"
    "  --seed N           random seed; default from getrandom (printed)\n"
    "  --duration SECONDS stop after this long; 0 (default) = until quit\n"
    "  --verify           check every read against the last write\n"
    "  --json             report lines as JSON objects\n"
    "  --trace-offsets F  (testing) log every request: JOB R|W OFFSET\n"
    "\n"
    "Exit status: 0 ok, 1 request errors or mismatches, 2 bad arguments,\n"
    "3 NBD connection failure.  See doc/research/vmload.rst.\n");
}

static unsigned parse_uint(const char *name, const char *s, unsigned lo,
                           unsigned hi)
{
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
    usage_error("--%s: expected an integer in [%u, %u], got '%s'", name, lo,
                hi, s);
  return (unsigned)v;
}

static uint64_t parse_bytes(const char *name, const char *s)
{
  uint64_t v;
  if (s[0] == '-' || fc_parse_size(s, &v) != 0)
    usage_error("--%s: expected a size (like 4096, 64K, 1G), got '%s'",
                name, s);
  return v;
}

/* "50/5:30/15:20/80", optionally prefixed with "zoned:" as in fio. */
static void parse_zones(const char *spec)
{
  const char *p = spec;
  unsigned acc = 0, sz = 0;
  if (strncmp(p, "zoned:", 6) == 0)
    p += 6;
  opt.nzones = 0;
  while (*p) {
    char *end;
    unsigned long a, s;
    if (opt.nzones == MAX_ZONES)
      usage_error("--zoned: at most %d zones", MAX_ZONES);
    errno = 0;
    if (*p < '0' || *p > '9')
      goto bad;
    a = strtoul(p, &end, 10);
    if (errno || *end != '/' || a > 100)
      goto bad;
    p = end + 1;
    if (*p < '0' || *p > '9')
      goto bad;
    s = strtoul(p, &end, 10);
    if (errno || (*end != ':' && *end) || s > 100)
      goto bad;
    p = *end ? end + 1 : end;
    if (*end == ':' && !*p)
      goto bad;
    if (a > 0 && s == 0)
      usage_error("--zoned: zone %u gets %lu%% of the accesses but 0%% of "
                  "the region", opt.nzones + 1, a);
    acc += (unsigned)a;
    sz += (unsigned)s;
    opt.zones[opt.nzones].access_pct = (unsigned)a;
    opt.zones[opt.nzones].size_pct = (unsigned)s;
    opt.zones[opt.nzones].cum_access = acc;
    opt.nzones++;
  }
  if (opt.nzones == 0)
    goto bad;
  if (acc != 100 || sz != 100)
    usage_error("--zoned: access percentages add up to %u and size "
                "percentages to %u; both must be 100", acc, sz);
  return;
bad:
  usage_error("--zoned: expected ACCESS%%/SIZE%%[:ACCESS%%/SIZE%%...] like "
              "50/5:30/15:20/80, got '%s'", spec);
}

static void layout_zones(uint64_t nblocks)
{
  unsigned cum_size = 0;
  for (unsigned i = 0; i < opt.nzones; i++) {
    struct zone *z = &opt.zones[i];
    uint64_t first = nblocks * cum_size / 100;
    cum_size += z->size_pct;
    uint64_t end = nblocks * cum_size / 100;
    z->first = first;
    z->count = end - first;
    if (z->access_pct > 0 && z->count == 0)
      usage_error("--size: a region of %" PRIu64 " blocks is too small for "
                  "zone %u (%u%% of the region)", nblocks, i + 1,
                  z->size_pct);
  }
}

static void parse_args(int argc, char **argv)
{
  enum { O_URI = 256, O_JOBS, O_IODEPTH, O_BS, O_SIZE, O_RWMIX, O_ZONED,
         O_SEED, O_DURATION, O_VERIFY, O_JSON, O_TRACE, O_HELP };
  static const struct option longopts[] = {
    { "uri", required_argument, NULL, O_URI },
    { "jobs", required_argument, NULL, O_JOBS },
    { "iodepth", required_argument, NULL, O_IODEPTH },
    { "bs", required_argument, NULL, O_BS },
    { "size", required_argument, NULL, O_SIZE },
    { "rwmix-read", required_argument, NULL, O_RWMIX },
    { "zoned", required_argument, NULL, O_ZONED },
    { "seed", required_argument, NULL, O_SEED },
    { "duration", required_argument, NULL, O_DURATION },
    { "verify", no_argument, NULL, O_VERIFY },
    { "json", no_argument, NULL, O_JSON },
    { "trace-offsets", required_argument, NULL, O_TRACE },
    { "help", no_argument, NULL, O_HELP },
    { NULL, 0, NULL, 0 },
  };
  const char *zones = "50/5:30/15:20/80";
  int c;

  opterr = 0;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case O_URI: opt.uri = optarg; break;
    case O_JOBS: opt.jobs = parse_uint("jobs", optarg, 1, MAX_JOBS); break;
    case O_IODEPTH:
      opt.iodepth = parse_uint("iodepth", optarg, 1, MAX_IODEPTH);
      break;
    case O_BS: {
      uint64_t v = parse_bytes("bs", optarg);
      if (v < MIN_BS || v > MAX_BS || v % 512)
        usage_error("--bs: must be a multiple of 512 between %u and %u, "
                    "got '%s'", MIN_BS, MAX_BS, optarg);
      opt.bs = (uint32_t)v;
      break;
    }
    case O_SIZE: opt.size = parse_bytes("size", optarg); break;
    case O_RWMIX:
      opt.rwmix_read = parse_uint("rwmix-read", optarg, 0, 100);
      break;
    case O_ZONED: zones = optarg; break;
    case O_SEED: {
      char *end;
      errno = 0;
      opt.seed = strtoull(optarg, &end, 0);
      if (errno || end == optarg || *end || optarg[0] == '-')
        usage_error("--seed: expected an unsigned 64-bit integer, got '%s'",
                    optarg);
      opt.seed_given = true;
      break;
    }
    case O_DURATION: {
      char *end;
      errno = 0;
      opt.duration = strtod(optarg, &end);
      if (errno || end == optarg || *end || !(opt.duration >= 0) ||
          opt.duration > 1e9)
        usage_error("--duration: expected seconds >= 0, got '%s'", optarg);
      break;
    }
    case O_VERIFY: opt.verify = true; break;
    case O_JSON: opt.json = true; break;
    case O_TRACE: opt.trace_path = optarg; break;
    case O_HELP: usage(stdout); exit(EXIT_OK);
    case ':':
      usage_error("option %s needs an argument", argv[optind - 1]);
    default:
      usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    usage_error("unexpected argument '%s'", argv[optind]);
  if (!opt.uri || !*opt.uri)
    usage_error("--uri is required");
  if (opt.size % opt.bs)
    usage_error("--size %" PRIu64 " is not a multiple of --bs %" PRIu32,
                opt.size, opt.bs);
  parse_zones(zones);
}

/* ------------------------------------------------------------------ */
/* The main loop: reports, commands                                     */
/* ------------------------------------------------------------------ */

enum pending { PEND_NONE, PEND_PAUSE, PEND_QUIT };

struct mainloop {
  uint64_t start;
  uint64_t next_tick;
  uint64_t last_tick;
  struct totals prev;
  bool paused;           /* pause requested (draining or drained) */
  uint64_t pause_start;
  enum pending pending;
  uint64_t pending_since;
  bool quit_by_command;
  bool stdin_open;
  char line[8192];
  size_t linelen;
  bool line_overflow;
};

static void set_cmd(int cmd)
{
  pthread_mutex_lock(&ctl_mu);
  atomic_store(&g_cmd, cmd);
  g_epoch++;
  g_drained = 0;
  pthread_cond_broadcast(&ctl_cv);
  pthread_mutex_unlock(&ctl_mu);
}

static unsigned drained_jobs(void)
{
  pthread_mutex_lock(&ctl_mu);
  unsigned n = g_drained;
  pthread_mutex_unlock(&ctl_mu);
  return n;
}

static void ack(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ack(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

static void begin_quit(struct mainloop *m, bool by_command)
{
  m->quit_by_command = by_command;
  m->pending = PEND_QUIT;
  m->pending_since = now_ns();
  set_cmd(CMD_QUIT);
}

static void do_switch(const char *uri)
{
  struct nbd_handle **nh = calloc(opt.jobs, sizeof *nh);
  char err[512];
  if (!nh) {
    ack("error switch: out of memory");
    return;
  }
  for (unsigned i = 0; i < opt.jobs; i++) {
    int64_t size;
    nh[i] = connect_export(uri, i, &size, err, sizeof err);
    if (!nh[i])
      goto fail;
    if ((uint64_t)size != export_size) {
      snprintf(err, sizeof err, "export size %" PRId64 " of %s differs from "
               "%" PRIu64 " of the current export", size, uri, export_size);
      goto fail;
    }
  }
  pthread_mutex_lock(&ctl_mu);
  for (unsigned i = 0; i < opt.jobs; i++) {
    struct nbd_handle *old = jobs[i].h;
    jobs[i].h = nh[i];
    nh[i] = old;
  }
  pthread_mutex_unlock(&ctl_mu);
  for (unsigned i = 0; i < opt.jobs; i++)
    disconnect(nh[i]);
  free(nh);
  ack("ok switched");
  return;
fail:
  for (unsigned i = 0; i < opt.jobs; i++)
    if (nh[i])
      nbd_close(nh[i]);
  free(nh);
  ack("error switch: %s; still on the old export", err);
}

/* Execute one command line.  Returns after starting a drain (the caller
 * stops reading commands until it is over). */
static void run_command(struct mainloop *m, char *line)
{
  char *p = line, *end;
  while (*p == ' ' || *p == '\t')
    p++;
  end = p + strlen(p);
  while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
    *--end = '\0';
  if (!*p)
    return;
  char *arg = p + strcspn(p, " \t");
  if (*arg) {
    *arg++ = '\0';
    while (*arg == ' ' || *arg == '\t')
      arg++;
  }

  if (strcmp(p, "pause") == 0) {
    if (*arg) { ack("error pause takes no argument"); return; }
    if (m->paused) { ack("error already paused"); return; }
    m->paused = true;
    m->pause_start = now_ns();
    m->pending = PEND_PAUSE;
    m->pending_since = m->pause_start;
    set_cmd(CMD_PAUSE);
  } else if (strcmp(p, "resume") == 0) {
    if (*arg) { ack("error resume takes no argument"); return; }
    if (!m->paused) { ack("error not paused"); return; }
    uint64_t t = now_ns();
    m->paused = false;
    set_cmd(CMD_RUN);
    ack("ok resumed paused_ms=%.3f", (double)(t - m->pause_start) / 1e6);
  } else if (strcmp(p, "switch") == 0) {
    if (!*arg) { ack("error switch needs a URI"); return; }
    if (!m->paused) { ack("error switch: pause first"); return; }
    do_switch(arg);
  } else if (strcmp(p, "stats") == 0) {
    if (*arg) { ack("error stats takes no argument"); return; }
    print_stats((double)(now_ns() - m->start) / 1e9,
                m->paused ? "paused" : "running");
    ack("ok stats");
  } else if (strcmp(p, "quit") == 0) {
    if (*arg) { ack("error quit takes no argument"); return; }
    begin_quit(m, true);
  } else {
    ack("error unknown command '%.64s' (pause, resume, switch URI, stats, "
        "quit)", p);
  }
}

/* Run the complete buffered lines, as long as no drain is pending. */
static void run_buffered_commands(struct mainloop *m)
{
  while (m->pending == PEND_NONE) {
    char *nl = memchr(m->line, '\n', m->linelen);
    if (!nl)
      return;
    size_t n = (size_t)(nl - m->line);
    char cmd[sizeof m->line];
    memcpy(cmd, m->line, n);
    cmd[n] = '\0';
    memmove(m->line, nl + 1, m->linelen - n - 1);
    m->linelen -= n + 1;
    if (m->line_overflow) {
      m->line_overflow = false;
      ack("error command line too long");
      continue;
    }
    run_command(m, cmd);
  }
}

static void read_stdin(struct mainloop *m)
{
  if (m->linelen == sizeof m->line) {
    /* A line longer than the buffer: drop it up to its newline. */
    m->linelen = 0;
    m->line_overflow = true;
  }
  ssize_t r = read(STDIN_FILENO, m->line + m->linelen,
                   sizeof m->line - m->linelen);
  if (r < 0) {
    if (errno == EINTR || errno == EAGAIN)
      return;
    r = 0;
  }
  if (r == 0) {
    m->stdin_open = false;
    /* A last line without newline is still a command. */
    if (m->linelen > 0 && m->linelen < sizeof m->line)
      m->line[m->linelen++] = '\n';
    return;
  }
  m->linelen += (size_t)r;
}

static void on_signal(int sig)
{
  char c = (char)sig;
  int saved = errno;
  if (write(signal_pipe[1], &c, 1) < 0) {
    /* nothing to do */
  }
  errno = saved;
}

static void make_pipe(int p[2])
{
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    die(EXIT_NBD, "pipe: %s", strerror(errno));
}

static void drain_fd(int fd)
{
  char buf[64];
  while (read(fd, buf, sizeof buf) > 0)
    ;
}

static int finish(struct mainloop *m)
{
  for (unsigned i = 0; i < opt.jobs; i++)
    if (jobs[i].started)
      pthread_join(jobs[i].tid, NULL);
  struct totals t;
  sum_totals(&t);
  print_stats((double)(now_ns() - m->start) / 1e9, "stopped");
  if (m->quit_by_command)
    ack("ok quit");
  for (unsigned i = 0; i < opt.jobs; i++)
    disconnect(jobs[i].h);
  if (trace_fp && fclose(trace_fp) != 0)
    fprintf(stderr, "vmload: --trace-offsets: %s\n", strerror(errno));
  if (t.errors || t.mismatches) {
    fprintf(stderr, "vmload: %" PRIu64 " failed request(s), %" PRIu64
            " mismatch(es)\n", t.errors, t.mismatches);
    return EXIT_CHECK;
  }
  return EXIT_OK;
}

int main(int argc, char **argv)
{
  parse_args(argc, argv);

  if (!opt.seed_given) {
    if (getrandom(&opt.seed, sizeof opt.seed, 0) != sizeof opt.seed)
      die(EXIT_USAGE, "getrandom: %s", strerror(errno));
  }
  {
    uint64_t st = opt.seed;
    pattern_tag = (uint32_t)splitmix64(&st) ^ 0x564d4c44u;  /* "VMLD" */
  }

  signal(SIGPIPE, SIG_IGN);
  make_pipe(notify_pipe);
  make_pipe(signal_pipe);
  struct sigaction sa = { .sa_handler = on_signal };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  jobs = calloc(opt.jobs, sizeof *jobs);
  if (!jobs)
    die(EXIT_USAGE, "out of memory");

  /* One connection per job, all to the same export. */
  for (unsigned i = 0; i < opt.jobs; i++) {
    char err[512];
    int64_t size;
    jobs[i].h = connect_export(opt.uri, i, &size, err, sizeof err);
    if (!jobs[i].h)
      die(EXIT_NBD, "%s", err);
    if (i == 0)
      export_size = (uint64_t)size;
    else if ((uint64_t)size != export_size)
      die(EXIT_NBD, "%s: connection %u sees size %" PRId64 ", not %" PRIu64,
          opt.uri, i, size, export_size);
  }
  if (opt.size == 0)
    opt.size = export_size / opt.jobs / opt.bs * opt.bs;
  if (opt.size == 0 || opt.size > export_size / opt.jobs)
    die(EXIT_USAGE, "%s: the export (%" PRIu64 " bytes) is too small for "
        "%u job region(s) of %" PRIu64 " bytes (see --size)", opt.uri,
        export_size, opt.jobs, opt.size);
  uint64_t blocks_per_job = opt.size / opt.bs;
  layout_zones(blocks_per_job);

  if (opt.trace_path) {
    trace_fp = fopen(opt.trace_path, "we");
    if (!trace_fp)
      die(EXIT_USAGE, "--trace-offsets %s: %s", opt.trace_path,
          strerror(errno));
  }

  fprintf(stderr, "vmload: seed=%" PRIu64 " jobs=%u iodepth=%u bs=%" PRIu32
          " size=%" PRIu64 " export_size=%" PRIu64 " rwmix_read=%u%s\n",
          opt.seed, opt.jobs, opt.iodepth, opt.bs, opt.size, export_size,
          opt.rwmix_read, opt.verify ? " verify" : "");

  for (unsigned i = 0; i < opt.jobs; i++)
    job_init(&jobs[i], i, blocks_per_job);

  struct mainloop m = { .stdin_open = true };
  m.start = now_ns();
  m.last_tick = m.start;
  m.next_tick = m.start + 1000000000ull;
  uint64_t deadline = opt.duration > 0 ?
      m.start + (uint64_t)(opt.duration * 1e9) : 0;

  for (unsigned i = 0; i < opt.jobs; i++) {
    int e = pthread_create(&jobs[i].tid, NULL, job_main, &jobs[i]);
    if (e)
      die(EXIT_NBD, "pthread_create: %s", strerror(e));
    jobs[i].started = true;
  }

  for (;;) {
    uint64_t now = now_ns();

    if (atomic_load(&g_fatal)) {
      pthread_mutex_lock(&ctl_mu);
      char msg[sizeof g_fatal_msg];
      memcpy(msg, g_fatal_msg, sizeof msg);
      pthread_mutex_unlock(&ctl_mu);
      die(EXIT_NBD, "%s", msg);
    }

    if (m.pending != PEND_NONE && drained_jobs() == opt.jobs) {
      if (m.pending == PEND_QUIT)
        return finish(&m);
      m.pending = PEND_NONE;
      ack("ok paused drain_ms=%.3f", (double)(now - m.pause_start) / 1e6);
      run_buffered_commands(&m);
      continue;
    }
    if (m.pending != PEND_NONE && now - m.pending_since > DRAIN_TIMEOUT_NS)
      die(EXIT_NBD, "requests still in flight %.0f s after %s: the NBD "
          "server does not answer", DRAIN_TIMEOUT_NS / 1e9,
          m.pending == PEND_QUIT ? "quit" : "pause");

    if (now >= m.next_tick) {
      struct totals cur;
      sum_totals(&cur);
      report_sample((double)(now - m.start) / 1e9,
                    (double)(now - m.last_tick) / 1e9, &cur, &m.prev,
                    m.paused);
      m.prev = cur;
      m.last_tick = now;
      while (m.next_tick <= now)
        m.next_tick += 1000000000ull;
    }

    if (deadline && now >= deadline && m.pending != PEND_QUIT) {
      begin_quit(&m, false);
      continue;
    }

    if (!m.stdin_open && m.pending == PEND_NONE && !deadline) {
      /* Nobody can send quit any more: end of input means quit. */
      run_buffered_commands(&m);
      if (m.pending == PEND_NONE)
        begin_quit(&m, false);
      continue;
    }

    uint64_t wake = m.next_tick;
    if (deadline && deadline < wake)
      wake = deadline;
    int timeout = wake > now ? (int)((wake - now + 999999) / 1000000) : 0;
    if (m.pending != PEND_NONE && timeout > 100)
      timeout = 100;

    struct pollfd pfd[3] = {
      { .fd = notify_pipe[0], .events = POLLIN },
      { .fd = signal_pipe[0], .events = POLLIN },
      { .fd = m.stdin_open && m.pending == PEND_NONE ? STDIN_FILENO : -1,
        .events = POLLIN },
    };
    int r = poll(pfd, 3, timeout);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      die(EXIT_NBD, "poll: %s", strerror(errno));
    }
    if (pfd[0].revents)
      drain_fd(notify_pipe[0]);
    if (pfd[1].revents) {
      drain_fd(signal_pipe[0]);
      if (m.pending != PEND_QUIT)
        begin_quit(&m, false);
    }
    if (pfd[2].revents) {
      read_stdin(&m);
      run_buffered_commands(&m);
    }
  }
}
