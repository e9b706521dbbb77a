/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fdio.h"
#include "common/log.h"
#include "metadata.h"

struct md_header {
  char magic[8];
  uint32_t version;
  uint32_t block_size;
  uint32_t nr_blocks;
  uint32_t state;
  uint32_t record_size;
  uint32_t crc;              /* crc32c of the bytes before it */
};

_Static_assert(sizeof(struct fc_md_record) == 32, "record is 32 bytes on disk");

static off_t
record_offset(uint32_t n)
{
  return (off_t)FC_MD_HEADER_SIZE + (off_t)n * sizeof(struct fc_md_record);
}

static void
seal_record(struct fc_md_record *rec)
{
  rec->crc = crc32c(0, rec, offsetof(struct fc_md_record, crc));
}

bool
fc_md_record_ok(const struct fc_md_record *rec)
{
  static const struct fc_md_record zero;

  /* A never-written record is all zeroes: free, not corrupt. */
  if (!memcmp(rec, &zero, sizeof zero))
    return true;
  return rec->crc == crc32c(0, rec, offsetof(struct fc_md_record, crc));
}

static int
write_header(struct fc_metadata *md, uint32_t state)
{
  char block[FC_MD_HEADER_SIZE] = { 0 };
  struct md_header h = { 0 };

  memcpy(h.magic, FC_MD_MAGIC, sizeof h.magic);
  h.version = FC_MD_VERSION;
  h.block_size = md->block_size;
  h.nr_blocks = md->nr_blocks;
  h.state = state;
  h.record_size = sizeof(struct fc_md_record);
  h.crc = crc32c(0, &h, offsetof(struct md_header, crc));
  memcpy(block, &h, sizeof h);
  return fc_full_pwrite(md->fd, block, sizeof block, 0);
}

int
fc_md_reinit(struct fc_metadata *md, uint32_t block_size, uint32_t nr_blocks)
{
  int r;

  md->block_size = block_size;
  md->nr_blocks = nr_blocks;
  /* Truncating to zero then extending drops every old record at once. */
  if (ftruncate(md->fd, 0) == -1 ||
      ftruncate(md->fd, record_offset(nr_blocks)) == -1)
    return -errno;
  r = write_header(md, FC_MD_STATE_CLEAN);
  if (r)
    return r;
  return fc_md_sync(md);
}

int
fc_md_open(const char *path, uint32_t block_size, uint32_t nr_blocks,
           bool *was_clean, struct fc_metadata **out, char *err, size_t errlen)
{
  struct fc_metadata *md;
  struct md_header h;
  struct stat st;
  int r;

  md = calloc(1, sizeof *md);
  if (!md)
    return -ENOMEM;
  md->block_size = block_size;
  md->nr_blocks = nr_blocks;
  md->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (md->fd == -1) {
    r = -errno;
    snprintf(err, errlen, "cannot open cache metadata %s: %s", path, strerror(-r));
    goto out;
  }
  if (fstat(md->fd, &st) == -1) {
    r = -errno;
    goto out;
  }
  if (st.st_size == 0) {
    r = fc_md_reinit(md, block_size, nr_blocks);
    if (r)
      goto out;
    *was_clean = true;
    *out = md;
    return 0;
  }
  r = fc_full_pread(md->fd, &h, sizeof h, 0);
  if (r) {
    snprintf(err, errlen, "cannot read cache metadata header of %s: %s",
             path, strerror(-r));
    goto out;
  }
  if (memcmp(h.magic, FC_MD_MAGIC, sizeof h.magic) ||
      h.crc != crc32c(0, &h, offsetof(struct md_header, crc)) ||
      h.version != FC_MD_VERSION ||
      h.record_size != sizeof(struct fc_md_record)) {
    r = -EBADMSG;
    snprintf(err, errlen, "%s is not fcache metadata of version %u (bad magic, "
             "version or checksum); refusing to guess what it holds", path,
             FC_MD_VERSION);
    goto out;
  }
  if ((uint64_t)st.st_size < (uint64_t)record_offset(h.nr_blocks)) {
    r = -EBADMSG;
    snprintf(err, errlen, "cache metadata %s is truncated (%lld bytes, "
             "header says %u blocks)", path, (long long)st.st_size, h.nr_blocks);
    goto out;
  }
  /* Keep the on-disk geometry so the caller can read the old records
   * before deciding to reinit. */
  md->block_size = h.block_size;
  md->nr_blocks = h.nr_blocks;
  *was_clean = h.state == FC_MD_STATE_CLEAN;
  *out = md;
  if (h.block_size != block_size || h.nr_blocks != nr_blocks) {
    snprintf(err, errlen, "cache metadata %s was made for %u blocks of %u bytes, "
             "configuration asks for %u blocks of %u bytes", path, h.nr_blocks,
             h.block_size, nr_blocks, block_size);
    return -EMEDIUMTYPE;
  }
  return 0;

out:
  fc_md_close(md);
  return r;
}

