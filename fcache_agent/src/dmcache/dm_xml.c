/* SPDX-License-Identifier: Apache-2.0 */
/* Cache and era metadata XML; see dm_xml.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dm_xml.h"

static const char b64[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void
fc_b64_le32(uint32_t v, char out[9])
{
  uint8_t b[6] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                   (uint8_t)(v >> 24), 0, 0 };

  /* 4 bytes: one full group of 3 and one of 1, padded with "==". */
  for (int g = 0; g < 2; g++) {
    uint32_t w = (uint32_t)b[3 * g] << 16 | (uint32_t)b[3 * g + 1] << 8 | b[3 * g + 2];
    for (int k = 0; k < 4; k++)
      out[4 * g + k] = b64[(w >> (18 - 6 * k)) & 63];
  }
  out[6] = out[7] = '=';
  out[8] = '\0';
}

int
fc_b64_to_le32(const char *s, uint32_t *v)
{
  uint8_t b[6] = { 0 };
  size_t nb = 0;
  uint32_t acc = 0;
  int bits = 0;

  for (; *s && *s != '"' && *s != '='; s++) {
    const char *p = strchr(b64, *s);
    if (!p || !*s)
      return -EINVAL;
    acc = acc << 6 | (uint32_t)(p - b64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (nb < sizeof b)
        b[nb++] = (uint8_t)(acc >> bits);
    }
  }
  if (nb < 4)
    return -EINVAL;
  *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  return 0;
}

/* The value of attribute name in an element line: ` name="...` (the tools
 * also write `end = "12"`).  NULL if absent. */
static const char *
attr(const char *line, const char *name)
{
  size_t n = strlen(name);

  for (const char *p = strstr(line, name); p; p = strstr(p + 1, name)) {
    const char *q = p + n;
    if (p == line || (p[-1] != ' ' && p[-1] != '\t'))
      continue;
    while (*q == ' ')
      q++;
    if (*q++ != '=')
      continue;
    while (*q == ' ')
      q++;
    if (*q == '"')
      return q + 1;
  }
  return NULL;
}

static int
attr_u64(const char *line, const char *name, uint64_t *v)
{
  const char *s = attr(line, name);
  char *end;

  if (!s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  *v = strtoull(s, &end, 10);
  return errno || *end != '"' ? -EINVAL : 0;
}

void
fc_dmc_dump_free(struct fc_dmc_dump *d)
{
  free(d->map);
  d->map = NULL;
  d->n = 0;
}

int
fc_dmc_xml_read(const char *path, struct fc_dmc_dump *out, char *err, size_t errlen)
{
  FILE *f = fopen(path, "re");
  uint32_t *index = NULL, cap = 0;   /* cache block -> map entry + 1 */
  bool have_sb = false;
  size_t linecap = 0;
  char *line = NULL;
  unsigned lineno = 0;
  int r = 0;

  memset(out, 0, sizeof *out);
  if (!f) {
    r = -errno;
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(-r));
    return r;
  }
  while (getline(&line, &linecap, f) != -1) {
    uint64_t cb, ob, bs, nr;

    lineno++;
    if (strstr(line, "<superblock")) {
      const char *pol = attr(line, "policy");
      /* cache_dump writes one superblock.  A second would replace the map
       * while out->n still counted the first one's entries: the old map
       * leaked, and a smaller new one was written past its end (found by
       * fuzz/fuzz_dm_xml.c). */
      if (have_sb || attr_u64(line, "block_size", &bs) || attr_u64(line, "nr_cache_blocks", &nr) ||
          nr > UINT32_MAX - 1) {
        r = -EINVAL;
        break;
      }
      /* The map is indexed by cache block: a dump claiming billions of
       * them would have us allocate gigabytes before reading one mapping
       * (found by fuzz/fuzz_dm_xml.c).  2^26 blocks is a 2 TiB cache at
       * dm-cache's smallest block, 64 TiB at 1 MiB. */
      if (nr > FC_DMC_XML_MAX_CACHE_BLOCKS) {
        snprintf(err, errlen, "%s: nr_cache_blocks %llu is more than the %u this "
                 "agent handles; use a larger block_size", path,
                 (unsigned long long)nr, FC_DMC_XML_MAX_CACHE_BLOCKS);
        r = -E2BIG;
        break;
      }
      out->block_sectors = bs;
      out->nr_cache_blocks = nr;
      snprintf(out->policy, sizeof out->policy, "%.*s",
               pol ? (int)strcspn(pol, "\"") : 0, pol ? pol : "");
      index = calloc(nr + 1, sizeof *index);
      out->map = calloc(nr + 1, sizeof *out->map);
      if (!index || !out->map) {
        r = -ENOMEM;
        break;
      }
      cap = (uint32_t)nr;
      have_sb = true;
    } else if (strstr(line, "<mapping ")) {
      const char *d = attr(line, "dirty");
      if (!have_sb || attr_u64(line, "cache_block", &cb) ||
          attr_u64(line, "origin_block", &ob) || cb >= cap || index[cb] || !d) {
        r = -EINVAL;
        break;
      }
      out->map[out->n] = (struct fc_dmc_mapping){
        .oblock = to_oblock(ob), .cblock = to_cblock((uint32_t)cb),
        .dirty = !strncmp(d, "true", 4) };
      index[cb] = ++out->n;
    } else if (strstr(line, "<hint ")) {
      const char *d = attr(line, "data");
      uint32_t h;
      if (!have_sb || attr_u64(line, "cache_block", &cb) || cb >= cap || !d ||
          fc_b64_to_le32(d, &h)) {
        r = -EINVAL;
        break;
      }
      if (index[cb])
        out->map[index[cb] - 1].hint = h;
    }
  }
  if (!r && !have_sb)
    r = -EINVAL;
  if (r) {
    if (r != -E2BIG)
      snprintf(err, errlen, "%s is not cache metadata XML as cache_dump writes it "
               "(line %u)", path, lineno);
    fc_dmc_dump_free(out);
  }
  free(line);
  free(index);
  fclose(f);
  return r;
}

