/* SPDX-License-Identifier: Apache-2.0 */
/* Extent allocator over the flash device; see flash_pool.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flash_pool.h"

void
fc_flash_pool_init(struct fc_flash_pool *p, uint64_t capacity)
{
  memset(p, 0, sizeof *p);
  p->nr_extents = capacity / FC_FLASH_EXTENT;
}

void
fc_flash_pool_fini(struct fc_flash_pool *p)
{
  free(p->segs);
  memset(p, 0, sizeof *p);
}

/* Insert keeping the array sorted by start; segments allocated in one
 * call keep their logical order because each lies after the previous. */
static int
insert(struct fc_flash_pool *p, const char *owner, uint64_t start, uint64_t len)
{
  unsigned i;

  if (p->nr_segs == p->cap_segs) {
    unsigned cap = p->cap_segs ? p->cap_segs * 2 : 16;
    struct fc_flash_seg *n = realloc(p->segs, cap * sizeof *n);
    if (!n)
      return -ENOMEM;
    p->segs = n;
    p->cap_segs = cap;
  }
  for (i = p->nr_segs; i > 0 && p->segs[i - 1].start > start; i--)
    p->segs[i] = p->segs[i - 1];
  snprintf(p->segs[i].owner, sizeof p->segs[i].owner, "%s", owner);
  p->segs[i].start = start;
  p->segs[i].len = len;
  p->nr_segs++;
  return 0;
}

uint64_t
fc_flash_pool_used(const struct fc_flash_pool *p)
{
  uint64_t n = 0;
  for (unsigned i = 0; i < p->nr_segs; i++)
    n += p->segs[i].len;
  return n;
}

uint64_t
fc_flash_pool_owned(const struct fc_flash_pool *p, const char *owner)
{
  uint64_t n = 0;
  for (unsigned i = 0; i < p->nr_segs; i++)
    if (!strcmp(p->segs[i].owner, owner))
      n += p->segs[i].len;
  return n;
}

int
fc_flash_pool_alloc(struct fc_flash_pool *p, const char *owner, uint64_t bytes)
{
  uint64_t want = (bytes + FC_FLASH_EXTENT - 1) / FC_FLASH_EXTENT, pos = 0;
  unsigned before = p->nr_segs, i = 0;
  int r = 0;

  if (strlen(owner) >= FC_FLASH_OWNER_MAX || !owner[0] || strchr(owner, ' ') ||
      strchr(owner, '\n'))
    return -EINVAL;
  if (fc_flash_pool_owned(p, owner))
    return -EEXIST;
  if (want == 0 || want > p->nr_extents - fc_flash_pool_used(p))
    return -ENOSPC;
  /* Walk the gaps in address order.  Inserting shifts later entries, so
   * the walk restarts from the segment just inserted. */
  while (want > 0) {
    uint64_t gap_end = i < p->nr_segs ? p->segs[i].start : p->nr_extents;
    if (gap_end > pos) {
      uint64_t n = gap_end - pos < want ? gap_end - pos : want;
      r = insert(p, owner, pos, n);
      if (r)
        goto out;
      want -= n;
      pos += n;
      i++;                      /* the new segment */
      continue;
    }
    pos = p->segs[i].start + p->segs[i].len;
    i++;
  }
out:
  if (r && p->nr_segs != before)
    fc_flash_pool_free(p, owner);
  return r;
}

uint64_t
fc_flash_pool_free(struct fc_flash_pool *p, const char *owner)
{
  uint64_t freed = 0;
  unsigned j = 0;

  for (unsigned i = 0; i < p->nr_segs; i++) {
    if (!strcmp(p->segs[i].owner, owner))
      freed += p->segs[i].len;
    else
      p->segs[j++] = p->segs[i];
  }
  p->nr_segs = j;
  return freed;
}

unsigned
fc_flash_pool_segments(const struct fc_flash_pool *p, const char *owner,
                       const struct fc_flash_seg **out, unsigned max)
{
  unsigned n = 0;
  for (unsigned i = 0; i < p->nr_segs && n < max; i++)
    if (!strcmp(p->segs[i].owner, owner))
      out[n++] = &p->segs[i];
  return n;
}

int
fc_flash_pool_save(const struct fc_flash_pool *p, const char *path,
                   char *err, size_t errlen)
{
  char tmp[4200];
  FILE *f;
  int r = 0;

  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  f = fopen(tmp, "we");
  if (!f) {
    r = -errno;
    goto out;
  }
  fprintf(f, "# fcache flash pool: owner start length (extents of %u bytes)\n",
          FC_FLASH_EXTENT);
  for (unsigned i = 0; i < p->nr_segs; i++)
    fprintf(f, "%s %" PRIu64 " %" PRIu64 "\n", p->segs[i].owner, p->segs[i].start,
            p->segs[i].len);
  if (fflush(f) || fsync(fileno(f)))
    r = -errno;
  if (fclose(f) && !r)
    r = -errno;
  /* Write, sync, rename: a crash leaves the old table or the new one. */
  if (!r && rename(tmp, path) == -1)
    r = -errno;
out:
  if (r) {
    snprintf(err, errlen, "cannot save the flash pool table %s: %s", path,
             strerror(-r));
    unlink(tmp);
  }
  return r;
}

int
fc_flash_pool_load(struct fc_flash_pool *p, const char *path, char *err, size_t errlen)
{
  char line[256], owner[FC_FLASH_OWNER_MAX];
  unsigned lineno = 0;
  FILE *f = fopen(path, "re");
  int r = 0;

  if (!f) {
    if (errno == ENOENT)
      return 0;
    r = -errno;
    snprintf(err, errlen, "cannot read the flash pool table %s: %s", path,
             strerror(-r));
    return r;
  }
  while (fgets(line, sizeof line, f)) {
    const char *l = line + strspn(line, " \t\r");
    uint64_t start, len;
    char extra;

    lineno++;
    /* A comment or a blank line after blanks too: sscanf skips them, so
     * " #x 0 1" was a segment of owner "#x", which save wrote as a line
     * the next load took for a comment (the segment lost). */
    if (*l == '#' || *l == '\n' || !*l)
      continue;
    if (sscanf(line, "%79s %" SCNu64 " %" SCNu64 " %c", owner, &start, &len, &extra) != 3 ||
        len == 0) {
      snprintf(err, errlen, "%s:%u: expected 'owner start length'", path, lineno);
      r = -EINVAL;
      break;
    }
    if (start > p->nr_extents || len > p->nr_extents - start) {
      snprintf(err, errlen, "%s:%u: segment of %s (extents %" PRIu64 "+%" PRIu64
               ") lies past the flash capacity (%" PRIu64 " extents); was "
               "cache_size reduced? Restore it", path, lineno, owner, start, len,
               p->nr_extents);
      r = -ERANGE;
      break;
    }
    for (unsigned i = 0; i < p->nr_segs; i++) {
      const struct fc_flash_seg *s = &p->segs[i];
      if (start < s->start + s->len && s->start < start + len) {
        snprintf(err, errlen, "%s:%u: segment of %s overlaps one of %s; the table "
                 "is corrupt", path, lineno, owner, s->owner);
        r = -EUCLEAN;
        goto out;
      }
    }
    /* Sorted by address; an owner's segments ascend, so its logical
     * order (that of the dm-linear table) is kept. */
    r = insert(p, owner, start, len);
    if (r)
      goto out;
  }
out:
  fclose(f);
  return r;
}
