/* SPDX-License-Identifier: Apache-2.0 */
/* The recovery log of an lr or slr move (move_log.h).
 *
 * Layout: a header (magic, version, the source's URI), then records
 * {magic, length, offset, crc of header fields and data} + data.  A
 * record torn by a crash fails its magic or crc and ends the replay: it
 * was never synced, so no flush acknowledged it.  The log holds the data
 * and not just block numbers because B may be what failed: A must be
 * made whole without reading B.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fdio.h"
#include "move_log.h"
#include "origin_move.h"

#define LOG_MAGIC 0x46434d4f56454c47ull   /* "FCMOVELG" */
#define REC_MAGIC 0x4d52u
#define URI_MAX 1024u
/* The largest write a record may hold; a bigger length is corruption. */
#define REC_MAX (64u << 20)

struct log_header {
  uint64_t magic;
  uint32_t version;
  uint32_t scheme;
  uint32_t uri_len, b_len;
  char uri[URI_MAX];
  char b_uri[URI_MAX];
};

struct rec_header {
  uint32_t magic;
  uint32_t len;
  uint64_t off;
  uint32_t crc;
  uint32_t pad;
};

static uint32_t
rec_crc(const struct rec_header *h, const void *data)
{
  uint32_t c = crc32c(0, &h->len, sizeof h->len);

  c = crc32c(c, &h->off, sizeof h->off);
  return crc32c(c, data, h->len);
}

static int
sync_dir_of(const char *path)
{
  char copy[PATH_MAX];

  if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy)
    return -ENAMETOOLONG;
  return fc_fsync_dir(dirname(copy));
}

int
move_log_create(struct move_log *l, const char *path, const char *a_uri,
                const char *b_uri, uint32_t scheme)
{
  struct log_header h = { .magic = LOG_MAGIC, .version = 1, .scheme = scheme };
  int r;

  if (strlen(a_uri) >= URI_MAX || strlen(b_uri) >= URI_MAX)
    return -ENAMETOOLONG;
  h.uri_len = (uint32_t)strlen(a_uri);
  memcpy(h.uri, a_uri, h.uri_len);
  h.b_len = (uint32_t)strlen(b_uri);
  memcpy(h.b_uri, b_uri, h.b_len);
  l->records = 0;
  l->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (l->fd < 0)
    return -errno;
  r = fc_full_pwrite(l->fd, &h, sizeof h, 0);
  if (!r && lseek(l->fd, sizeof h, SEEK_SET) < 0)
    r = -errno;
  if (!r && fdatasync(l->fd) == -1)
    r = -errno;
  if (!r)
    r = sync_dir_of(path);
  if (r) {
    close(l->fd);
    l->fd = -1;
    unlink(path);
    return r;
  }
  pthread_mutex_init(&l->lock, NULL);
  return 0;
}

int
move_log_append(struct move_log *l, const void *buf, uint32_t count, uint64_t off)
{
  struct rec_header h = { .magic = REC_MAGIC, .len = count, .off = off };
  off_t at;
  int r;

  h.crc = rec_crc(&h, buf);
  /* One lock for both parts: records never interleave. */
  pthread_mutex_lock(&l->lock);
  at = lseek(l->fd, 0, SEEK_END);
  r = at < 0 ? -errno : fc_full_pwrite(l->fd, &h, sizeof h, at);
  if (!r)
    r = fc_full_pwrite(l->fd, buf, count, at + (off_t)sizeof h);
  if (!r)
    l->records++;
  pthread_mutex_unlock(&l->lock);
  return r;
}

int
move_log_sync(struct move_log *l)
{
  return fdatasync(l->fd) == -1 ? -errno : 0;
}

void
move_log_close(struct move_log *l)
{
  if (l->fd >= 0) {
    close(l->fd);
    pthread_mutex_destroy(&l->lock);
  }
  l->fd = -1;
}

int
move_log_replay(const char *path, const char *a_uri, struct fc_origin *a, int *matches,
                struct move_log_info *info)
{
  struct log_header h;
  struct rec_header rh;
  void *buf = NULL;
  off_t at = sizeof h;
  int fd, r, n = 0;

  *matches = 0;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  r = fc_full_pread(fd, &h, sizeof h, 0);
  /* A URI with a NUL inside its length is no header move_log_create
   * wrote: read up to the NUL, "/a\0junk" would pass for the source "/a"
   * and its records be written over it. */
  if (r || h.magic != LOG_MAGIC || h.version != 1 || h.uri_len >= URI_MAX ||
      h.b_len >= URI_MAX || memchr(h.uri, '\0', h.uri_len) ||
      memchr(h.b_uri, '\0', h.b_len)) {
    /* Torn before its first record could be written: nothing to do. */
    r = 0;
    goto out;
  }
  h.uri[h.uri_len] = '\0';
  if (strcmp(h.uri, a_uri) != 0)
    goto out;
  *matches = 1;
  if (info) {
    h.b_uri[h.b_len] = '\0';
    info->scheme = h.scheme;
    memcpy(info->b_uri, h.b_uri, h.b_len + 1);
  }
  /* Only lr, slr and aio keep a log, each with its own idea of which
   * writes reached which side: a log of any other scheme (a newer
   * agent's, or damaged) cannot be replayed safely, nor dropped. */
  if (h.scheme < FC_MOVE_LR || h.scheme > FC_MOVE_AIO) {
    r = -EPROTONOSUPPORT;
    goto out;
  }
  for (;;) {
    if (fc_full_pread(fd, &rh, sizeof rh, at) || rh.magic != REC_MAGIC ||
        rh.len == 0 || rh.len > REC_MAX || rh.off > a->size ||
        rh.len > a->size - rh.off)
      break;
    free(buf);
    if (!(buf = malloc(rh.len))) {
      r = -ENOMEM;
      goto out;
    }
    if (fc_full_pread(fd, buf, rh.len, at + (off_t)sizeof rh) ||
        rec_crc(&rh, buf) != rh.crc)
      break;
    r = fc_origin_pwrite(a, buf, rh.len, rh.off, false);
    if (r)
      goto out;
    n++;
    at += (off_t)(sizeof rh + rh.len);
  }
  r = fc_origin_flush(a);
out:
  free(buf);
  close(fd);
  return r ? r : n;
}