int
fc_dmc_xml_write(const char *path, uint64_t block_sectors, uint64_t nr_cache_blocks,
                 const struct fc_dmc_mapping *map, uint32_t n, char *err, size_t errlen)
{
  FILE *f = fopen(path, "we");
  int r = 0;

  if (!f) {
    r = -errno;
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(-r));
    return r;
  }
  fprintf(f, "<superblock uuid=\"\" block_size=\"%" PRIu64 "\" nr_cache_blocks=\"%"
          PRIu64 "\" policy=\"smq\" hint_width=\"4\">\n  <mappings>\n", block_sectors,
          nr_cache_blocks);
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "    <mapping cache_block=\"%u\" origin_block=\"%" PRIu64
            "\" dirty=\"%s\"/>\n", map[i].cblock.n, map[i].oblock.n,
            map[i].dirty ? "true" : "false");
  fputs("  </mappings>\n  <hints>\n", f);
  for (uint32_t i = 0; i < n; i++) {
    char h[9];
    fc_b64_le32(map[i].hint, h);
    fprintf(f, "    <hint cache_block=\"%u\" data=\"%s\"/>\n", map[i].cblock.n, h);
  }
  fputs("  </hints>\n</superblock>\n", f);
  if (ferror(f) || fflush(f) || fsync(fileno(f)))
    r = -EIO;
  if (fclose(f) && !r)
    r = -EIO;
  if (r)
    snprintf(err, errlen, "cannot write %s", path);
  return r;
}

int
fc_era_xml_read(const char *path, uint64_t max_block, uint64_t **blocks, uint32_t *n,
                char *err, size_t errlen)
{
  FILE *f = fopen(path, "re");
  uint64_t *v = NULL;
  uint32_t k = 0, cap = 0;
  size_t linecap = 0;
  char *line = NULL;
  int r = 0;

  if (!f) {
    r = -errno;
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(-r));
    return r;
  }
  while (!r && getline(&line, &linecap, f) != -1) {
    uint64_t a = 0, b = 0;

    if (strstr(line, "<block ")) {
      if (attr_u64(line, "block", &a))
        r = -EINVAL;
      b = a + 1;
    } else if (strstr(line, "<range ")) {
      if (attr_u64(line, "begin", &a) || attr_u64(line, "end", &b) || b < a)
        r = -EINVAL;
    } else {
      continue;
    }
    if (r)
      break;
    if (b > max_block)
      b = max_block;
    for (uint64_t x = a; x < b; x++) {
      if (k == cap) {
        uint32_t nc = cap ? cap * 2 : 256;
        uint64_t *nv = realloc(v, nc * sizeof *nv);
        if (!nv) {
          r = -ENOMEM;
          break;
        }
        v = nv;
        cap = nc;
      }
      v[k++] = x;
    }
  }
  if (r) {
    snprintf(err, errlen, "%s is not an era_invalidate block list", path);
    free(v);
    v = NULL;
    k = 0;
  }
  free(line);
  fclose(f);
  *blocks = v;
  *n = k;
  return r;
}
