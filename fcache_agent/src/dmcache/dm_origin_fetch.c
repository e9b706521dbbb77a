/* SPDX-License-Identifier: Apache-2.0 */
/* Origin reads for hybrid's relay after a settle; see dm_origin_fetch.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dm_origin_fetch.h"

/* dm-clone keeps at most its hydration threshold (32 here) in flight and
 * the VM's reads of blocks not copied yet come on top: a few readers keep
 * an origin of a few spindles or a network volume busy. */
#define READERS 4

struct fetch_item {
  struct fetch_item *next;
  uint64_t ob;
  void *data;
  fc_engine_fetch_done_fn *done;
  void *arg;
};

struct dm_origin_fetch {
  int fd;
  uint32_t bs;
  uint64_t size;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct fetch_item *head, *tail;
  bool stop;
  uint64_t count;
  unsigned nthreads;
  pthread_t threads[READERS];
};

static int
read_block(struct dm_origin_fetch *f, uint8_t *bounce, uint64_t ob)
{
  uint64_t off = ob * f->bs, want = f->bs;
  ssize_t n;

  if (ob > f->size / f->bs)
    return -EINVAL;
  if (off + want > f->size)
    want = f->size - off;      /* the origin's tail: the rest reads as zeros */
  memset(bounce + want, 0, f->bs - want);
  while (want) {
    n = pread(f->fd, bounce, (size_t)want, (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    if (n == 0)
      return -EIO;
    bounce += n;
    off += (uint64_t)n;
    want -= (uint64_t)n;
  }
  return 0;
}

static void *
reader_main(void *arg)
{
  struct dm_origin_fetch *f = arg;
  struct fetch_item *it;
  uint8_t *bounce = NULL;
  int r;

  if (posix_memalign((void **)&bounce, 4096, f->bs))
    bounce = NULL;
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (!f->head && !f->stop)
      pthread_cond_wait(&f->cond, &f->lock);
    it = f->head;
    if (it && !(f->head = it->next))
      f->tail = NULL;
    pthread_mutex_unlock(&f->lock);
    if (!it)
      break;
    r = f->stop ? -ECANCELED : bounce ? read_block(f, bounce, it->ob) : -ENOMEM;
    if (!r) {
      memcpy(it->data, bounce, f->bs);
      pthread_mutex_lock(&f->lock);
      f->count++;
      pthread_mutex_unlock(&f->lock);
    }
    it->done(it->arg, r, false);
    free(it);
  }
  free(bounce);
  return NULL;
}

int
dm_origin_fetch_new(const char *origin, uint64_t origin_bytes, uint32_t block_size,
                    struct dm_origin_fetch **out, char *err, size_t errlen)
{
  struct dm_origin_fetch *f;
  int r;

  if (!block_size || block_size % 512)
    return -EINVAL;
  if (!(f = calloc(1, sizeof *f)))
    return -ENOMEM;
  f->bs = block_size;
  f->size = origin_bytes;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  f->fd = open(origin, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (f->fd < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot open origin %.300s: %s", origin, strerror(-r));
    goto fail;
  }
  for (; f->nthreads < READERS; f->nthreads++)
    if ((r = -pthread_create(&f->threads[f->nthreads], NULL, reader_main, f))) {
      snprintf(err, errlen, "cannot start the origin's readers: %s", strerror(-r));
      goto fail;
    }
  *out = f;
  return 0;
fail:
  dm_origin_fetch_free(f);
  return r;
}

int
dm_origin_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                      fc_engine_fetch_done_fn *done, void *arg)
{
  struct dm_origin_fetch *f = ctx;
  struct fetch_item *it = malloc(sizeof *it);

  (void)required;
  if (!it)
    return -ENOMEM;
  *it = (struct fetch_item){ .ob = ob.n, .data = data, .done = done, .arg = arg };
  pthread_mutex_lock(&f->lock);
  if (f->stop) {
    pthread_mutex_unlock(&f->lock);
    free(it);
    return -ECANCELED;
  }
  if (f->tail)
    f->tail->next = it;
  else
    f->head = it;
  f->tail = it;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->lock);
  return 0;
}

uint64_t
dm_origin_fetch_count(struct dm_origin_fetch *f)
{
  uint64_t n;

  pthread_mutex_lock(&f->lock);
  n = f->count;
  pthread_mutex_unlock(&f->lock);
  return n;
}

void
dm_origin_fetch_free(struct dm_origin_fetch *f)
{
  if (!f)
    return;
  pthread_mutex_lock(&f->lock);
  f->stop = true;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  for (unsigned i = 0; i < f->nthreads; i++)
    pthread_join(f->threads[i], NULL);
  if (f->fd >= 0)
    close(f->fd);
  pthread_cond_destroy(&f->cond);
  pthread_mutex_destroy(&f->lock);
  free(f);
}