void
fc_md_close(struct fc_metadata *md)
{
  if (!md)
    return;
  if (md->fd >= 0)
    close(md->fd);
  free(md);
}

int
fc_md_read(struct fc_metadata *md, uint32_t first, uint32_t n,
           struct fc_md_record *out)
{
  if (first > md->nr_blocks || n > md->nr_blocks - first)
    return -ERANGE;
  return fc_full_pread(md->fd, out, (size_t)n * sizeof *out,
                       record_offset(first));
}

int
fc_md_set(struct fc_metadata *md, cblock_t cb, uint64_t oblock,
          uint64_t volume_tag, uint32_t flags)
{
  struct fc_md_record rec = { 0 };

  if (cb.n >= md->nr_blocks)
    return -ERANGE;
  if (flags) {
    rec.oblock = oblock;
    rec.volume_tag = volume_tag;
    rec.flags = flags;
    seal_record(&rec);
  }
  return fc_full_pwrite(md->fd, &rec, sizeof rec, record_offset(cb.n));
}

/* A record that should be cleared may still name its block: the next
 * start, not knowing which clean record is stale, must trust none. */
static void
disarm_warm_restart(struct fc_metadata *md, cblock_t first, uint32_t n, int err)
{
  if (md->warm_marker[0] && unlink(md->warm_marker) == 0) {
    if (n == 1)
      log_error("cannot clear the metadata record of cache block %u (%s): the "
                "next start drops every clean block", first.n, strerror(-err));
    else
      log_error("cannot clear the metadata records of cache blocks %u to %u "
                "(%s): the next start drops every clean block", first.n,
                first.n + n - 1, strerror(-err));
    md->warm_marker[0] = '\0';
  }
}

int
fc_md_forget(struct fc_metadata *md, cblock_t cb)
{
  int r = fc_md_set(md, cb, 0, 0, 0);

  if (r)
    disarm_warm_restart(md, cb, 1, r);
  return r;
}

int
fc_md_forget_many(struct fc_metadata *md, const cblock_t *cbs, uint32_t n)
{
  int r = fc_md_set_many(md, cbs, NULL, n, 0, 0);

  if (r && n)
    disarm_warm_restart(md, cbs[0], cbs[n - 1].n - cbs[0].n + 1, r);
  return r;
}

int
fc_md_set_many(struct fc_metadata *md, const cblock_t *cbs, const uint64_t *oblocks,
               uint32_t n, uint64_t volume_tag, uint32_t flags)
{
  struct fc_md_record *recs;
  uint32_t i = 0;
  int r = 0;

  if (!n)
    return 0;
  recs = calloc(n, sizeof *recs);
  if (!recs)
    return -ENOMEM;
  for (uint32_t k = 0; k < n; k++) {
    if (cbs[k].n >= md->nr_blocks || (k && cbs[k].n <= cbs[k - 1].n)) {
      r = -ERANGE;
      goto out;
    }
    if (flags) {
      recs[k].oblock = oblocks[k];
      recs[k].volume_tag = volume_tag;
      recs[k].flags = flags;
      seal_record(&recs[k]);
    }
  }
  while (i < n && !r) {
    uint32_t j = i + 1;

    while (j < n && cbs[j].n == cbs[j - 1].n + 1)
      j++;
    r = fc_full_pwrite(md->fd, recs + i, (size_t)(j - i) * sizeof *recs,
                       record_offset(cbs[i].n));
    i = j;
  }
out:
  free(recs);
  return r;
}

int
fc_md_write_all(struct fc_metadata *md, struct fc_md_record *recs)
{
  for (uint32_t i = 0; i < md->nr_blocks; i++)
    if (recs[i].flags)
      seal_record(&recs[i]);
  return fc_full_pwrite(md->fd, recs, (size_t)md->nr_blocks * sizeof *recs,
                        record_offset(0));
}

int
fc_md_set_state(struct fc_metadata *md, uint32_t state)
{
  int r;

  /* The records must be durable before the header vouches for them. */
  r = fc_md_sync(md);
  if (r)
    return r;
  r = write_header(md, state);
  if (r)
    return r;
  return fc_md_sync(md);
}

int
fc_md_sync(struct fc_metadata *md)
{
  return fdatasync(md->fd) == -1 ? -errno : 0;
}
